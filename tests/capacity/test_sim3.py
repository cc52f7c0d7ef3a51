"""Suite 3's simulator: failures, restarts, spares, preemption and elastic nodes."""

from __future__ import annotations

import numpy as np
import pytest

from gpudefrag.capacity.classes import BEST_EFFORT, PRODUCTION, RESEARCH
from gpudefrag.capacity.failures import Outage
from gpudefrag.capacity.spares import spare_nodes
from gpudefrag.capacity.victims import CheckpointAwareVictims, KaiVictims, KubeDefaultVictims
from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.gangs.volcano import VolcanoBinpack
from gpudefrag.model.jobs import Job, parse_constraint
from gpudefrag.model.topology import superpod
from gpudefrag.sim.capacity_model import ElasticConfig, Sim3Config
from gpudefrag.sim.capacity_sim import simulate3

H = 3600.0


def _policy(jobs):
    return GangAware(Workload.from_jobs(jobs))


def _random_jobs(rng: np.random.Generator, n: int, horizon_s: float) -> list[Job]:
    sizes = [1, 1, 2, 4, 8, 8, 16, 32]
    jobs = []
    for i in range(n):
        g = int(rng.choice(sizes))
        milli = 500 if g == 1 and rng.random() < 0.2 else 1000
        c = parse_constraint("required:leaf") if g > 8 and rng.random() < 0.5 else None
        jobs.append(
            Job(
                i,
                float(rng.uniform(0, horizon_s)),
                float(rng.uniform(0.5 * H, 12 * H)),
                g,
                milli,
                int(rng.integers(0, 3)),
                c,
            )
        )
    return jobs


def test_every_node_fails_once_and_no_job_is_lost():
    topo = superpod(16, 8)
    rng = np.random.default_rng(4)
    jobs = _random_jobs(rng, 120, 24 * H)
    outages = [Outage(2 * H + 1800.0 * n, n, 2 * H + 1800.0 * n + 3 * H, False) for n in range(16)]
    cfg = Sim3Config(0.0, 200 * H, checkpoint_interval_s=1800.0, restart_s=300.0, check_every_event=True)
    r = simulate3(topo, jobs, _policy(jobs), cfg, outages)
    assert r.failures == 16 and r.jobs_killed_by_failure > 0
    # every job completed: none lost, none stuck (the horizon is long enough)
    assert r.completed == len(jobs) and r.pending_at_end == 0 and r.running_at_end == 0
    assert all(rec.end_s is not None for rec in r.records)
    assert len(r.restart_times_s) == r.jobs_killed_by_failure
    assert all(t >= cfg.restart_s for _, t in r.restart_times_s)
    assert r.lost_gpu_s["failure"] > 0 and r.lost_gpu_s["preemption"] == 0


def test_a_failed_gang_loses_its_work_since_the_checkpoint_and_restarts_whole():
    topo = superpod(4, 4)  # four nodes of 8 GPUs
    job = Job(1, 0.0, 10 * H, 32)  # all four nodes
    outages = [Outage(2.5 * H, 2, 3.5 * H, False)]
    cfg = Sim3Config(0.0, 30 * H, checkpoint_interval_s=H, restart_s=600.0)
    r = simulate3(topo, [job], _policy([job]), cfg, outages)
    # checkpoints at 1 h and 2 h of work: 0.5 h x 32 GPUs lost; the gang waits for the repair
    assert r.lost_gpu_s["failure"] == pytest.approx(0.5 * H * 32)
    assert r.restart_times_s == [(32, pytest.approx(1 * H + 600.0))]
    rec = r.records[0]
    assert rec.kills == 1 and rec.end_s == pytest.approx(3.5 * H + 600.0 + 8 * H)
    assert r.restart_gpu_s == pytest.approx(600.0 * 32)
    assert r.restart_gpu_s_by_cause == {
        "failure": pytest.approx(600.0 * 32),
        "preemption": 0.0,
        "migration": 0.0,
    }


