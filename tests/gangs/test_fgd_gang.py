"""FgdGang: hand-computed fragmentation values on toy clusters of 4-GPU nodes, the node FGD
picks (checked against recomputing the measure after every possible bind), the domain with
the smallest increase for a gang, all-or-nothing gangs, and place() leaving the state alone."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpudefrag.gangs.fgd_gang import FgdGang
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Constraint, Job
from gpudefrag.model.topology import Topology, uniform

DIST = {1: 0.5, 2: 0.25, 4: 0.25}


def _job(jid: int, gpus: int, c: str | None = None, milli: int = 1000) -> Job:
    con = None if c is None else Constraint(*c.split(":"))
    return Job(jid, 0.0, 1.0, gpus, milli, 0, con)


def _busy(topo: Topology, used: dict[int, int]) -> ClusterState:
    s = ClusterState.for_topology(topo)
    for i, (node, g) in enumerate(sorted(used.items())):
        if g:
            s.bind_job(_job(10_000 + i, g), [node])
    return s


def test_fragmentation_by_hand():
    """Free 4 -> 0; free 1 -> sizes 2 and 4 cannot use it: 0.25 * 1000 + 0.25 * 1000 = 500;
    free 2 -> only size 4 cannot: 0.25 * 2000 = 500; full -> 0."""
    s = _busy(uniform(4, 4, [("leaf", 4)]), {1: 3, 2: 2, 3: 4})
    assert FgdGang(DIST).fragmentation(s).tolist() == pytest.approx([0.0, 500.0, 500.0, 0.0])


def test_sizes_above_a_node_count_as_full_node_pods_and_probabilities_are_normalised():
    """{8: 2, 1: 2} on 4-GPU nodes = {full node: 0.5, 1 GPU: 0.5}: a node with 3 free measures
    0.5 * 3000."""
    s = _busy(uniform(2, 4, [("leaf", 2)]), {0: 1})
    assert FgdGang({8: 2.0, 1: 2.0}).fragmentation(s).tolist() == pytest.approx([1500.0, 0.0])


def test_single_pods_go_where_the_measure_grows_least():
    """1 GPU: node 0 (4 free -> 3: +750), node 1 (1 -> 0: -500), node 2 (2 -> 1: 500 -> 500,
    +0): node 1.  2 GPUs: node 0 (+500), node 2 (2 -> 0: -500): node 2."""
    s = _busy(uniform(3, 4, [("leaf", 3)]), {1: 3, 2: 2})
    fgd = FgdGang(DIST)
    assert fgd.deltas(s, _job(1, 1), 1).tolist() == pytest.approx([750.0, -500.0, 0.0])
    assert fgd.place(s, _job(1, 1)) == [1]
    assert fgd.deltas(s, _job(1, 2), 2).tolist() == pytest.approx([500.0, np.inf, -500.0])
    assert fgd.place(s, _job(1, 2)) == [2]


def test_sharing_pod_is_costed_on_the_gpu_bind_gives_it():
    """{1: 0.5, 2: 0.5}.  Node 1 has one GPU at 500 free (measure 0.5 * 500 + 0.5 * 500 = 500):
    a 500-milli pod fills it (-500).  Node 2 has 2 free GPUs: the pod splits one (500 on a
    partial GPU: size 1 fits, 500 fragmented -> 250; size 2 does not, 1500 -> 750: +1000).
    Node 0 (4 free): 500 fragmented for both sizes: +500."""
    s = _busy(uniform(3, 4, [("leaf", 3)]), {1: 3, 2: 2})
    s.bind_job(_job(50, 1, milli=500), [1])
    fgd = FgdGang({1: 0.5, 2: 0.5})
    assert fgd.fragmentation(s).tolist() == pytest.approx([0.0, 500.0, 0.0])
    assert fgd.deltas(s, _job(1, 1, milli=500), 1).tolist() == pytest.approx([500.0, -500.0, 1000.0])
    assert fgd.place(s, _job(1, 1, milli=500)) == [1]


def test_a_sharing_size_in_the_distribution_fragments_partial_gpus_it_does_not_fit():
    """{0.5: 1}: a GPU with 300 milli free is useless to a 500-milli typical pod."""
    s = ClusterState.for_topology(uniform(1, 4, [("leaf", 1)]))
    s.bind_job(_job(1, 1, milli=700), [0])
    assert FgdGang({0.5: 1.0}).fragmentation(s).tolist() == pytest.approx([300.0])


def test_place_matches_recomputing_the_measure_after_each_possible_bind():
    """Random states with sharing pods: the chosen node is the first one minimising the
    measure's total after an actual bind."""
    rng = random.Random(3)
    dist = {1: 0.4, 2: 0.2, 4: 0.2, 0.5: 0.2}
    fgd = FgdGang(dist)
    for _ in range(40):
        s = ClusterState.for_topology(uniform(6, 4, [("leaf", 6)]))
        for jid in range(rng.randint(2, 14)):
            g = rng.choice([1, 1, 2, 3])
            milli = rng.choice([250, 500, 1000]) if g == 1 else 1000
            j = _job(jid, g, milli=milli)
            ok = [n for n in range(6) if s.fits(n, g, milli)]
            if ok:
                s.bind_job(j, [rng.choice(ok)])
        for g, milli in ((1, 1000), (2, 1000), (3, 1000), (1, 500), (1, 250)):
            job = _job(999, g, milli=milli)
            totals = []
            for n in range(6):
                if not s.fits(n, g, milli):
                    totals.append(np.inf)
                    continue
                t = s.copy()
                t.bind_job(job, [n])
                totals.append(float(fgd.fragmentation(t).sum()))
            got = fgd.place(s, job)
            if np.isinf(min(totals)):
                assert got is None
            else:
                best = min(totals)
                assert got is not None and totals[got[0]] == pytest.approx(best)
                assert got[0] == next(i for i, v in enumerate(totals) if v == pytest.approx(best))


