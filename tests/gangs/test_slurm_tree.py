"""SlurmTree: hand-computed selections on the topology.conf example of Slurm's topology guide,
gang all-or-nothing, required constraints, and place() leaving the state untouched."""

from __future__ import annotations

import pytest

from conftest import busy_state as _busy
from conftest import check_policy_on_random_states
from conftest import gang_job as _job
from gpudefrag.gangs.slurm_tree import SlurmTree
from gpudefrag.model.topology import Topology, nvl72, superpod, uniform


def _doc_tree() -> Topology:
    """doc/html/topology.shtml, first example::

        SwitchName=s0 Nodes=tux[0-1]     SwitchName=s4 Switches=s[0-1]
        SwitchName=s1 Nodes=tux[2-3]     SwitchName=s5 Switches=s[2-3]
        SwitchName=s2 Nodes=tux[4-5]     SwitchName=s6 Switches=s[4-5]
        SwitchName=s3 Nodes=tux[6-7]

    (8-GPU nodes; level "leaf" = s0-s3, "mid" = s4-s5, "root" = s6)."""
    return uniform(8, 8, [("leaf", 2), ("mid", 2), ("root", 2)])


def test_doc_topology_hand_computed():
    """tux0, tux4 and tux5 are busy: eligible (wholly free) nodes per leaf s0..s3 = 1, 2, 0, 2;
    s4 = 3, s5 = 2, s6 = 5.  The top switch is always s6 (the highest level that fits).

    2 nodes: scanning s0, s1, s3: s1 fits and s0 does not -> s1; s3 also fits with the same
    count -> no better (ties keep the earlier switch) -> tux2, tux3.

    3 nodes: no leaf fits.  s1 beats s0 (same parent s4, more nodes); s3 vs s1: the parents
    differ, s5 (2) does not fit and s4 (3) does -> s1 stays.  Take tux2, tux3; s4 drops to 1,
    s6 to 3.  Distances from s1: s0 2 hops, s3 4.  Next: s0 first, then s3: both fit the
    1 node left and s0 has fewer -> s0 -> tux1.  All within s4, the lowest switch that fits.

    4 nodes: s4 (3) and s5 (2) do not fit either, so s3 vs s1 ends comparing s5 < s4 -> s1:
    tux2, tux3.  Then s0 (distance 2, does not fit 2) is kept over s3 (fits, but distance 4):
    a closer leaf only loses to a farther one that fits if the farther one is not farther ->
    tux1; then s3 -> tux6."""
    s = _busy(_doc_tree(), {0: 8, 4: 8, 5: 8})
    pol = SlurmTree()
    assert pol.place(s, _job(16)) == [2, 3]
    assert pol.place(s, _job(24)) == [2, 3, 1]
    assert pol.place(s, _job(32)) == [2, 3, 1, 6]
    assert pol.place(s, _job(40)) == [2, 3, 1, 6, 7]
    assert pol.place(s, _job(48)) is None


def test_single_node_jobs_take_the_best_fit_leaf_then_bitmap_order():
    """A lone pod: eligible nodes are those with room.  A 4-GPU pod with tux0 busy and tux2
    at 6 used: eligible per leaf s0 1 (tux1), s1 1 (tux3), s2 2, s3 2 -> every leaf fits one
    node; the fewest eligible nodes wins, s0 and s1 tie and the earlier switch stays -> tux1.
    A 2-GPU pod: tux2 is eligible too (s1 2); s0 still has the fewest.  Nodes inside the leaf
    are taken in bitmap order: Slurm does not pack GPUs by free count within a leaf."""
    s = _busy(_doc_tree(), {0: 8, 2: 6})
    pol = SlurmTree()
    assert pol.place(s, _job(4)) == [1]
    assert pol.place(s, _job(2)) == [1]
    s2 = _busy(_doc_tree(), {0: 8, 1: 8, 2: 6})
    # s0 has nothing; s1: tux2 (2 free) and tux3 -> 2 eligible for a 2-GPU pod, as s2, s3:
    # the first of the equal leaves, s1, and its first node, tux2
    assert pol.place(s2, _job(2)) == [2]


def test_remainder_pod_whole_node_or_hetjob():
    """[8, 8, 4] on the doc tree with tux0, tux4, tux5 busy and tux7 half used.  As one
    ``-N 3 --gres=gpu:8`` job it needs three wholly free nodes: tux1, tux2, tux3 (s4) plus
    nothing else -> s1 then s0: [2, 3, 1] (the 4-GPU pod on the last node).  As a
    heterogeneous job, component 1 (-N 2) takes s1 (tux2, tux3), component 2 (-N 1, 4 GPUs)
    sees tux1 (s0), tux6 and tux7 (s3): s0 has the fewest -> tux1."""
    s = _busy(_doc_tree(), {0: 8, 4: 8, 5: 8, 7: 4})
    assert SlurmTree().place(s, _job(20)) == [2, 3, 1]
    assert SlurmTree(hetjob=True).place(s, _job(20)) == [2, 3, 1]
    s2 = _busy(_doc_tree(), {0: 8, 1: 8, 4: 8, 5: 8, 7: 4})
    # whole nodes left: tux2, tux3, tux6 -> the homogeneous job spans s1 and s3; the hetjob
    # puts its two full pods in s1 and the 4-GPU pod on s3 (tux6, the first eligible)
    assert SlurmTree().place(s2, _job(20)) == [2, 3, 6]
    assert SlurmTree(hetjob=True).place(s2, _job(20)) == [2, 3, 6]
    assert SlurmTree().place(s2, _job(28)) is None
    assert SlurmTree(hetjob=True).place(s2, _job(28)) == [2, 3, 6, 7]


def test_required_levels_and_gang_all_or_nothing():
    """required:leaf is ``--switches=1`` without a time limit: the job waits unless one leaf
    switch holds it.  With tux0, tux4, tux5 busy, 3 nodes fit no leaf (None) but do fit s4
    (required:mid -> [2, 3, 1]); 4 nodes fit no mid switch."""
    s = _busy(_doc_tree(), {0: 8, 4: 8, 5: 8})
    pol = SlurmTree()
    assert pol.place(s, _job(16, "required:leaf")) == [2, 3]
    assert pol.place(s, _job(24, "required:leaf")) is None
    assert pol.place(s, _job(24, "required:mid")) == [2, 3, 1]
    assert pol.place(s, _job(32, "required:mid")) is None
    assert pol.place(s, _job(32, "required:root")) == [2, 3, 1, 6]
    assert pol.place(s, _job(24, "preferred:leaf")) == [2, 3, 1]
    assert pol.place(s, _job(8, "required:node")) == [1]
    assert pol.place(s, _job(16, "required:node")) is None
    assert pol.place(s, _job(48)) is None  # 6 nodes asked, 5 free: nothing binds


@pytest.mark.parametrize("hetjob", [False, True])
@pytest.mark.parametrize("make", [lambda: superpod(40, leaf_nodes=8), lambda: nvl72(40), _doc_tree])
def test_properties_on_random_states(make, hetjob):
    """On random states: place() never mutates the state; an answer binds whole; required
    constraints hold; as a heterogeneous job, an unconstrained job is placed exactly when the
    cluster can host it (the presets have a root switch)."""
    check_policy_on_random_states(SlurmTree(hetjob=hetjob), make(), seed=13, states=15, complete=hetjob)
