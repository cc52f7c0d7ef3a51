"""The time-driven simulator (issue 4): engine, synthetic workloads, lifecycle, invariants, hooks.

Tiny hand-made workloads carry the arithmetic in comments; one smoke run uses ~150 sampled
openb nodes.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import place_in_order, timed_workload
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.model.port import Bind, Move, Reserve, SchedulingDecision
from gpudefrag.policies.registry import make_policy
from gpudefrag.policies.scheduler import PolicyScheduler
from gpudefrag.sim.engine import EventLog, EventQueue
from gpudefrag.sim.events import Event, InvariantError
from gpudefrag.sim.latency import LatencyModel
from gpudefrag.sim.lifecycle import PodPhase
from gpudefrag.sim.reservations import Reservations
from gpudefrag.sim.timed import Simulator, TimedConfig, run_timed
from gpudefrag.workloads.openb import NodeTable, PodTable
from gpudefrag.workloads.synthetic import (
    durations_from_table,
    make_workload,
    sample_cluster,
)

T4x2 = ("T4", 2, 32000, 131072)
T4x4 = ("T4", 4, 64000, 262144)
V1 = ("V100M16", 1, 8000, 32768)


def gpu_pod(n: int = 1, milli: int = 1000, cpu: int = 1000, name: str = "") -> PodSpec:
    return PodSpec(cpu, 1024, n, milli, -1, name)


def timed(latency_s: float = 0.0, **kwargs) -> TimedConfig:
    """A run's config with a constant decision latency: 0 s unless given (the hand-worked times
    assume it; the stub schedulers used to carry their latency, 0 by default)."""
    return TimedConfig(latency=LatencyModel.constant(latency_s), **kwargs)


class Stub:
    """What a test scheduler needs beside ``decide``."""

    name = "stub"

    def reset(self) -> None:
        pass


class FirstFit(Stub):
    """Lowest node index that fits (a pod's ``prefer`` node first), on a copy; records each
    cycle's time and pending pods (the latency is the run's config)."""

    name = "firstfit"

    def __init__(self, prefer: dict[str, int] | None = None) -> None:
        self.prefer, self.calls = prefer or {}, []

    def decide(self, cycle) -> SchedulingDecision:
        self.calls.append((cycle.now_s, [p.spec.name for p in cycle.pending]))

        def nodes(pod, work):
            order = list(range(work.num_nodes))
            return [self.prefer[pod.name], *order] if pod.name in self.prefer else order

        return place_in_order(cycle, nodes)


# ----------------------------------------------------------------------------- engine
def test_queue_orders_by_time_then_class_then_fifo():
    q = EventQueue()
    q.push(5.0, 2, ("a",))
    q.push(5.0, 1, ("b",))
    q.push(1.0, 9, ("c",))
    q.push(5.0, 1, ("d",))
    assert q.peek_time() == 1.0 and len(q) == 4
    assert [q.pop()[2][0] for _ in range(4)] == ["c", "b", "d", "a"]
    assert q.peek_time() == float("inf")


def test_event_log_hash_is_canonical():
    a, b, c = EventLog(), EventLog(), EventLog()
    for log in (a, b):
        log.record(0.1, 3, (1, "x", (2, 3)))
    c.record(0.1, 3, (1, "x", (2, 4)))
    assert a.hexdigest() == b.hexdigest() != c.hexdigest()
    assert a.count == 1
    with pytest.raises(TypeError):
        a.record(0.0, 0, (1.5,))


# ----------------------------------------------------------------------------- synthetic
def _nodes(groups) -> NodeTable:
    names, cpu, mem, gpu, models = [], [], [], [], []
    for model, g, count in groups:
        for _ in range(count):
            names.append(f"n{len(names):03d}")
            cpu.append(64000)
            mem.append(262144)
            gpu.append(g)
            models.append(model)
    return NodeTable(tuple(names), cpu, mem, gpu, tuple(models))


def test_sample_cluster_is_stratified_and_keeps_order():
    # groups of 50, 30, 15, 4, 1 nodes (100): 20 nodes -> quotas 10, 6, 3, 0.8, 0.2
    # -> floors 10, 6, 3, 0, 0 + one leftover to the largest remainder (0.8) -> 10, 6, 3, 1, 0;
    # the empty group then takes one from the largest (10 -> 9).
    table = _nodes([("G2", 8, 50), ("T4", 2, 30), ("P100", 2, 15), ("A10", 1, 4), ("G3", 8, 1)])
    got = sample_cluster(table, 20, np.random.default_rng(1))
    assert len(got) == 20
    counts = {k: 0 for k in ("G2", "T4", "P100", "A10", "G3")}
    for m in got.models:
        counts[m] += 1
    assert counts == {"G2": 9, "T4": 6, "P100": 3, "A10": 1, "G3": 1}
    assert list(got.names) == sorted(got.names)
    again = sample_cluster(table, 20, np.random.default_rng(1))
    assert again.names == got.names
    assert sample_cluster(table, 20, np.random.default_rng(2)).names != got.names


def test_durations_fill_invalid_with_median():
    t = PodTable(
        ("a", "b", "c", "d"),
        [1] * 4,
        [1] * 4,
        [1] * 4,
        [1000] * 4,
        ("",) * 4,
        creation_time=[0, 10, -1, 50],
        deletion_time=[100, 310, 5, 40],
    )
    # valid: 100, 300 -> median 200 for the missing (-1) and the non-increasing row
    assert durations_from_table(t).tolist() == [100.0, 300.0, 200.0, 200.0]


def test_make_workload_rate_and_fields():
    pods = pod_batch([gpu_pod(1), gpu_pod(2), PodSpec(1000, 10)])
    dur = np.array([10.0, 1000.0, 500.0])
    # eligible: the two GPU pods; clipped durations 60 and 1000;
    # E[milli x duration] = (1000 * 60 + 2000 * 1000) / 2 = 1_030_000 milli s;
    # lambda = 0.5 * 8000 / 1_030_000 per second
    wl = make_workload(pods, dur, 8000, 0.5, 200_000.0, np.random.default_rng(3))
    assert wl.arrival_rate_per_s == pytest.approx(0.5 * 8000 / 1_030_000)
    assert abs(len(wl) - wl.arrival_rate_per_s * 200_000) < 5 * np.sqrt(wl.arrival_rate_per_s * 200_000)
    assert set(wl.source_index.tolist()) <= {0, 1}
    assert set(wl.duration_s.tolist()) <= {60.0, 1000.0}
    assert set(wl.checkpoint_interval_s.tolist()) <= {600.0, 1800.0, 3600.0}
    assert np.all((wl.checkpoint_phase_s >= 0) & (wl.checkpoint_phase_s < wl.checkpoint_interval_s))
    assert len(set(wl.pods.names)) == len(wl) and wl.pods.names[0].endswith("-s0")
    assert np.all(np.diff(wl.arrival_s) >= 0) and wl.arrival_s[-1] < 200_000
    assert wl.warmup_s == 50_000.0 and not wl.priority.any()
    same = make_workload(pods, dur, 8000, 0.5, 200_000.0, np.random.default_rng(3))
    assert np.array_equal(same.arrival_s, wl.arrival_s)
    with_cpu = make_workload(pods, dur, 8000, 0.5, 1000.0, np.random.default_rng(3), include_cpu_pods=True)
    assert with_cpu.arrival_rate_per_s == pytest.approx(0.5 * 8000 / (2_060_000 / 3))


# ----------------------------------------------------------------------------- lifecycle
def _random_run(gen, typical, seed: int):
    cluster = gen.build_cluster([T4x2, T4x4, V1, ("G2", 8, 96000, 393216)])
    trace = pod_batch([gpu_pod(1, 500), gpu_pod(1), gpu_pod(2), gpu_pod(4), PodSpec(2000, 100)])
    wl = make_workload(
        trace,
        np.array([300.0, 900.0, 1800.0, 600.0, 100.0]),
        cluster.gpu_capacity_milli,
        1.2,
        20_000.0,
        np.random.default_rng(seed),
    )
    sched = PolicyScheduler(make_policy("fgd", typical))
    return run_timed(cluster, wl, sched, config=timed(0.5, full_check_every=50))


def test_event_hash_reproducible_and_seed_sensitive(gen, typical_small):
    a, b = _random_run(gen, typical_small, 1), _random_run(gen, typical_small, 1)
    c = _random_run(gen, typical_small, 2)
    assert a.event_hash == b.event_hash and a.events_processed == b.events_processed > 100
    assert np.array_equal(a.first_bind_s, b.first_bind_s, equal_nan=True)
    assert c.event_hash != a.event_hash
    assert 0 < a.gpu_alloc_pct <= 100
    assert a.arrived == a.completed + a.running_at_end + a.pending_at_end + a.rejected


class _OnACopy(Stub):
    """``inner`` deciding every session on a private copy of the session's state, never
    attached to it (how sessions decided before the long-lived decision view)."""

    def __init__(self, inner) -> None:
        self.inner, self.name = inner, inner.name

    def decide(self, cycle):
        class Copied:
            now_s, pending, state = cycle.now_s, cycle.pending, cycle.state.copy()
            blocked = property(lambda _: cycle.blocked)
            running_on = staticmethod(cycle.running_on)

        return self.inner.decide(Copied())


@pytest.mark.parametrize("kind", ["fgd", "bestfit", "batch"])
def test_sessions_on_the_indexed_view_decide_as_on_a_fresh_copy(gen, typical_small, kind):
    """A session decides on the simulator's own state, with the scheduler's index attached to
    it: the run (every event, hashed) is the run of the same scheduler deciding on a fresh copy
    each session, scanning every node."""
    from gpudefrag.batch.placer import BatchPlacer

    def scheduler():
        if kind == "batch":
            return BatchScheduler(BatchPlacer(typical_small), batch_size=3, solver_batches=1)
        return PolicyScheduler(make_policy(kind, typical_small))

    cluster = gen.build_cluster([T4x2, T4x4, V1, ("G2", 8, 96000, 393216)] * 3)
    trace = pod_batch([gpu_pod(1, 500), gpu_pod(1), gpu_pod(2), gpu_pod(4), PodSpec(2000, 100)])
    dur = np.array([300.0, 900.0, 1800.0, 600.0, 100.0])
    wl = make_workload(trace, dur, cluster.gpu_capacity_milli, 1.3, 8_000.0, np.random.default_rng(4))
    indexed = scheduler()
    sim = Simulator(cluster, wl, indexed, config=timed(0.5, full_check_every=25))
    got = sim.run()
    want = run_timed(cluster, wl, _OnACopy(scheduler()), config=timed(0.5, full_check_every=25))
    assert got.events_processed > 100 and got.event_hash == want.event_hash
    policy = indexed.placer.fgd if kind == "batch" else indexed.policy
    assert policy._index is not None and policy._index.state is sim.core.ledger.state


def test_a_session_masks_reserved_nodes_only_while_it_decides(gen):
    """A reserved node whose pod does not fit yet is masked for the session's scheduler and its
    resources are back when the scheduler has returned; a reserved pod that fits is bound while
    the scheduler decides, and unbound afterwards (the session starts it when it lands)."""
    seen = []

    class Peek(Stub):
        def decide(self, cycle):
            st = cycle.state
            seen.append((int(st.cpu_milli_left[0]), int(st.free_gpus[0]), int(st.cpu_milli_left[1])))
            return SchedulingDecision([], len(cycle.pending), 0.0, 0.0)

    state = gen.build_cluster([T4x4, T4x4])
    core_state = state.copy()
    sim = Simulator(state, timed_workload([gpu_pod(1)], [10.0], [100.0]), Peek(), config=timed())
    core = sim.core
    before = core.ledger.state.snapshot()
    sim.sessions._decide(0.0, [], [0], [])  # node 0 reserved for a pod that does not fit yet
    assert seen[-1] == (0, 0, int(core_state.cpu_milli_left[1]))  # masked while deciding
    assert core.ledger.state.snapshot() == before  # and back afterwards
    pod = gpu_pod(2)
    sim.sessions._decide(0.0, [(7, Placement(1, (0, 1), pod))], [], [])
    assert seen[-1][2] == int(core_state.cpu_milli_left[1]) - pod.cpu_milli  # bound while deciding
    assert core.ledger.state.snapshot() == before


def test_busy_server_latency_delays_binds(gen):
    # pod 0 arrives at 10: session 10 -> decision at 10 + 5 = 15.  Pod 1 arrives at 12 while
    # the scheduler is busy; its session starts at 15 and lands at 20.
    wl = timed_workload([gpu_pod(), gpu_pod()], [10.0, 12.0], [100.0, 100.0])
    sched = FirstFit()
    r = run_timed(gen.build_cluster([T4x2]), wl, sched, config=timed(5.0))
    assert r.first_bind_s.tolist() == [15.0, 20.0]
    assert [c[0] for c in sched.calls] == [10.0, 15.0]
    assert r.completion_s.tolist() == [115.0, 120.0]
    assert r.decision_latency_p99_s == 5.0 and r.sessions == 2


def test_bind_conflict_keeps_pod_pending_and_completion_frees(gen):
    class Clash(Stub):
        """Puts every pod that fits the snapshot on node 0, GPU 0, ignoring the others."""

        name = "clash"

        def decide(self, cycle):
            binds = [
                Bind(p.pod_id, Placement(0, (0,), p.spec))
                for p in cycle.pending
                if cycle.state.why_not_fits(0, p.spec, (0,)) is None
            ]
            return SchedulingDecision(binds, len(cycle.pending), 0.0, 0.0)

    # both arrive at 0; decision at 1: p0 binds, p1 conflicts; its retry at 1 finds no room
    # (parked).  p0 completes at 1 + 50 = 51, which frees the GPU: p1 decided at 51, binds 52.
    wl = timed_workload([gpu_pod(), gpu_pod()], [0.0, 0.0], [50.0, 50.0], horizon=200.0)
    r = run_timed(gen.build_cluster([V1]), wl, Clash(), config=timed(1.0, full_check_every=1))
    assert r.bind_conflicts == 1
    assert r.first_bind_s.tolist() == [1.0, 52.0]
    assert r.completion_s.tolist() == [51.0, 102.0]
    assert r.completed == 2 and r.final_state.used_gpu_milli == 0
    assert r.final_state.gpu_milli_left[0, 0] == 1000


def test_pending_order_is_priority_then_age(gen):
    wl = timed_workload(
        [gpu_pod(8)] * 4 + [gpu_pod(2)], [0, 0, 0, 0, 0], [10] * 5, priority=[0, 2, 1, 2, 0], horizon=5.0
    )
    sched = FirstFit()
    cluster = gen.build_cluster([("G2", 8, 96000, 393216)])
    r = run_timed(cluster, wl, sched, config=timed())
    # one session sees all five (arrivals at equal times all precede SESSION_START)
    assert sched.calls[0][1] == ["p1", "p3", "p2", "p0", "p4"]
    assert r.first_bind_s[1] == 0.0 and np.isnan(r.first_bind_s[[0, 2, 3]]).all()
    assert r.pending_at_end == 4  # p4 (2 GPUs) comes after p1 took all 8


def test_rejected_at_arrival(gen):
    wl = timed_workload([gpu_pod(4), gpu_pod(1)], [0, 1], [10, 10], horizon=50.0)
    r = run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), config=timed())
    assert r.end_status.tolist() == [PodPhase.REJECTED, PodPhase.COMPLETED] and r.rejected == 1


def test_parking_changes_no_outcome(gen, typical_small):
    cluster = gen.build_cluster([T4x2, T4x4, V1])
    trace = pod_batch([gpu_pod(1, 300), gpu_pod(1), gpu_pod(2), gpu_pod(4)])
    wl = make_workload(
        trace,
        np.array([200.0, 900.0, 1500.0, 700.0]),
        cluster.gpu_capacity_milli,
        1.3,
        30_000.0,
        np.random.default_rng(5),
    )
    out = []
    for park in (True, False):
        sched = PolicyScheduler(make_policy("bestfit", typical_small))
        out.append(run_timed(cluster, wl, sched, config=timed(0.0, park_unschedulable=park)))
    assert out[0].pending_at_end + np.isfinite(out[0].first_bind_s).sum() > 0
    assert np.array_equal(out[0].first_bind_s, out[1].first_bind_s, equal_nan=True)
    assert out[0].sessions < out[1].sessions


# ----------------------------------------------------------------------------- invariants
def test_capacity_invariant(gen, monkeypatch):
    class Overbook(Stub):
        name = "overbook"

        def decide(self, cycle):
            binds = [Bind(p.pod_id, Placement(0, (), p.spec)) for p in cycle.pending]
            return SchedulingDecision(binds, len(cycle.pending), 0.0, 0.0)

    # two 6000 m pods on an 8000 m node: revalidation (and bind's own check) disabled
    monkeypatch.setattr(ClusterState, "why_not_fits", lambda self, node, pod, gpus: None)
    wl = timed_workload([PodSpec(6000, 10), PodSpec(6000, 10)], [0, 0], [10, 10])
    with pytest.raises(
        InvariantError,
        match=r"'capacity' violated after DECISION_DONE.*"
        r"cpu_milli_left -4000 of 8000",
    ):
        run_timed(gen.build_cluster([V1]), wl, Overbook(), config=timed())


def test_pod_sets_invariant(gen):
    def hook(sim, t, cls, payload):
        if cls == Event.DECISION_DONE and sim.running:
            sim.running.pop(next(iter(sim.running)))

    wl = timed_workload([gpu_pod()], [0], [10])
    with pytest.raises(
        InvariantError,
        match=r"'pod-sets' violated after DECISION_DONE.*"
        r"1 pods have status RUNNING but the running set holds 0",
    ):
        run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), config=timed(), hook=hook)


def test_pod_sets_invariant_membership(gen):
    def hook(sim, t, cls, payload):
        if cls == Event.ARRIVAL and payload == (1,):  # swap: running p0 leaves, pending p1 enters
            sim.running[1] = sim.running.pop(0)

    # p0 runs from 0; p1 (2 GPUs) arrives at 1 and waits: the counts still agree after the swap
    wl = timed_workload([gpu_pod(), gpu_pod(2)], [0, 1], [10, 10])
    with pytest.raises(
        InvariantError,
        match=r"'pod-sets' violated after ARRIVAL.*pod 0 has status "
        r"RUNNING but is in 0 pending set\(s\) and not in the "
        r"running set",
    ):
        run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), hook=hook, config=timed(full_check_every=1))


def test_resource_accounting_invariant(gen):
    def hook(sim, t, cls, payload):
        if cls == Event.ARRIVAL:  # a pod nobody scheduled appears on node 1
            sim.ledger.state.bind(Placement(1, (0,), gpu_pod()))

    wl = timed_workload([gpu_pod()], [0], [10])
    with pytest.raises(
        InvariantError,
        match=r"'resource-accounting' violated after ARRIVAL.*"
        r"node 1 .*gpu \[0, 0, 0, 0, 0, 0, 0, 0\] but the state "
        r"has .*gpu \[1000, 0",
    ):
        run_timed(
            gen.build_cluster([T4x2, T4x2]), wl, FirstFit(), hook=hook, config=timed(full_check_every=1)
        )


def test_whole_free_gpu_count_invariant(gen):
    def hook(sim, t, cls, payload):
        if cls == Event.ARRIVAL:  # the running count of wholly free GPUs drifts from the state
            sim.ledger.whole_free_gpus += 1

    wl = timed_workload([gpu_pod()], [0], [10])
    with pytest.raises(
        InvariantError,
        match=r"'resource-accounting' violated after ARRIVAL.*"
        r"counts 3 wholly free GPUs but the state has 2",
    ):
        run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), hook=hook, config=timed(full_check_every=1))


def test_lifecycle_invariant(gen):
    def hook(sim, t, cls, payload):
        if cls == Event.DECISION_DONE and sim.running:  # a running pod cannot be pending again
            sim.lifecycle.move(next(iter(sim.running)), PodPhase.PENDING)

    wl = timed_workload([gpu_pod()], [0], [10])
    with pytest.raises(
        InvariantError, match=r"'lifecycle' violated: pod 0 cannot go from RUNNING to PENDING"
    ):
        run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), config=timed(), hook=hook)


@pytest.mark.parametrize(
    "warmup, alloc, whole, shared",
    [
        # window [0, 200] on 2 GPUs (400,000 milli-s): A (500 milli) runs 0-100 on GPU 0, B (one
        # whole GPU) 10-60 on GPU 1.  Allocated 500x10 + 1500x50 + 500x40 = 100,000 (25 %); wholly
        # free 1000x10 + 0x50 + 1000x40 + 2000x100 = 250,000 (62.5 %); A's GPU's other half 500x100
        # = 50,000 (12.5 %).
        (0.0, 25.0, 62.5, 12.5),
        # window [20, 200] (360,000 milli-s): 1500x40 + 500x40 = 80,000; 1000x40 + 2000x100 =
        # 240,000; 500x80 = 40,000.
        (20.0, 100 * 80 / 360, 100 * 240 / 360, 100 * 40 / 360),
    ],
)
def test_idle_capacity_splits_into_whole_and_shared_gpus(gen, warmup, alloc, whole, shared):
    wl = timed_workload(
        [gpu_pod(1, 500), gpu_pod()], [0.0, 10.0], [100.0, 50.0], horizon=200.0, warmup=warmup
    )
    r = run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), config=timed(full_check_every=1))
    assert r.first_bind_s.tolist() == [0.0, 10.0] and r.completion_s.tolist() == [100.0, 60.0]
    assert (r.gpu_alloc_pct, r.gpu_idle_whole_pct, r.gpu_idle_shared_pct) == pytest.approx(
        (alloc, whole, shared)
    )


# ----------------------------------------------------------------------------- defragmenter hook
class OneShot:
    """Returns ``actions`` the first time it is asked, nothing afterwards.  Records what it
    read each time: the time, the pending pods, the running pods and, with ``runtimes``, their
    remaining run times and the 0.1, 0.5 and 0.9 quantiles of them."""

    def __init__(self, actions, runtimes=None):
        self.actions, self.runtimes, self.views = actions, runtimes, []
        self.quantiles: list[np.ndarray] = []

    def plan(self, cluster):
        now, running = cluster.now_s, cluster.running
        remaining = [self.runtimes.remaining_s(r, now) for r in running] if self.runtimes else None
        self.views.append((now, [p.pod_id for p in cluster.pending], running, remaining))
        if self.runtimes:
            levels = np.tile([0.1, 0.5, 0.9], (len(running), 1))
            self.quantiles.append(self.runtimes.remaining_quantiles_s(running, now, levels))
        actions, self.actions = self.actions, []
        return actions


def test_plan_outcome_when_the_blocked_pod_starts_elsewhere_first(gen):
    # Three nodes of 2 x T4, first fit: X and X2 (1 GPU, done at 1010) fill node 0, A and Y
    # (1 GPU, 5000 s) node 1, Z node 2's GPU 0.  B (2 GPUs) arrives at 1000; the stub reserves
    # node 1 for it and moves A to node 2's GPU 1.  At 1010.1 X2 finishes: B starts on node 0
    # before the move has freed anything, so the plan ends "bound elsewhere first", not fulfilled.
    pods = [gpu_pod(1, name=n) for n in ("X", "X2", "A", "Y", "Z")] + [gpu_pod(2, name="B")]
    wl = timed_workload(
        pods,
        [0.0, 0.1, 0.2, 0.3, 0.4, 1000.0],
        [1010.0, 1010.0, 5000.0, 5000.0, 5000.0, 100.0],
        horizon=3000.0,
    )
    r = run_timed(
        gen.build_cluster([T4x2, T4x2, T4x2]),
        wl,
        FirstFit(),
        OneShot([Reserve(1, 5), Move(2, 2, (1,))]),
        timed(),
    )
    assert r.first_node[5] == 0 and r.first_bind_s[5] == pytest.approx(1010.1)  # X2 ends at 0.1 + 1010
    assert (r.reservations_made, r.reservations_fulfilled, r.reservations_bound_elsewhere) == (1, 0, 1)
    assert r.reservation_expiries == r.reservations_released == 0
    (plan,) = r.plans
    assert (plan.pod, plan.node, plan.made_s) == (5, 1, pytest.approx(1000.0))
    assert (plan.outcome, plan.ended_s, plan.bound_node) == ("bound_elsewhere", pytest.approx(1010.1), 0)


def test_a_held_pod_waits_for_its_reserved_node(gen):
    # The same cluster and plan with hold_reserved_pods: B is not offered elsewhere while node 1
    # is reserved for it.  Y never leaves node 1, so B waits until the reservation expires
    # (1000 + 600 s) and then starts on node 0; no session is spent on it meanwhile.
    pods = [gpu_pod(1, name=n) for n in ("X", "X2", "A", "Y", "Z")] + [gpu_pod(2, name="B")]
    wl = timed_workload(
        pods,
        [0.0, 0.1, 0.2, 0.3, 0.4, 1000.0],
        [1010.0, 1010.0, 5000.0, 5000.0, 5000.0, 100.0],
        horizon=3000.0,
    )
    plan = OneShot([Reserve(1, 5), Move(2, 2, (1,))])
    config = timed(hold_reserved_pods=True)
    r = run_timed(gen.build_cluster([T4x2, T4x2, T4x2]), wl, FirstFit(), plan, config)
    assert r.first_node[5] == 0 and r.first_bind_s[5] == pytest.approx(1600.0)
    assert (r.reservations_made, r.reservation_expiries, r.reservations_bound_elsewhere) == (1, 1, 0)
    assert r.sessions < 20
    assert [(p.outcome, p.ended_s, p.bound_node) for p in r.plans] == [("expired", pytest.approx(1600.0), -1)]


def test_move_holds_both_then_restarts_with_lost_work(gen):
    # node 0: 2 x T4, node 1: 1 x V100.  A (1 GPU, 5000 s of work, checkpoints at work
    # 200, 800, 1400...) binds on node 0 at 0.05.  B (2 GPUs) arrives at 1000: no room; at the
    # end of its session (t0 = 1000.05) the stub moves A to node 1 and reserves node 0 for B.
    # A holds both GPUs until t0 + 30 (EVICT_DONE); its work then is 1030 -> back to 800
    # (lost 230 = 200 before the move + the 30 s grace); resumes at t0 + 90 with 4200 s left
    # -> completes at 5290.05 instead of 5000.05: delay 290 = 200 + 30 + 60.
    # B binds on node 0 after the eviction (session t0 + 30, decision + 0.05).  C (1 GPU)
    # arrives during the grace period, when node 0 has a free GPU: the reservation keeps it off.
    a, b, c = gpu_pod(1, name="A"), gpu_pod(2, name="B"), gpu_pod(1, name="C")
    wl = timed_workload(
        [a, b, c], [0.0, 1000.0, 1010.0], [5000.0, 100.0, 100.0], interval=600.0, phase=200.0, horizon=6000.0
    )
    seen = []

    def hook(sim, t, cls, payload):
        left = sim.ledger.state.gpu_milli_left
        seen.append((t, cls, left[0, :2].tolist(), int(left[1, 0])))

    config = timed(0.05, migration=MigrationModel(eviction_grace_s=30.0, restart_s=60.0))
    sim = Simulator(gen.build_cluster([T4x2, V1]), wl, FirstFit(), config, hook)
    # the move reserves node 0 for B; the oracle tells what A has left to run
    defrag = OneShot([Reserve(0, 1), Move(0, 1, (0,))], runtimes=sim.true_runtimes)
    r = sim.run(defrag)
    t0 = 1000.05
    moved = next(s for s in seen if s[1] == Event.DECISION_DONE and s[0] == t0)
    assert moved[2:] == ([0, 1000], 0)  # A on node 0 GPU 0 and on node 1 at once
    evict = next(s for s in seen if s[1] == Event.EVICT_DONE)
    assert evict[0] == pytest.approx(t0 + 30) and evict[2:] == ([1000, 1000], 0)
    restart = next(s for s in seen if s[1] == Event.RESTART_DONE)
    assert restart[0] == pytest.approx(t0 + 90)
    assert r.completion_s[0] == pytest.approx(5000.05 + 200 + 30 + 60)
    assert r.first_bind_s[1] == pytest.approx(t0 + 30 + 0.05) and r.first_node[1] == 0
    assert r.first_bind_s[2] >= r.completion_s[1]  # C waited for B to finish
    assert r.migrations_executed == 1 and r.migrations_aborted == 0
    assert r.gpu_hours_lost_work == pytest.approx(230 / 3600)
    assert r.gpu_hours_lost_restart == pytest.approx(60 / 3600)
    assert r.gpu_hours_held_twice == pytest.approx(30 / 3600)
    assert r.reservations_made == r.reservations_fulfilled == 1 and r.reservation_expiries == 0
    assert r.reservations_bound_elsewhere == r.reservations_released == 0
    assert [(p.outcome, p.ended_s, p.bound_node) for p in r.plans] == [
        ("fulfilled", pytest.approx(t0 + 30.05), 0)
    ]
    now, pending, running, remaining = defrag.views[0]
    assert now == t0 and pending == [1] and [p.pod_id for p in running] == [0]
    # A started at 0.05 and last checkpointed at work 800 (t = 800.05): 200 s since
    assert running[0].start_s == 0.05
    assert running[0].run_time_s == pytest.approx(1000.0)
    assert running[0].last_checkpoint_run_s == pytest.approx(800.0)
    assert running[0].work_since_checkpoint_s == pytest.approx(200.0)
    assert remaining == [pytest.approx(4000.0)]
    assert defrag.quantiles[0].tolist() == [[pytest.approx(4000.0)] * 3]  # the oracle knows it exactly
    # control: without the reservation C takes node 0's free GPU and B waits for C
    free = run_timed(gen.build_cluster([T4x2, V1]), wl, FirstFit(), OneShot([Move(0, 1, (0,))]), config)
    assert free.first_bind_s[2] < free.first_bind_s[1]


class RecordsRunningOn(FirstFit):
    """First fit that records, at every session, which pods the cycle shows running on each node."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, dict[int, list[tuple[int, int]]]]] = []

    def decide(self, cycle) -> SchedulingDecision:
        shown = {n: [(p.pod_id, p.node) for p in cycle.running_on(n)] for n in range(cycle.state.num_nodes)}
        self.seen.append((cycle.now_s, shown))
        return super().decide(cycle)