def test_gang_picks_the_domain_whose_whole_placement_grows_the_measure_least():
    """Leaves {0, 1} and {2, 3}; a 5-GPU job is [4, 1].  Leaf 0: the full pod takes node 0 and
    the remainder node 1 (2 free -> 1: +0).  Leaf 1: node 2, then node 3 (1 free -> 0: -500):
    leaf 1 wins under required:leaf.  A 9-GPU job ([4, 4, 1]) fits no leaf: preferred falls
    back to the cluster (whole nodes 0 and 2, the remainder on node 3); required waits."""
    s = _busy(uniform(4, 4, [("leaf", 2)]), {1: 2, 3: 3})
    fgd = FgdGang(DIST)
    assert fgd.place(s, _job(1, 5, "required:leaf")) == [2, 3]
    assert fgd.place(s, _job(1, 9, "preferred:leaf")) == [0, 2, 3]
    assert fgd.place(s, _job(1, 9, "required:leaf")) is None
    assert fgd.place(s, _job(1, 8)) == [0, 2]


def test_full_node_gang_ties_go_to_the_fuller_domain():
    """Only full-node pods: every domain scores +0, so the one with fewer free GPUs wins."""
    s = _busy(uniform(4, 4, [("leaf", 2)]), {3: 1})
    assert FgdGang(DIST).place(s, _job(1, 4, "required:leaf")) == [2]


def test_gang_is_all_or_nothing_and_place_leaves_the_state_alone():
    s = _busy(uniform(4, 4, [("leaf", 4)]), {0: 4, 1: 3, 2: 2})
    before = (s.gpu_milli_left.copy(), s.free_gpus.copy(), s.epoch, dict(s.placements))
    fgd = FgdGang(DIST)
    assert fgd.place(s, _job(1, 10)) is None  # [4, 4, 2]: one whole node, two needed
    assert fgd.place(s, _job(1, 6)) == [3, 2]  # remainder 2 on node 2 (2 -> 0: -500)
    assert np.array_equal(s.gpu_milli_left, before[0]) and np.array_equal(s.free_gpus, before[1])
    assert s.epoch == before[2] and s.placements == before[3]


def test_bad_distributions_are_refused():
    with pytest.raises(ValueError):
        FgdGang({1.5: 1.0})
    with pytest.raises(ValueError):
        FgdGang({1: 0.0})
    with pytest.raises(ValueError):
        FgdGang({1: -1.0, 2: 2.0})
