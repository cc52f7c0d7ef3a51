"""FGD nudged once (gpudefrag.experiments.suite1b.nudge), worked out by hand on four empty two-GPU nodes.

On an empty cluster of identical nodes every node scores the same for FGD, so a pod goes to the
lowest tie rank (node 0); its second choice, with node 0 masked, is node 1.
"""

from __future__ import annotations

import pytest

from conftest import InMemoryCluster
from gpudefrag.experiments.suite1b.nudge import NudgedScheduler
from gpudefrag.frag.typical import typical_pods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.model.port import PendingPod
from gpudefrag.policies.fgd import FgdPolicy
from gpudefrag.policies.scheduler import PolicyScheduler

ONE_GPU = PodSpec(2000, 8192, 1, 1000, name="one-gpu")
TWO_GPU = PodSpec(4000, 16384, 2, 1000, name="two-gpu")
TYPICAL = typical_pods(pod_batch([ONE_GPU, TWO_GPU]))


def four_nodes() -> ClusterState:
    """Four nodes of two GPUs each (same model, 32 cores, 128 GiB)."""
    return ClusterState([f"n{i}" for i in range(4)], [0] * 4, [2] * 4, [32000] * 4, [131072] * 4)


def cycle(now_s: float, state: ClusterState, *specs: PodSpec) -> InMemoryCluster:
    pending = [PendingPod(i, spec, 0.0, 0, False) for i, spec in enumerate(specs)]
    return InMemoryCluster(state, now_s=now_s, pending=pending)


def nodes_of(scheduler: PolicyScheduler, c: InMemoryCluster) -> list[int]:
    return [b.placement.node for b in scheduler.decide(c).binds]


def test_decisions_before_the_nudge_time_are_the_policys_own() -> None:
    nudged = NudgedScheduler(FgdPolicy(TYPICAL), at_s=500.0)
    c = cycle(100.0, four_nodes(), ONE_GPU)
    assert nodes_of(nudged, c) == nodes_of(PolicyScheduler(FgdPolicy(TYPICAL)), c) == [0]
    assert nudged.nudged is None and nudged.nudged_at_s is None


def test_the_first_pod_at_the_nudge_time_takes_its_second_choice_and_only_that_pod() -> None:
    nudged = NudgedScheduler(FgdPolicy(TYPICAL), at_s=500.0)
    state = four_nodes()
    got = nodes_of(nudged, cycle(600.0, state, ONE_GPU, ONE_GPU))
    # The first pod goes to node 1 instead of node 0; the second is FGD's own choice on the state
    # that bind leaves.
    after = state.copy()
    after.bind(Placement(1, (0,), ONE_GPU))
    own = FgdPolicy(TYPICAL).select(after, ONE_GPU)
    assert own is not None
    assert got == [1, own.node]
    assert nudged.first_choice is not None and nudged.first_choice.node == 0
    assert nudged.nudged is not None and nudged.nudged.node == 1
    assert nudged.nudged_at_s == 600.0
    # Later cycles are the policy's own again.
    c = cycle(700.0, four_nodes(), ONE_GPU)
    assert nodes_of(nudged, c) == nodes_of(PolicyScheduler(FgdPolicy(TYPICAL)), c) == [0]


def test_a_pod_with_one_feasible_node_is_not_nudged_the_next_one_is() -> None:
    # Nodes 0-2 hold one 1-GPU pod each: a 2-GPU pod fits node 3 only, so it is placed there as
    # FGD would; the 1-GPU pod after it (FGD's choice: node 0, lowest tie rank of the half-full
    # nodes) is nudged to its second choice, node 1.
    state = four_nodes()
    for node in range(3):
        state.bind(Placement(node, (0,), ONE_GPU))
    assert FgdPolicy(TYPICAL).select(state, ONE_GPU) == Placement(0, (1,), ONE_GPU)
    nudged = NudgedScheduler(FgdPolicy(TYPICAL), at_s=0.0)
    assert nodes_of(nudged, cycle(0.0, state, TWO_GPU, ONE_GPU)) == [3, 1]


def test_a_cycle_with_nothing_to_nudge_leaves_the_nudge_for_a_later_cycle() -> None:
    state = four_nodes()
    for node in range(3):
        state.bind(Placement(node, (0, 1), TWO_GPU))
    nudged = NudgedScheduler(FgdPolicy(TYPICAL), at_s=0.0)
    assert nodes_of(nudged, cycle(10.0, state, TWO_GPU)) == [3]
    assert nudged.nudged_at_s is None
    assert nodes_of(nudged, cycle(20.0, four_nodes(), ONE_GPU)) == [1]
    assert nudged.nudged_at_s == 20.0


def test_reset_makes_the_nudge_happen_again() -> None:
    nudged = NudgedScheduler(FgdPolicy(TYPICAL), at_s=0.0)
    assert nodes_of(nudged, cycle(0.0, four_nodes(), ONE_GPU)) == [1]
    nudged.reset()
    assert nudged.nudged is None and nudged.nudged_at_s is None
    assert nodes_of(nudged, cycle(0.0, four_nodes(), ONE_GPU)) == [1]


@pytest.mark.parametrize("at_s", [-1.0, float("nan"), float("inf")])
def test_the_nudge_time_must_be_a_finite_time(at_s: float) -> None:
    with pytest.raises(ValueError, match="at_s"):
        NudgedScheduler(FgdPolicy(TYPICAL), at_s=at_s)