def test_dedicated_spares_serve_only_failed_jobs_and_pooled_ones_backfill_best_effort():
    topo = superpod(4, 4)
    spares = spare_nodes(topo, "dedicated", 0.25)  # one node of four
    assert spares.sum() == 1
    be = Job(1, 0.0, 10 * H, 32, priority=BEST_EFFORT)  # asks all four nodes
    cfg = Sim3Config(0.0, 5 * H, spare_policy="dedicated")
    r = simulate3(topo, [be], _policy([be]), cfg, spares=spares)
    assert r.records[0].start_s is None  # three usable nodes cannot hold it
    pooled = Sim3Config(0.0, 5 * H, spare_policy="pooled-leaf")
    r = simulate3(topo, [be], _policy([be]), pooled, spares=spares)
    assert r.records[0].start_s == 0.0


def test_a_failed_job_evicts_best_effort_work_from_a_pooled_spare():
    topo = superpod(2, 2)
    spares = np.array([False, True])
    prod = Job(1, 0.0, 10 * H, 8, priority=PRODUCTION)
    be = Job(2, 60.0, 20 * H, 8, priority=BEST_EFFORT)
    outages = [Outage(H, 0, 50 * H, False)]
    cfg = Sim3Config(0.0, 12 * H, spare_policy="pooled-cluster", checkpoint_interval_s=1800.0)
    r = simulate3(topo, [prod, be], _policy([prod, be]), cfg, outages, spares)
    assert r.spare_evictions == 1 and r.lost_gpu_s["preemption"] == pytest.approx(8 * (H - 60.0 - 1800.0))
    assert r.restart_times_s == [(8, pytest.approx(cfg.restart_s))]


@pytest.mark.parametrize("rule", [KubeDefaultVictims, KaiVictims, CheckpointAwareVictims])
def test_preemption_starts_the_production_job_at_once(rule):
    topo = superpod(2, 2)
    low = Job(1, 0.0, 20 * H, 16, priority=RESEARCH)
    high = Job(2, 1.25 * H, 2 * H, 8, priority=PRODUCTION)
    cfg = Sim3Config(0.0, 30 * H, check_every_event=True)
    r = simulate3(topo, [low, high], _policy([low, high]), cfg, victims=rule())
    assert r.preemptions == 1 and r.records[1].start_s == 1.25 * H
    assert r.records[0].kills == 1 and r.records[0].end_s is not None  # requeued, then completed
    # the last checkpoint was at 1 h of work: 0.25 h x 16 GPUs thrown away
    assert r.lost_gpu_s["preemption"] == pytest.approx(16 * 0.25 * H)
    # its restart when it runs again (after the production job, at 3.25 h) is charged to preemption
    assert (
        r.restart_gpu_s_by_cause["preemption"] == pytest.approx(16 * 300.0) == pytest.approx(r.restart_gpu_s)
    )


def test_a_research_job_waits_for_its_victims_checkpoint_and_production_never_does():
    # a best-effort job fills the node from 0 s; checkpoints every 1,800 s of work.  The
    # preemptor comes at 4,500 s: 900 s of work since the 3,600 s checkpoint would be lost; the
    # next is at 5,400 s.  Waiting up to 1,200 s, a research job starts at 5,401 s (1 s lost);
    # up to 600 s, or as a production job, it starts at once (900 s lost).
    def run(prio: int, wait_s: float):
        low = Job(1, 0.0, 20 * H, 8, priority=BEST_EFFORT)
        high = Job(2, 4500.0, 2 * H, 8, priority=prio)
        cfg = Sim3Config(0.0, 30 * H, check_every_event=True, checkpoint_wait_s=wait_s)
        return simulate3(
            superpod(1, 1), [low, high], _policy([low, high]), cfg, victims=CheckpointAwareVictims()
        )

    waited = run(RESEARCH, 1200.0)
    assert waited.records[1].start_s == 5401.0 and waited.preemption_waits == 1 and waited.preemptions == 1
    assert waited.lost_gpu_s["preemption"] == pytest.approx(8 * 1.0)
    for prio, wait_s in ((RESEARCH, 600.0), (PRODUCTION, 1200.0), (RESEARCH, 0.0)):
        r = run(prio, wait_s)
        assert r.records[1].start_s == 4500.0 and r.preemption_waits == 0
        assert r.lost_gpu_s["preemption"] == pytest.approx(8 * 900.0)
    with pytest.raises(ValueError, match="checkpoint_wait_s"):
        Sim3Config(0.0, H, checkpoint_wait_s=1800.0)