def test_sessions_see_the_pods_running_on_each_node_through_a_move(gen):
    # As in the move test: A runs on node 0; at 1000.05 it moves to node 1 (its source held
    # through the grace period, until 1030.05) and B takes node 0.  A session at B's arrival
    # sees A on node 0; one after the move (C arrives at 1010) sees A on node 1, its placement,
    # and nothing on node 0 while it is still held there.
    a, b, c = gpu_pod(1, name="A"), gpu_pod(2, name="B"), gpu_pod(1, name="C")
    wl = timed_workload(
        [a, b, c], [0.0, 1000.0, 1010.0], [5000.0, 100.0, 100.0], interval=600.0, phase=200.0, horizon=6000.0
    )
    config = timed(0.05, migration=MigrationModel(eviction_grace_s=30.0, restart_s=60.0), full_check_every=1)
    scheduler = RecordsRunningOn()
    sim = Simulator(gen.build_cluster([T4x2, V1]), wl, scheduler, config)
    sim.run(OneShot([Reserve(0, 1), Move(0, 1, (0,))]))
    at = dict(scheduler.seen)
    assert at[1000.0] == {0: [(0, 0)], 1: []}
    assert at[1010.0] == {0: [], 1: [(0, 1)]}


def test_running_index_invariant(gen):
    def hook(sim, t, cls, payload):
        if cls == Event.DECISION_DONE and sim.running:  # the index forgets a running pod
            sim.core.on_node[0].pop(next(iter(sim.running)), None)

    wl = timed_workload([gpu_pod()], [0], [10])
    with pytest.raises(
        InvariantError,
        match=r"'running-index' violated after DECISION_DONE.*pod 0 is running on but not listed on node 0",
    ):
        run_timed(gen.build_cluster([T4x2]), wl, FirstFit(), hook=hook, config=timed(full_check_every=1))


