"""KueueTAS and tas_assign: the KEP's examples, hand-computed job placements, gang
all-or-nothing, required constraints, and place() leaving the state untouched."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import busy_state as _busy
from conftest import check_policy_on_random_states
from conftest import gang_job as _job
from gpudefrag.gangs.kueue_tas import KueueTAS
from gpudefrag.gangs.kueue_tas_assign import tas_assign
from gpudefrag.gangs.topo_search import topo_index
from gpudefrag.model.topology import nvl72, superpod, uniform


def _rack(capacities: list[int]) -> tuple[object, np.ndarray]:
    topo = uniform(len(capacities), 8, [("rack", 0)])
    return topo_index(topo), np.asarray(capacities, dtype=np.int64)


def test_kep_two_level_example():
    """keps/2724-topology-aware-scheduling/README.md, "Two-level Topology Aware scheduling",
    Example: a rack whose nodes hold 6, 5, 4, 3 and 2 pods; slices of 2 pods required at the
    host level.

    BestFit, 12 pods (6 slices): nodes hold 3, 2, 2, 1, 1 slices; sorted by slices desc, pods
    asc: [6, 4, 5, 2, 3]; take node-6 (3 slices, 3 left), node-4 (2, 1 left); node-5 holds the
    last slice, so the last domain is optimised: the first tightest one with >= 1 slice among
    [5, 2, 3] is node-2 -> 6 . 4 . 2.
    LeastFreeCapacity (a slice-only request is unconstrained), 10 pods: ascending
    [2, 3, 4, 5, 6]: 2 + 2 + 4 pods, then node-5 gives the last slice -> . 2 4 2 2."""
    ix, cap = _rack([6, 5, 4, 3, 2])
    got = tas_assign(ix, cap, 12, 0, "required", slice_size=2)
    assert got is not None and got.workers.tolist() == [6, 0, 4, 0, 2]
    got = tas_assign(ix, cap, 12, 0, "preferred", slice_size=2)
    assert got is not None and got.workers.tolist() == [6, 0, 4, 0, 2]
    got = tas_assign(ix, cap, 10, 0, "unconstrained", slice_size=2)
    assert got is not None and got.workers.tolist() == [0, 2, 4, 2, 2]
    # 9 slices are all there is; 10 do not fit
    assert tas_assign(ix, cap, 20, 0, "required", slice_size=2) is None


def test_kep_computing_the_assignment_example():
    """KEP "Computing the assignment", Example: nodes holding 3, 3, 2 and 1 pods, 7 pods.
    BestFit takes the two 3s and then, optimising the last domain, the node with exactly 1;
    LeastFreeCapacity takes 1, 2, 3 and 1 pod of the last 3."""
    ix, cap = _rack([3, 3, 2, 1])
    got = tas_assign(ix, cap, 7, 0, "required")
    assert got is not None and got.workers.tolist() == [3, 3, 0, 1]
    got = tas_assign(ix, cap, 7, -1, "unconstrained")
    assert got is not None and got.workers.tolist() == [3, 1, 2, 1]
    got = tas_assign(ix, cap, 7, -1, "unconstrained", least_free_capacity=False)
    assert got is not None and got.workers.tolist() == [3, 3, 0, 1]


def test_best_fit_domain_and_preferred_going_up():
    """Three leaves of 4 nodes under a spine; busy node3, node10, node11 -> whole free nodes
    per leaf: 3, 4, 2.

    required:leaf, 2 pods: leaves sorted desc [leaf1 4, leaf0 3, leaf2 2]; the first fits, so
    findBestFitDomain takes the smallest count >= 2: leaf2 -> nodes 8, 9.
    required:leaf, 3 pods: leaf0 (3) -> 0, 1, 2.  5 pods: no leaf fits -> waits.
    preferred:leaf, 5 pods: no leaf; one level up the spine holds 9; descending, the leaves
    sorted desc: leaf1 gives 4, 1 left; leaf0 (3) would hold it, so the last domain is
    optimised to the tightest, leaf2 (2) -> node8 (first of its two 1-pod nodes)."""
    topo = uniform(12, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {3: 8, 10: 8, 11: 8})
    pol = KueueTAS()
    assert pol.place(s, _job(16, "required:leaf")) == [8, 9]
    assert pol.place(s, _job(24, "required:leaf")) == [0, 1, 2]
    assert pol.place(s, _job(40, "required:leaf")) is None
    assert pol.place(s, _job(40, "preferred:leaf")) == [4, 5, 6, 7, 8]
    assert pol.place(s, _job(40, "required:spine")) == [4, 5, 6, 7, 8]


def test_unconstrained_is_least_free_capacity_at_the_node_level():
    """No constraint = implied TAS: hostname level, unconstrained, LeastFreeCapacity.  A
    4-GPU pod: node capacities (free // 4) are 2 on wholly free nodes, 1 on node3 (4 free),
    0 on node5 (2 free) -> the least capacity that fits, node3.  A 2-node job spreads over the
    1-pod nodes in name order (0, 1), topology-blind."""
    topo = uniform(12, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {3: 4, 5: 6, 10: 8, 11: 8})
    pol = KueueTAS()
    assert pol.place(s, _job(4)) == [3]
    assert pol.place(s, _job(16)) == [0, 1]
    assert KueueTAS(unconstrained="best-fit").place(s, _job(4)) == [3]


def test_leader_pod_group_packs_the_remainder():
    """A job [8, 8, 4] is a PodSet group: 2 workers + a 1-pod leader, placed together.
    Leaf0: nodes 0, 1 wholly free, node2 with 4 free, node3 busy; leaf1: 4 wholly free.
    Counts: leaf0 pods 2, with leader 2 (node2 takes the leader at no worker cost); leaf1
    pods 4, with leader 3.  Sorted with leader, BestFit: leaf1 (3) first; the tightest with
    >= 2 is leaf0.  Inside leaf0, prioritizeLeaderDomain moves node2 (no leader penalty) to
    the front: it takes the leader, nodes 0, 1 the workers."""
    topo = uniform(8, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {2: 4, 3: 8})
    pol = KueueTAS()
    assert pol.place(s, _job(20, "required:leaf")) == [0, 1, 2]
    # 2 workers + a 6-GPU leader: node2 is too small, so a wholly free node takes the leader
    # and leaf0 (2 workers with leader -> 1) cannot; leaf1 can
    assert pol.place(s, _job(22, "required:leaf")) == [5, 6, 4]


def test_gang_is_all_or_nothing():
    """Wholly free: nodes 2, 3 (leaf0) and 7 (leaf1); node6 has 7 GPUs free.

    [8, 8, 7] at the spine (2 workers + a 7-GPU leader): the spine holds 3 workers, 3 with
    the leader, so it is the fit domain.  The descent pools its children and re-runs the
    greedy on them: leaves sorted desc [leaf0 (2), leaf1 (1)]; leaf0 takes the leader and, with
    it, 1 worker; leaf1 the other worker.  One level down the children of both leaves are
    pooled again: nodes sorted [2, 3, 7, ...]; node2 (leader penalty 1, still leaving 2 of the
    3 workers' capacity) takes the leader, nodes 3 and 7 the workers -- node6 stays unused
    (the pooled descent does not follow the per-leaf split)."""
    topo = uniform(8, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {0: 8, 1: 8, 4: 8, 5: 8, 6: 1})
    pol = KueueTAS()
    assert pol.place(s, _job(32)) is None
    assert pol.place(s, _job(32, "preferred:leaf")) is None
    assert pol.place(s, _job(24, "required:leaf")) is None
    assert pol.place(s, _job(23, "required:leaf")) is None
    assert pol.place(s, _job(23, "required:spine")) == [3, 7, 2]


@pytest.mark.parametrize(
    "make",
    [
        lambda: superpod(40, leaf_nodes=8),
        lambda: nvl72(40),
        lambda: uniform(8, 8, [("a", 2), ("b", 2), ("c", 2)]),
    ],
)
def test_properties_on_random_states(make):
    """On random states: place() never mutates the state; an answer binds whole; required
    constraints hold; unconstrained and preferred jobs are placed exactly when the cluster
    can host them."""
    check_policy_on_random_states(KueueTAS(), make(), seed=12, states=20, complete=True)