def test_jobs_waiting_for_checkpoints_wait_side_by_side_on_different_victims():
    # node 0: best-effort job 1 from 0 s (checkpoints 3,600, 5,400 s); node 1: job 2 from 600 s
    # (4,200, 6,000 s).  Research jobs 3 and 4 come at 4,500 s, may wait 1,200 s.  Job 3 (first
    # in the queue): job 2 costs 8 x (300 + 300) = 4,800 now, job 1 8 x (1 + 300) = 2,408 at
    # 5,401 s: it waits for job 1.  Job 4 may not take job 1 (job 3 waits for it) and job 2's
    # next checkpoint is too late: it preempts job 2 at once, instead of waiting behind job 3.
    jobs = [
        Job(1, 0.0, 20 * H, 8, priority=BEST_EFFORT),
        Job(2, 600.0, 20 * H, 8, priority=BEST_EFFORT),
        Job(3, 4500.0, 2 * H, 8, priority=RESEARCH),
        Job(4, 4500.0, 2 * H, 8, priority=RESEARCH),
    ]
    cfg = Sim3Config(0.0, 30 * H, check_every_event=True, checkpoint_wait_s=1200.0)
    r = simulate3(superpod(2, 2), jobs, _policy(jobs), cfg, victims=CheckpointAwareVictims())
    assert [rec.start_s for rec in r.records[2:]] == [5401.0, 4500.0]
    assert r.preemption_waits == 1 and r.preemptions == 2
    assert r.lost_gpu_s["preemption"] == pytest.approx(8 * 1.0 + 8 * 300.0)


def test_same_inputs_same_event_hash():
    topo = superpod(12, 4)
    jobs = _random_jobs(np.random.default_rng(9), 80, 24 * H)
    outages = [Outage(5 * H, 3, 9 * H, False), Outage(7 * H, 8, 8 * H, False)]
    cfg = Sim3Config(0.0, 60 * H, spare_policy="pooled-leaf", check_every_event=True)
    spares = spare_nodes(topo, "pooled-leaf", 0.2)
    a = simulate3(topo, jobs, VolcanoBinpack(), cfg, outages, spares, CheckpointAwareVictims())
    b = simulate3(topo, jobs, VolcanoBinpack(), cfg, outages, spares, CheckpointAwareVictims())
    assert a.event_hash == b.event_hash and a.goodput == b.goodput