def test_failing_move_aborts_rest_of_plan(gen):
    # A on node 0, D on node 2 (pinned).  Plan: reserve node 0 for B, then A -> node 1 (fits),
    # D -> node 1 GPU 0 (taken by then), A -> node 2 (never reached).  One executed, two
    # aborted, one plan aborted.
    a, d, b = gpu_pod(1, name="A"), gpu_pod(1, name="D"), gpu_pod(2, name="B")
    wl = timed_workload([a, d, b], [0.0, 0.0, 10.0], [1000.0, 1000.0, 10.0], horizon=500.0)
    defrag = OneShot([Reserve(0, 2), Move(0, 1, (0,)), Move(1, 1, (0,)), Move(0, 2, (1,))])
    sched = FirstFit(prefer={"D": 2})
    cluster = gen.build_cluster([T4x2, V1, T4x2])
    r = run_timed(cluster, wl, sched, defrag, timed())
    assert r.migrations_executed == 1 and r.migrations_aborted == 2 and r.plans_aborted == 1
    assert r.abort_reasons == {"target_does_not_fit": 1}
    # The first move reserved node 0 for B; the aborted plan released it at once, so B's later
    # bind there is not a fulfilled reservation.
    assert r.reservations_made == 1 and r.reservations_fulfilled == 0 and r.reservation_expiries == 0
    assert [(p.outcome, p.node, p.bound_node) for p in r.plans] == [("released", 0, -1)]


