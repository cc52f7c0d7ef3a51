"""Suite 3's per-run figures: which jobs count as unserved at the end of the window."""

from __future__ import annotations

from gpudefrag.capacity.classes import RESEARCH
from gpudefrag.capacity.failures import Outage
from gpudefrag.experiments.suite3.summary import summarise3
from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.model.jobs import Job
from gpudefrag.model.topology import superpod
from gpudefrag.sim.capacity_model import Sim3Config
from gpudefrag.sim.capacity_sim import simulate3

H = 3600.0


def test_only_jobs_submitted_before_the_grace_count_as_unserved():
    # one 8-GPU node, busy for the whole window with job 0; jobs 1 and 2 never start
    jobs = [
        Job(0, 0.0, 100 * H, 8, priority=RESEARCH),
        Job(1, 1 * H, 1 * H, 8, priority=RESEARCH),  # waited 9 h at the end
        Job(2, 10 * H - 300.0, 1 * H, 8, priority=RESEARCH),  # 300 s before the end
    ]
    topo = superpod(1, 1)
    result = simulate3(topo, jobs, GangAware(Workload.from_jobs(jobs)), Sim3Config(0.0, 10 * H))
    assert result.pending_at_end == 2
    assert summarise3(result, 8, serve_grace_s=660.0)["unserved_at_end"] == 1.0
    assert summarise3(result, 8, serve_grace_s=200.0)["unserved_at_end"] == 2.0
    assert summarise3(result, 8)["unserved_at_end"] == 2.0


def test_jobs_that_never_started_count_in_the_waits_with_the_time_to_the_end():
    jobs = [
        Job(0, 0.0, 100 * H, 8, priority=RESEARCH),
        Job(1, 1 * H, 1 * H, 8, priority=RESEARCH),
        Job(2, 10 * H - 300.0, 1 * H, 8, priority=RESEARCH),
    ]
    result = simulate3(superpod(1, 1), jobs, GangAware(Workload.from_jobs(jobs)), Sim3Config(0.0, 10 * H))
    m = summarise3(result, 8)
    assert m["wait_p50_s_research"] == 300.0  # waits 0, 300 s and 9 h (still waiting)
    assert m["wait_p95_s_research"] > 8 * H


def test_a_failed_gang_not_restarted_by_the_end_counts_from_its_failure_to_the_end():
    # a 16-GPU gang on both nodes; node 0 fails at 5 h and is repaired only after the end
    jobs = [Job(0, 0.0, 100 * H, 16, priority=RESEARCH)]
    outages = [Outage(5 * H, 0, 50 * H, False)]
    result = simulate3(
        superpod(2, 2), jobs, GangAware(Workload.from_jobs(jobs)), Sim3Config(0.0, 10 * H), outages
    )
    m = summarise3(result, 8)
    assert (m["failed_not_restarted"], m["failed_restarts"]) == (1.0, 0.0)
    assert m["restart_gang_p95_s"] == 5 * H