def test_elastic_mode_powers_idle_nodes_off_and_on_again_for_new_work():
    topo = superpod(8, 4)
    first = [Job(i, 0.0, 2 * H, 8) for i in range(2)]
    later = [Job(10 + i, 20 * H, 2 * H, 8) for i in range(6)]
    jobs = first + later
    el = ElasticConfig(tick_s=300.0, idle_off_s=1800.0, provision_s=600.0)
    fixed = simulate3(topo, jobs, _policy(jobs), Sim3Config(0.0, 30 * H))
    elastic = simulate3(
        topo, jobs, _policy(jobs), Sim3Config(0.0, 30 * H, elastic=el, check_every_event=True)
    )
    assert fixed.node_hours == pytest.approx(8 * 30)
    # by hand (ticks every 300 s; a node's idle time counts from the last tick it was busy; one
    # warm node, ceil(0.05 x 8)): 8 on until 0.5 h, then 3; at 2 h the long-idle warm node goes
    # off (2 on), at 2 h 25 min one more (1 on); at 20 h one job starts on it and 5 nodes are
    # powered on (6); off at 22 h 25 min (5) and 22 h 35 min (1) -> off 5 + 1 + 1 + 1 + 4 = 12
    hours = 8 * 0.5 + 3 * 1.5 + 2 * (25 / 60) + 1 * (20 - 2 - 25 / 60) + 6 * (2 + 25 / 60)
    hours += 5 * (10 / 60) + 1 * (30 - 22 - 35 / 60)
    assert elastic.node_hours == pytest.approx(hours)
    assert (elastic.powered_off, elastic.powered_on) == (12, 5)
    assert elastic.completed == fixed.completed == len(jobs)
    late = [r.start_s - r.job.submit_s for r in elastic.records if r.job.job_id >= 10]
    assert max(late) <= 600.0 + 300.0 + 1e-6  # one tick to notice, then the provisioning delay


def test_the_warm_pool_keeps_idle_nodes_on_so_new_work_starts_at_once():
    # 8 nodes, busy for 2 h, then idle until a 16-GPU job (2 whole nodes) arrives at 20 h
    topo = superpod(8, 4)
    jobs = [Job(i, 0.0, 2 * H, 8) for i in range(8)] + [Job(20, 20 * H, H, 16)]
    results = {}
    for warm in (0.0, 0.25):  # 0.25 x 8 nodes: 2 idle nodes stay on
        el = ElasticConfig(tick_s=60.0, idle_off_s=1800.0, provision_s=600.0, warm_fraction=warm)
        results[warm] = simulate3(
            topo, jobs, _policy(jobs), Sim3Config(0.0, 30 * H, elastic=el, check_every_event=True)
        )
    cold, warm = results[0.0], results[0.25]
    wait = {
        k: next(r.start_s - r.job.submit_s for r in v.records if r.job.job_id == 20)
        for k, v in results.items()
    }
    assert wait[0.25] == 0.0
    assert 600.0 <= wait[0.0] <= 600.0 + 60.0 + 1e-6  # a tick to notice, then provisioning
    # cold: all 8 off, 2 on again for the job and off once it ends = 10; warm: 6 off, never on
    assert (cold.powered_off, cold.powered_on) == (10, 2) and (warm.powered_off, warm.powered_on) == (6, 0)
    # the two warm nodes cost node-hours: on from 2.5 h (idle_off_s after the jobs end) to 30 h
    assert warm.node_hours > cold.node_hours


def test_a_failed_gang_keeps_its_healthy_nodes_until_it_restarts():
    # three nodes: gang G (16 GPUs) on two of them, X on the third; W (8 GPUs) waits for room.
    # Node 0 fails at 1 h and is repaired at 2 h.
    topo = superpod(3, 3)
    g = Job(1, 0.0, 10 * H, 16, priority=PRODUCTION)
    x = Job(2, 0.0, 20 * H, 8)
    w = Job(3, 0.5 * H, 5 * H, 8)
    outages = [Outage(H, 0, 2 * H, False)]
    starts = {}
    for hold in (3600.0, 0.0):
        cfg = Sim3Config(0.0, 40 * H, hold_failed_gang_s=hold, check_every_event=True)
        r = simulate3(topo, [g, x, w], _policy([g, x, w]), cfg, outages)
        assert r.records[0].kills == 1
        starts[hold] = {rec.job.job_id: rec.start_s for rec in r.records}, r.restart_times_s
    (held_start, held_restart), (free_start, free_restart) = starts[3600.0], starts[0.0]
    # held: W does not take G's healthy node; G restarts on it and node 0 once repaired (2 h)
    assert held_restart == [(16, pytest.approx(H + 300.0))] and held_start[3] > 2 * H
    # not held: W takes the healthy node at 1 h, and G waits for W to end (1 h + 5 h)
    assert free_start[3] == pytest.approx(H) and free_restart == [(16, pytest.approx(5 * H + 300.0))]