def test_do_not_disrupt_and_reservation_expiry(gen):
    # node 0: 4 x T4 holds A1 (2 GPUs); node 1: 2 x T4 holds A2 (1 GPU).  B (4 GPUs) waits.
    # Plan: A2 -> node 1 GPU 1 reserving node 0 for B, which never fits there -> expires at
    # move + 600.  C (1 GPU, prefers node 0) arrives meanwhile and is kept off node 0.
    pods = [
        gpu_pod(2, name="A1"),
        gpu_pod(1, name="A2"),
        gpu_pod(4, name="B"),
        gpu_pod(1, name="C"),
        gpu_pod(1, name="E"),
    ]
    wl = timed_workload(
        pods,
        [0, 0, 10, 20, 2000],
        [5000, 5000, 10, 10, 10],
        horizon=3000.0,
        dnd=[False, False, False, False, False],
    )
    defrag = OneShot([Reserve(0, 2), Move(1, 1, (1,))])
    sched = FirstFit(prefer={"A2": 1, "C": 0, "E": 0})
    r = run_timed(gen.build_cluster([T4x4, T4x2]), wl, sched, defrag, timed())
    assert r.reservations_made == 1 and r.reservation_expiries == 1
    assert r.first_node[3] == 1  # C kept off the reserved node
    assert r.first_node[4] == 0  # E, after the expiry, may use it
    assert r.end_status[2] == PodPhase.PENDING
    # a do-not-disrupt pod cannot be moved
    wl2 = timed_workload(pods[:3], [0, 0, 10], [5000, 5000, 10], horizon=100.0, dnd=[False, True, False])
    r2 = run_timed(
        gen.build_cluster([T4x4, T4x2]), wl2, FirstFit(prefer={"A2": 1}), OneShot([Move(1, 1, (1,))]), timed()
    )
    assert r2.migrations_executed == 0 and r2.abort_reasons == {"do_not_disrupt": 1}


