"""Suite 3's per-run figures: which jobs count as unserved at the end of the window."""

from __future__ import annotations

from gpudefrag.capacity.classes import RESEARCH
from gpudefrag.capacity.sim3 import Sim3Config, simulate3
from gpudefrag.experiments.summary3 import summarise3
from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.model.jobs import Job
from gpudefrag.model.topology import superpod

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