def test_the_spare_role_moves_to_the_repaired_node_after_a_failed_gang_takes_a_spare():
    # dedicated reserve: node 2 of three.  G (16 GPUs) on nodes 0 and 1; node 0 fails at 1 h,
    # repaired at 5 h.  G restarts at once on node 1 (held) and the spare; node 0, once
    # repaired, becomes the spare, so a regular job R arriving at 6 h cannot use it.
    topo = superpod(3, 3)
    spares = np.array([False, False, True])
    g = Job(1, 0.0, 10 * H, 16, priority=PRODUCTION)
    rr = Job(2, 6 * H, H, 8, priority=PRODUCTION)
    outages = [Outage(H, 0, 5 * H, False)]
    cfg = Sim3Config(0.0, 40 * H, spare_policy="dedicated", check_every_event=True)
    r = simulate3(topo, [g, rr], _policy([g, rr]), cfg, outages, spares)
    assert r.restart_times_s == [(16, pytest.approx(300.0))]
    assert r.spare_swaps == 1
    g_end = r.records[0].end_s
    assert g_end is not None and r.records[1].start_s == pytest.approx(g_end)  # R waited for G


def test_a_failed_gangs_hold_ends_on_time_without_another_event():
    # as above, but node 0 is repaired only at 10 h: the 1 h hold ends at 2 h and W, waiting
    # since 0.5 h, takes the healthy node then (no other event happens at 2 h)
    topo = superpod(3, 3)
    g = Job(1, 0.0, 10 * H, 16, priority=PRODUCTION)
    x = Job(2, 0.0, 20 * H, 8)
    w = Job(3, 0.5 * H, 5 * H, 8)
    cfg = Sim3Config(0.0, 40 * H, hold_failed_gang_s=3600.0, check_every_event=True)
    r = simulate3(topo, [g, x, w], _policy([g, x, w]), cfg, [Outage(H, 0, 10 * H, False)])
    assert {rec.job.job_id: rec.start_s for rec in r.records}[3] == pytest.approx(2 * H)


def test_counters_and_restart_times_cover_the_window_only():
    # one node, one long job; the node fails at 0.5 h (warm-up) and at 5 h (in the window
    # [2 h, 10 h)); each repair takes 30 min
    topo = superpod(1, 1)
    jobs = [Job(0, 0.0, 20 * H, 8)]
    outages = [Outage(0.5 * H, 0, 0.6 * H, False), Outage(5 * H, 0, 5.5 * H, False)]
    r = simulate3(topo, jobs, _policy(jobs), Sim3Config(2 * H, 10 * H), outages)
    assert (r.failures, r.jobs_killed_by_failure) == (1, 1)
    assert r.restart_times_s == [(8, pytest.approx(0.5 * H + 300.0))]
    assert r.completed == 0 and r.records == []  # submitted before the window


def test_an_elastic_drain_never_moves_a_job_onto_an_idle_node():
    # six nodes; at 1 h every job ends but S (2 GPUs, alone on its node): with nowhere busy to
    # go, S stays where it is, and idle nodes go off only after idle_off_s, warm pool kept
    topo = superpod(6, 6)
    jobs = [Job(i, 0.0, H, 8) for i in range(5)] + [Job(9, 0.0, 10 * H, 2)]
    el = ElasticConfig(tick_s=60.0, idle_off_s=1800.0, provision_s=600.0, warm_fraction=0.2)
    cfg = Sim3Config(0.0, 9 * H, elastic=el, check_every_event=True)  # S still runs at the end
    r = simulate3(topo, jobs, _policy(jobs), cfg, victims=CheckpointAwareVictims())
    assert (r.moves, r.drains) == (0, 0)
    assert r.powered_off == 5 - 2  # two idle nodes stay on as the warm pool
    assert r.lost_gpu_s["migration"] == 0.0