# ----------------------------------------------------------------------------- openb smoke
def test_fgd_and_bestfit_on_sampled_openb(default_inputs, mirror):
    from gpudefrag.experiments.common.inputs import cluster_from_nodes
    from gpudefrag.workloads.openb import load_workload

    rng = np.random.default_rng(11)
    nodes = sample_cluster(default_inputs.nodes, 150, rng)
    assert len(nodes) == 150
    cluster = cluster_from_nodes(nodes)
    dur = durations_from_table(load_workload("openb_pod_list_default"))
    wl = make_workload(default_inputs.pods, dur, cluster.gpu_capacity_milli, 0.9, 3 * 3600.0, rng)
    results = {}
    for name in ("fgd", "bestfit"):
        sched = PolicyScheduler(make_policy(name, default_inputs.typical))
        results[name] = r = run_timed(cluster, wl, sched, config=timed(0.05))
        assert 0 < r.gpu_alloc_pct <= 100
        assert r.arrived == len(wl) and r.wall_s < 30
        assert r.completed > 0 and r.bind_conflicts == 0
    assert results["fgd"].event_hash != results["bestfit"].event_hash


def test_batch_scheduler_smoke(gen, typical_small):
    pytest.importorskip("ortools")
    from gpudefrag.batch.placer import BatchPlacer

    cluster = gen.build_cluster([T4x2, T4x4, V1, ("G2", 8, 96000, 393216)])
    trace = pod_batch([gpu_pod(1, 500), gpu_pod(1), gpu_pod(2), gpu_pod(4), PodSpec(2000, 100)])
    wl = make_workload(
        trace,
        np.array([300.0, 900.0, 1800.0, 600.0, 100.0]),
        cluster.gpu_capacity_milli,
        1.2,
        3000.0,
        np.random.default_rng(1),
    )
    config = TimedConfig(latency=LatencyModel.deterministic(base_s=0.01))
    runs = [
        run_timed(cluster, wl, BatchScheduler(BatchPlacer(typical_small), batch_size=4), config=config)
        for _ in range(2)
    ]
    assert runs[0].event_hash == runs[1].event_hash
    assert 0 < runs[0].gpu_alloc_pct <= 100 and runs[0].bind_conflicts == 0
    assert runs[0].decision_latency_p99_s >= 0.01


