"""Protected nodes for blocked large pods: the choice, FGD's plan around them, the solver's
penalty, and the simulator handing the blocked pods over."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import timed_workload
from gpudefrag.batch.objective import evaluate_plan
from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.protect import protected_nodes
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.model.cluster import Placement
from gpudefrag.model.gpu_models import gpu_model_mask
from gpudefrag.model.pods import PodSpec
from gpudefrag.sim.latency import LatencyModel
from gpudefrag.sim.timed import TimedConfig, run_timed

G2x8 = ("G2", 8, 96000, 393216)
FAST = SolverConfig(time_limit_s=2.0, deterministic_time=0.05)


def _whole(n: int, cpu: int = 1000, mask: int = -1, name: str = "") -> PodSpec:
    return PodSpec(cpu, 1024, n, 1000, mask, name)


def _fill(state, node: int, gpus: int) -> None:
    """Bind a ``gpus``-GPU pod on ``node`` (its lowest free GPUs)."""
    free = [g for g in range(int(state.gpu_count[node])) if state.gpu_milli_left[node, g] == 1000]
    state.bind(Placement(node, tuple(free[:gpus]), _whole(gpus)))


def test_each_blocked_pod_protects_its_least_deficit_node(gen):
    state = gen.build_cluster([G2x8] * 4, tie_rank=np.array([3, 2, 1, 0]))
    for node, used in enumerate((6, 2, 3, 3)):  # whole free GPUs: 2, 6, 5, 5
        _fill(state, node, used)
    big = _whole(8)
    assert protected_nodes(state, [big], 1, 2) == {1}
    # the second 8-GPU pod takes the best node left: 2 and 3 tie on deficit, 3 ranks first
    assert protected_nodes(state, [big, big], 4, 2) == {1, 3}
    assert protected_nodes(state, [big, big, big], 2, 2) == {1, 3}  # the limit
    # sharing pods, and pods under min_gpus, protect nothing
    small = [PodSpec(1000, 1024, 1, 500), _whole(1), _whole(4)]
    assert protected_nodes(state, small, 4, 8) == frozenset()
    # the 4-GPU pod has no deficit on nodes 1-3: the tightest of them (5 free), then the rank
    assert protected_nodes(state, small, 4, 4) == {3}
    assert protected_nodes(state, [big], 0, 2) == frozenset()


def test_only_nodes_that_could_host_the_pod_count(gen):
    state = gen.build_cluster([("T4", 4, 64000, 262144), G2x8, ("G2", 8, 8000, 393216)])
    _fill(state, 1, 4)
    # the idle T4 node has no deficit but the wrong model for a G2-only pod; of the G2 nodes
    # (no deficit on either) node 1 is the tighter
    assert protected_nodes(state, [_whole(4, mask=gpu_model_mask("G2"))], 1, 2) == {1}
    # node 2 is idle but its CPU capacity is below the pod's request
    assert protected_nodes(state, [_whole(8, cpu=9000)], 1, 2) == {1}
    assert protected_nodes(state, [_whole(8, mask=gpu_model_mask("T4"))], 1, 2) == frozenset()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fgd_plan_uses_a_protected_node_only_when_nothing_else_fits(data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=8, max_prior=12))
    pods = data.draw(gen.batches(8))
    avoid = frozenset(data.draw(st.sets(st.integers(0, state.num_nodes - 1))))
    placer = BatchPlacer(typical_small, FAST)
    before = state.snapshot()
    plan = placer.fgd_plan(state, pods, avoid)
    assert state.snapshot() == before
    work = state.copy()
    for pod, p in zip(pods, plan):
        others = [n for n in range(state.num_nodes) if n not in avoid]
        fits_elsewhere = any(gen.fitting_placements(work, pod, n) for n in others)
        if p is None:
            assert not fits_elsewhere and not any(gen.fitting_placements(work, pod, n) for n in avoid)
            continue
        assert p.node not in avoid or not fits_elsewhere
        work.bind(p)
    if not avoid:
        assert plan == placer.fgd_plan(state, pods)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_placer_never_worse_than_fgd_around_protected_nodes(data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=8, max_prior=12))
    pods = data.draw(gen.batches(6))
    protected = frozenset(data.draw(st.sets(st.integers(0, state.num_nodes - 1), max_size=2)))
    config = replace(FAST, protect_blocked=2)
    placer = BatchPlacer(typical_small, config)
    result = placer.place(state, pods, protected)
    fgd = [p for p in placer.fgd_plan(state, pods, protected) if p is not None]
    chosen = [p for p in result.placements if p is not None]
    nodes = {p.node for p in fgd} | {p.node for p in chosen}
    penalty = dict(protected=protected, protect_penalty_milli=config.protect_penalty_milli)
    chosen_obj = evaluate_plan(state, chosen, typical_small, nodes, **penalty)
    assert chosen_obj.at_least(evaluate_plan(state, fgd, typical_small, nodes, **penalty))


def test_solver_keeps_a_batch_off_the_protected_node(gen, typical_small):
    """Two 1-GPU pods, two 8-GPU nodes with 3 and 4 GPUs free: protecting the node the plan
    used sends both pods to the other.  A protected node still takes a pod that fits nowhere
    else: with node 1 protected, the 4-GPU pod goes there and the 2-GPU pod to node 0."""
    state = gen.build_cluster([G2x8, G2x8])
    _fill(state, 0, 5)
    _fill(state, 1, 4)
    pods = [_whole(1, name="a"), _whole(1, name="b")]
    placer = BatchPlacer(typical_small, replace(FAST, protect_blocked=1))
    free_plan = placer.place(state, pods).placements
    favoured = free_plan[0].node
    result = placer.place(state, pods, frozenset({favoured})).placements
    assert all(p is not None and p.node != favoured for p in result)
    forced = placer.place(state, [_whole(4, name="c"), _whole(2, name="d")], frozenset({1})).placements
    assert [p.node for p in forced] == [1, 0]


class _Reads:
    """A scheduling cycle that records the blocked pods the scheduler read (``None``: none)."""

    def __init__(self, cycle):
        self._cycle, self.blocked_read = cycle, None
        self.now_s, self.state, self.pending = cycle.now_s, cycle.state, cycle.pending

    @property
    def blocked(self):
        self.blocked_read = [p.spec.name for p in self._cycle.blocked]
        return self._cycle.blocked


@pytest.mark.parametrize("protect", [0, 1])
def test_simulator_hands_the_parked_pods_to_a_scheduler_that_asks(gen, typical_small, protect):
    """Two 8-GPU nodes.  a (5 GPUs, ends at 100) and b (6 GPUs, runs on) take one node each; big
    (8 GPUs) arrives at 1 and parks.  Its least-deficit node is a's.  small (1 GPU) arrives at
    50: with protection it goes to b's node, and big starts at 100 when a ends; without, FGD puts
    small on a's node and big waits for small too (until 150).  The scheduler reads the blocked
    pods from its cycle only when it protects nodes for them."""

    class Recorder(BatchScheduler):
        def decide(self, cycle):
            spy = _Reads(cycle)
            decision = super().decide(spy)
            self.seen.append((cycle.now_s, spy.blocked_read))
            return decision

    pods = [_whole(5, name="a"), _whole(6, name="b"), _whole(8, name="big"), _whole(1, name="small")]
    wl = timed_workload(pods, [0.0, 0.0, 1.0, 50.0], [100.0, 5000.0, 100.0, 100.0], horizon=1000.0)
    placer = BatchPlacer(typical_small, replace(FAST, protect_blocked=protect, min_solver_batch=2))
    sched = Recorder(placer, 16)
    sched.seen = []
    config = TimedConfig(latency=LatencyModel.constant(0.0))
    result = run_timed(gen.build_cluster([G2x8, G2x8]), wl, sched, config=config)
    assert sched.seen
    if protect:
        assert all(blocked is not None for _, blocked in sched.seen)
        assert (50.0, ["big"]) in sched.seen
        assert result.first_bind_s[2] == 100.0
    else:
        assert all(blocked is None for _, blocked in sched.seen)
        assert result.first_bind_s[2] == 150.0