def test_an_elastic_drain_moves_a_lone_small_job_onto_a_busy_node():
    # C (6 GPUs) and E (2 GPUs, ends at 1 h) fill one node; D (2 GPUs) arrives at 0.1 h and
    # goes to the other.  When E ends, D moves next to C and its node is released at once.
    topo = superpod(2, 2)
    c, e = Job(0, 0.0, 10 * H, 6), Job(1, 0.0, H, 2)
    d = Job(2, 0.1 * H, 10 * H, 2)
    el = ElasticConfig(tick_s=60.0, idle_off_s=1800.0, provision_s=600.0)
    cfg = Sim3Config(0.0, 12 * H, elastic=el, check_every_event=True)
    r = simulate3(topo, [c, e, d], _policy([c, e, d]), cfg, victims=CheckpointAwareVictims())
    assert (r.moves, r.drains, r.powered_off) == (1, 1, 1)
    assert r.records[2].moves == 1
    # D had worked 0.9 h at the first tick after 1 h: the 1,440 s since its checkpoint are lost
    assert r.lost_gpu_s["migration"] == pytest.approx(2 * 1440.0, abs=2 * 60.0)


def test_standby_nodes_start_off_and_let_an_elastic_cluster_grow_beyond_its_pool():
    # a pool of 2 nodes plus 2 standby nodes; four 8-GPU jobs of 2 h arrive at once
    topo = superpod(4, 4)
    jobs = [Job(i, 0.0, 2 * H, 8) for i in range(4)]
    el = ElasticConfig(tick_s=60.0, idle_off_s=1800.0, provision_s=600.0)
    grown = simulate3(
        topo,
        jobs,
        _policy(jobs),
        Sim3Config(0.0, 10 * H, elastic=el, standby_nodes=2, check_every_event=True),
    )
    capped = simulate3(
        superpod(2, 4), jobs, _policy(jobs), Sim3Config(0.0, 10 * H, elastic=el, check_every_event=True)
    )
    start = {r.job.job_id: r.start_s for r in grown.records}
    # two start at once on the pool; the first tick powers on both standby nodes (usable 600 s later)
    assert sorted(start.values()) == pytest.approx([0.0, 0.0, 660.0, 660.0])
    assert grown.powered_on == 2
    assert sorted(r.start_s for r in capped.records) == pytest.approx([0.0, 0.0, 2 * H, 2 * H])
    # capacity shares are measured against the pool's 16 GPUs in both: 4 x 8 GPUs x 2 h of 16 x 10 h
    assert grown.total_gpus == capped.total_gpus == 16
    assert grown.allocation == pytest.approx(capped.allocation) == pytest.approx(64 / 160)
    # billed, by hand (a node's idle time counts from the last tick it was busy; one warm node,
    # ceil(0.05 x 2)): the pool's nodes are idle from 7,140 s and go off at 8,940 s; the standby
    # nodes are billed from their power-on at 60 s, idle from 7,800 s, and one goes off at 9,600 s
    # while the other stays on as the warm node -> 2 x 8,940 + 9,540 + 35,940 node-seconds
    assert grown.node_hours == pytest.approx((2 * 8940 + 9540 + 35940) / H)
    assert grown.powered_off == 3
    # capped: both busy until 4 h, idle from 14,340 s, one off at 16,140 s, one warm to the end
    assert capped.node_hours == pytest.approx((16140 + 36000) / H)


def test_standby_nodes_need_elastic_mode_and_a_pool_left_on():
    with pytest.raises(ValueError, match="standby_nodes"):
        Sim3Config(0.0, H, standby_nodes=1)
    el = ElasticConfig()
    with pytest.raises(ValueError, match="standby_nodes"):
        simulate3(
            superpod(2, 2),
            [Job(0, 0.0, H, 8)],
            VolcanoBinpack(),
            Sim3Config(0.0, H, elastic=el, standby_nodes=2),
        )