def test_completion_during_grace_frees_both_places(gen):
    # A (1010 s of work) binds at 0.05 and would finish at 1010.05; the move starts at 1000.05
    # with a 30 s grace, so A finishes on the source first: both places are freed at 1010.05,
    # nothing is lost, 10 s of GPU time was held twice.
    a, b = gpu_pod(1, name="A"), gpu_pod(2, name="B")
    wl = timed_workload([a, b], [0.0, 1000.0], [1010.0, 100.0], horizon=3000.0)
    r = run_timed(
        gen.build_cluster([T4x2, V1]),
        wl,
        FirstFit(),
        OneShot([Move(0, 1, (0,))]),
        timed(0.05, migration=MigrationModel(eviction_grace_s=30.0), full_check_every=1),
    )
    assert r.completion_s[0] == pytest.approx(1010.05)
    assert r.migrations_executed == 1 and r.migrations_overtaken == 1
    assert r.gpu_hours_lost == 0 and r.gpu_hours_held_twice == pytest.approx(10 / 3600)
    assert r.first_bind_s[1] == pytest.approx(1010.1)  # B gets node 0 once A is gone
    assert r.final_state.used_gpu_milli == 0


def test_latency_models():
    assert LatencyModel.constant(0.2).latency(50, 9.0) == 0.2  # the work reported is ignored
    assert LatencyModel.deterministic(scale=10.0, base_s=0.01, per_pod_s=0.001).latency(
        20, 0.1
    ) == pytest.approx(0.01 + 0.02 + 1.0)
    with pytest.raises(ValueError, match="unknown latency kind"):
        LatencyModel("guess")
    # wall-clock latency is gone (runs are reproducible bit for bit)
    with pytest.raises(ValueError, match="unknown latency kind"):
        LatencyModel("wall")


def test_reservation_records_keep_every_plan_and_refuse_unknown_outcomes():
    res = Reservations(timeout_s=600.0)
    freed: list[int] = []
    res.on_ended = freed.append
    assert res.make(3, 7, 10.0, res_id=1) == 610.0
    res.make(4, 8, 12.0, res_id=2)
    with pytest.raises(ValueError, match="unknown reservation outcome"):
        res.end(3, "vanished", 20.0)
    res.end(3, "bound_elsewhere", 20.0, bound_node=5)
    assert freed == [3] and 3 not in res and 4 in res
    first = res.log[0]
    assert (first.res_id, first.pod, first.node, first.made_s) == (1, 7, 3, 10.0)
    assert (first.outcome, first.ended_s, first.bound_node) == ("bound_elsewhere", 20.0, 5)
    assert res.log[1].outcome == "open" and res.log[1].bound_node == -1
