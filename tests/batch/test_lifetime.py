"""Node lifetimes (gpudefrag.batch.lifetime) and FGD's ties broken by them in the batch placer.

Examples are worked out by hand; run times come from a :class:`ResidualLife` over a small
sample, so every expected busy time is a short sum.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import InMemoryCluster
from gpudefrag.batch.lifetime import ExpectedRunTimes, NodeLifetimes, busy_until_s
from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.frag.typical import typical_pods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.model.port import PendingPod, RunningPod
from gpudefrag.policies.fgd import FgdPolicy

ONE_GPU = PodSpec(2000, 8192, 1, 1000, name="one-gpu")
# Run times 100, 300, 1000 s: at age 0 a pod is expected to run (100 + 300 + 1000) / 3 = 466.67 s
# more; at age 200 s, (100 + 800) / 2 = 450 s more (the runs longer than 200 s: 300 and 1000).
HISTORY = ResidualLife([100.0, 300.0, 1000.0])


def running(pod_id: int, node: int, gpu: int, start_s: float) -> RunningPod:
    return RunningPod(pod_id, ONE_GPU, node, (gpu,), start_s, 600.0, 0.0, 0.0, False, False)


def four_nodes() -> ClusterState:
    """Four nodes of two GPUs each (same model, 32 cores, 128 GiB)."""
    return ClusterState([f"n{i}" for i in range(4)], [0] * 4, [2] * 4, [32000] * 4, [131072] * 4)


def test_busy_time_is_the_longest_expected_remaining_run_time_on_the_node() -> None:
    # At now = 200 s: pod 1 (node 0) started at 0 (age 200: 450 s more), pod 2 (node 0) at 200
    # (age 0: 466.67 s more), pod 3 (node 2) at 0 (450 s).  Node 1 runs nothing.
    pods = [running(1, 0, 0, 0.0), running(2, 0, 1, 200.0), running(3, 2, 0, 0.0)]
    on = {n: [p for p in pods if p.node == n] for n in range(3)}
    got = busy_until_s([0, 1, 2], lambda n: on[n], HISTORY, 200.0)
    assert got == pytest.approx([1400.0 / 3.0, 0.0, 450.0])


def test_lifetimes_ask_each_node_once_and_binds_only_raise_them() -> None:
    asked: list[list[int]] = []

    def busy_of(nodes: list[int]) -> np.ndarray:
        asked.append(list(nodes))
        return np.array([100.0 * n for n in nodes])

    lives = NodeLifetimes(busy_of)
    lives.bind(3, 250.0)  # before node 3 was asked: 250 becomes its floor
    lives.bind(1, 50.0)  # below node 1's own 100 s: no change
    assert lives.of_nodes(np.array([1, 3])).tolist() == [100.0, 300.0]
    copy = lives.copy()
    copy.bind(1, 900.0)
    assert lives.of_nodes(np.array([1, 2, 3])).tolist() == [100.0, 200.0, 300.0]
    assert copy.of_nodes(np.array([1])).tolist() == [900.0]
    assert asked == [[1, 3], [2]]  # each node asked once (the copy shares the answers)


def test_fgd_ties_go_to_the_node_busy_longest() -> None:
    # Nodes 1 and 2 each hold one 1-GPU pod on GPU 0 (same free resources, so the same FGD score
    # for another 1-GPU pod); nodes 0 and 3 are empty, which FGD scores lower for it (a pod
    # there breaks up two whole GPUs).  Tie rank prefers node 1; node 2 stays busy longer.
    state = four_nodes()
    typical = typical_pods(pod_batch([ONE_GPU, PodSpec(4000, 16384, 2, 1000)]))
    for node in (1, 2):
        state.bind(Placement(node, (0,), ONE_GPU))
    fgd = FgdPolicy(typical)
    scores = fgd.score_nodes(state, ONE_GPU)
    assert scores[1] == scores[2] > max(scores[0], scores[3])
    assert fgd.select(state, ONE_GPU) == Placement(1, (1,), ONE_GPU)
    busy = np.array([0.0, 100.0, 900.0, 0.0])
    assert fgd.select_preferring(state, ONE_GPU, lambda nodes: busy[nodes]) == Placement(2, (1,), ONE_GPU)
    # a preference never lifts a node over a better score: the empty nodes stay out
    busy = np.array([1e9, 100.0, 900.0, 1e9])
    assert fgd.select_preferring(state, ONE_GPU, lambda nodes: busy[nodes]).node == 2


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_an_equal_preference_is_fgds_own_choice(data, gen, typical_small) -> None:
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=10, max_prior=20))
    pod = data.draw(gen.pods())
    fgd = FgdPolicy(typical_small)
    assert fgd.select_preferring(state, pod, lambda nodes: np.zeros(len(nodes))) == fgd.select(state, pod)


def test_the_scheduler_breaks_ties_by_the_running_pods_lifetimes() -> None:
    # As above: node 1's pod started at 1000 s (age 0 at now = 1000: 466.67 s more), node 2's at
    # 800 s (age 200: 450 s more), so node 1 is busy longest and the pending pod goes there ...
    cluster = InMemoryCluster(four_nodes(), now_s=1000.0)
    for pod_id, node, start in ((1, 1, 1000.0), (2, 2, 800.0)):
        cluster.state.bind(Placement(node, (0,), ONE_GPU))
        cluster.running.append(running(pod_id, node, 0, start))
    cluster.pending = [PendingPod(10, ONE_GPU, 990.0, 0, False)]
    typical = typical_pods(pod_batch([ONE_GPU, PodSpec(4000, 16384, 2, 1000)]))

    def decide(config: SolverConfig, runtimes: ResidualLife | None) -> int:
        scheduler = BatchScheduler(BatchPlacer(typical, config), batch_size=16, runtimes=runtimes)
        (bind,) = scheduler.decide(cluster).binds
        return bind.placement.node

    assert decide(SolverConfig(lifetime_ties=True), HISTORY) == 1
    # ... and to node 2 once node 2's pod is the younger one (started at 1000, node 1's at 800).
    cluster.running = [running(1, 1, 0, 800.0), running(2, 2, 0, 1000.0)]
    assert decide(SolverConfig(lifetime_ties=True), HISTORY) == 2
    # Without the option, or without an estimator, the tie rank decides (node 1).
    assert decide(SolverConfig(), HISTORY) == 1
    assert decide(SolverConfig(lifetime_ties=True), None) == 1


def test_a_pod_placed_in_the_plan_makes_its_node_busy_for_its_expected_run_time() -> None:
    # Typical pods: one GPU and two GPUs.  Node 0 has four GPUs, one used; node 1 is an empty
    # two-GPU node with the better tie rank.  For a 1-GPU pod FGD scores node 0 higher (50 vs 37),
    # so the first pod goes there; node 0 then has two GPUs used and scores 37 too, a tie.
    # Busy times: node 0 100 s, node 1 300 s; each pod is expected to run 500 s.  Once the first
    # pod is on node 0, node 0 is busy for 500 s, longer than node 1, so the second follows it.
    state = ClusterState(["x", "y"], [0, 0], [4, 2], [64000, 64000], [262144, 262144], [1, 0])
    state.bind(Placement(0, (0,), ONE_GPU))
    typical = typical_pods(pod_batch([ONE_GPU, PodSpec(4000, 16384, 2, 1000)]))
    placer = BatchPlacer(typical, SolverConfig(lifetime_ties=True))
    fgd = placer.fgd
    assert fgd.score_nodes(state, ONE_GPU).tolist() == [50, 37]
    lives = NodeLifetimes(lambda nodes: np.array([[100.0, 300.0][n] for n in nodes]))
    plan = placer.fgd_plan(state, [ONE_GPU, ONE_GPU], frozenset(), lives, [500.0, 500.0])
    assert [p.node for p in plan if p is not None] == [0, 0]
    # Expected to run only 200 s, the first pod leaves node 1 the busier: the second goes there.
    plan = placer.fgd_plan(state, [ONE_GPU, ONE_GPU], frozenset(), lives, [200.0, 200.0])
    assert [p.node for p in plan if p is not None] == [0, 1]
    # The caller's lifetimes are not changed by the plans.
    assert lives.of_nodes(np.array([0, 1])).tolist() == [100.0, 300.0]
    # Without lifetimes the tie goes to node 1 by tie rank.
    assert [p.node for p in placer.fgd_plan(state, [ONE_GPU, ONE_GPU]) if p is not None] == [0, 1]


class CountingRuntimes:
    """A run-time estimator whose expected run time of pod ``i`` is ``100 * i`` s, counting
    the pods it is asked about."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def expected_s(self, pod: PendingPod) -> float:
        self.asked.append(pod.pod_id)
        return 100.0 * pod.pod_id


def test_expected_run_times_are_asked_only_when_read_and_once() -> None:
    pods = [PendingPod(i, ONE_GPU, 0.0, 0, False) for i in range(6)]
    runtimes = CountingRuntimes()
    run_s = ExpectedRunTimes(pods, runtimes)  # type: ignore[arg-type]
    assert len(run_s) == 6 and runtimes.asked == []
    tail = run_s[2:5]
    assert len(tail) == 3
    assert tail[0] == 200.0 and tail[-1] == 400.0
    assert run_s[2] == 200.0 and run_s[4] == 400.0  # kept: the slice shares them
    assert runtimes.asked == [2, 4]
    assert list(run_s[4:]) == [400.0, 500.0]
    assert runtimes.asked == [2, 4, 5]
    assert len(run_s[5:2]) == 0
    with pytest.raises(IndexError):
        tail[3]
