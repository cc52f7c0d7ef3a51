"""VolcanoBinpack: hand-computed placements from Volcano's docs and code, gang all-or-nothing,
required constraints, and place() leaving the state untouched."""

from __future__ import annotations

import random

import pytest

from conftest import busy_state as _busy
from conftest import check_policy_on_random_states, random_gang_jobs, random_gang_state
from conftest import gang_job as _job
from gpudefrag.gangs.volcano import VolcanoBinpack
from gpudefrag.model.topology import Topology, from_node_labels, nvl72, superpod, uniform


def _binary8() -> Topology:
    """Eight nodes under a binary tree of HyperNodes: tier 1 {0,1} {2,3} {4,5} {6,7}, tier 2
    {0-3} {4-7}, tier 3 all (the 7-HyperNode figure of Volcano's user guide)."""
    return uniform(8, 8, [("t1", 2), ("t2", 2), ("t3", 2)])


def test_normal_pods_follow_hypernode_binpack_of_the_user_guide():
    """docs/user-guide/how_to_use_network_topology_aware_scheduling.md ("hypernode-binpack-
    normal-pods"): 8 nodes, 7 HyperNodes; node0, node2 and node4 are busy; a job of two pods
    without a network topology goes to node1 and node3.

    By hand (batchNodeOrderFnForNormalPods, fading 0.8, tiers 1..4 with the cluster top,
    weights 1, .8, .64, .512; binpack is equal on every wholly free node):
    pod 1 -- node1: tier1 {0,1} (8+8)/16 = 1, tier2 {0-3} (16+8)/32 = .75, tier3 (24+8)/64;
    node3: the same; node5: tier2 {4-7} (8+8)/32 = .5; node6/7: tier1 8/16.  Tie node1/node3:
    the lowest index, node1.  Pod 2 -- node3: tier1 1, tier2 (24+8)/32 = 1 now: node3."""
    s = _busy(_binary8(), {0: 8, 2: 8, 4: 8})
    assert VolcanoBinpack().place(s, _job(16)) == [1, 3]


def test_hard_mode_picks_the_fullest_hypernode_of_the_user_guide():
    """User guide "hypernode-binpack": two tier-1 HyperNodes, HyperNode0 partly used; a job
    with highestTierAllowed=1 goes to HyperNode0, keeping HyperNode1 whole.

    Two leaves of 4 nodes; node0 busy.  HyperNodeOrderFn: leaf0 (8 + 16) / 32 = .75, leaf1
    16 / 32 = .5 -> leaf0.  Pod 1: binpack ties on nodes 1-3 (all wholly free) -> node1;
    the job's HyperNode is now leaf0.  Pod 2: nodes 2 and 3 score tierScore 1 + 1/2 (one of
    the two pods already there) -> node2."""
    topo = uniform(8, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {0: 8})
    assert VolcanoBinpack().place(s, _job(16, "required:leaf")) == [1, 2]
    # without the HyperNode binpack score the lowest-index candidate HyperNode (leaf0) still
    # wins here; on a state where leaf1 is fuller the score decides
    s2 = _busy(topo, {0: 4, 4: 8, 5: 8})
    assert VolcanoBinpack().place(s2, _job(16, "required:leaf")) == [6, 7]
    assert VolcanoBinpack(hypernode_binpack=False).place(s2, _job(16, "required:leaf")) == [1, 2]


def test_hard_mode_searches_the_lowest_tier_first():
    """hyperNodeGradientFn returns the eligible HyperNodes by tier, lowest first, and
    allocateForJob stops at the first tier with a solution: ``required:t3`` (the whole tree,
    tier 3) still puts a 2-pod job inside one tier-1 HyperNode.  Busy: nodes 0, 2, 4; the only
    tier-1 HyperNode with two free nodes is {6,7}."""
    s = _busy(_binary8(), {0: 8, 2: 8, 4: 8})
    assert VolcanoBinpack().place(s, _job(16, "required:t3")) == [6, 7]
    assert VolcanoBinpack().place(s, _job(16, "required:t1")) == [6, 7]
    # three pods: no tier-1 HyperNode fits; tier 2: {0-3} has free 1, 3 (no), {4-7} 5, 6, 7
    assert VolcanoBinpack().place(s, _job(24, "required:t2")) == [5, 6, 7]
    assert VolcanoBinpack().place(s, _job(24, "required:t1")) is None


def test_soft_mode_spreads_by_lca_tier_and_task_count():
    """Soft mode (``preferred``) runs as hard mode up to the cluster top.  Three leaves of 4
    nodes under a spine; busy: node3, node10, node11 (free: leaf0 {0,1,2}, leaf1 {4-7}, leaf2
    {8,9}).  A 5-pod job fits no leaf, so the spine (tier 2) is the HyperNode.  Pods:
    1 -> node0 (binpack ties, lowest index; allocated HyperNode := leaf0);
    2, 3 -> node1, node2 (same leaf: tierScore 1, plus 1/5 and 2/5 for the pods already there);
    4 -> leaf0 is full; every other node has LCA = spine, tierScore (3-2)/(3-1) = .5, no pod
    of the job in its leaf yet -> lowest index, node4 (allocated := spine);
    5 -> nodes 5-7 get .5 + 1/5 (node4 is in leaf1) -> node5."""
    topo = uniform(12, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {3: 8, 10: 8, 11: 8})
    assert VolcanoBinpack().place(s, _job(40, "preferred:leaf")) == [0, 1, 2, 4, 5]


def test_remainder_pod_binpacks_onto_the_fullest_node_with_room():
    """Leaf0 = nodes 0-2 wholly free and node3 with 2 GPUs free; leaf1 wholly free; leaf2 busy.
    HyperNode scores for [8, 8, 2]: leaf0 (6 + 18) / 32 > leaf1 18 / 32 -> leaf0.  Full pods:
    node0, node1 (binpack ties; same leaf).  The 2-GPU pod: node2 scores 100 * (0 + 2) / 8 = 25,
    node3 100 * (6 + 2) / 8 = 100, equal LCA scores -> node3.  A 4-GPU remainder does not fit
    node3 -> node2."""
    topo = uniform(12, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {3: 6, 8: 8, 9: 8, 10: 8, 11: 8})
    assert VolcanoBinpack().place(s, _job(18, "required:leaf")) == [0, 1, 3]
    assert VolcanoBinpack().place(s, _job(20, "required:leaf")) == [0, 1, 2]
    assert VolcanoBinpack().place(s, _job(2)) == [3]


def test_gang_is_all_or_nothing():
    topo = uniform(8, 8, [("leaf", 4), ("spine", 0)])
    s = _busy(topo, {0: 8, 1: 8, 4: 8, 5: 8, 6: 1})
    pol = VolcanoBinpack()
    # wholly free: nodes 2, 3 (leaf0) and 7 (leaf1); node6 has 7 GPUs free.  A 4-node job
    # does not start (no pod binds before all have a place)
    assert pol.place(s, _job(32)) is None
    assert pol.place(s, _job(24)) is not None
    # required:leaf, 3 full pods: leaf0 has 2 free nodes, leaf1 one -> waits
    assert pol.place(s, _job(24, "required:leaf")) is None
    # [8, 8, 7]: leaf0 has the two whole nodes but no other node with 7 free; leaf1 has node6
    # with 7 free but one whole node only
    assert pol.place(s, _job(23, "required:leaf")) is None
    assert pol.place(s, _job(16, "required:leaf")) == [2, 3]


@pytest.mark.parametrize("make", [lambda: superpod(40, leaf_nodes=8), lambda: nvl72(40), _binary8])
def test_properties_on_random_states(make):
    """On random states: place() never mutates the state; an answer binds whole (one node
    per pod, every pod fits, the gang together); required constraints hold; a job without a
    constraint or with a preferred one is placed exactly when the cluster can host it."""
    check_policy_on_random_states(VolcanoBinpack(), make(), seed=11, states=20, complete=True)


def _scattered() -> Topology:
    """12 nodes whose leaves are not index ranges (leaf = node % 4, pod = node % 2)."""
    labels = [{"leaf": f"l{n % 4}", "pod": f"p{n % 2}"} for n in range(12)]
    return from_node_labels([f"n{n}" for n in range(12)], [8] * 12, ["leaf", "pod"], labels)


@pytest.mark.parametrize(
    "make", [lambda: superpod(40, leaf_nodes=8), lambda: nvl72(40), _binary8, _scattered]
)
@pytest.mark.parametrize("kwargs", [{}, {"normal_pod_fading": 0.0}, {"nta_weight": 0}])
def test_full_pod_shortcut_equals_the_per_pod_loop(make, kwargs):
    """The tier-1 HyperNode fill shortcut gives the same nodes as scoring every pod."""
    topo = make()
    rng = random.Random(21)
    fast, slow = VolcanoBinpack(**kwargs), VolcanoBinpack(**kwargs)
    slow._fill_shortcut = False
    for _ in range(15):
        s = random_gang_state(topo, rng)
        for job in random_gang_jobs(topo, rng, 12):
            assert fast.place(s, job) == slow.place(s, job)
