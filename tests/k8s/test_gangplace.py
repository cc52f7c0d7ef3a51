"""Gangs placed all or nothing inside topology domains (hand-worked cases in the comments)."""

from __future__ import annotations

from k8sobj import node

from gpudefrag.frag.typical import typical_pods
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.gangplace import place_gang
from gpudefrag.k8s.topology_config import topology_from_nodes
from gpudefrag.model.cluster import Placement
from gpudefrag.model.jobs import Constraint
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.policies.registry import make_policy

LEAF = "example.com/leaf"


def _setup():
    # leaf-0 = {a, b}, leaf-1 = {c, d}; b has 2 of its 8 GPUs busy.
    nodes = [node(n, **{LEAF: leaf}) for n, leaf in (("a", "l0"), ("b", "l0"), ("c", "l1"), ("d", "l1"))]
    cache = ClusterCache()
    cache.replace_nodes(nodes)
    cache.state.bind(Placement(1, (0, 1), PodSpec(1000, 1024, 2, 1000)))
    topo = topology_from_nodes([cache.nodes[n] for n in cache.order], [LEAF])
    typical = typical_pods(pod_batch([PodSpec(1000, 1024, 8, 1000)]))
    return cache, topo, make_policy("fgd", typical)


def _nodes(placed):
    return sorted({p.node for p in placed})


def test_required_leaf_goes_where_it_fits_whole():
    cache, topo, policy = _setup()
    pod8 = PodSpec(1000, 1024, 8, 1000)
    # 2 x 8 GPUs: leaf-0 has 8 + 6 = 14 free < 16; leaf-1 has 16 -> nodes c, d (indices 2, 3)
    placed = place_gang(cache.state, [pod8, pod8], policy, topo, Constraint("required", LEAF))
    assert _nodes(placed) == [2, 3]


def test_best_fit_domain_first():
    cache, topo, policy = _setup()
    pod4 = PodSpec(1000, 1024, 4, 1000)
    # 2 x 4 GPUs fits both leaves; leaf-0 has fewer free GPUs (14 < 16), so it is chosen
    placed = place_gang(cache.state, [pod4, pod4], policy, topo, Constraint("required", LEAF))
    assert set(_nodes(placed)) <= {0, 1}


def test_required_fails_whole_preferred_goes_up():
    cache, topo, policy = _setup()
    pod8 = PodSpec(1000, 1024, 8, 1000)
    # 3 x 8 GPUs fits no leaf (14 and 16 free): required -> nothing; preferred -> the whole
    # cluster: a, c, d (b has only 6 free)
    before = cache.state.snapshot()
    assert place_gang(cache.state, [pod8] * 3, policy, topo, Constraint("required", LEAF)) is None
    placed = place_gang(cache.state, [pod8] * 3, policy, topo, Constraint("preferred", LEAF))
    assert _nodes(placed) == [0, 2, 3]
    assert cache.state.snapshot() == before  # deciding changes nothing


def test_hostname_level_and_pinned_members():
    cache, topo, policy = _setup()
    pod4 = PodSpec(1000, 1024, 4, 1000)
    # both pods on one node: nodes with >= 8 free are a, c, d (8 each); fewest free, then lowest -> a
    placed = place_gang(
        cache.state, [pod4, pod4], policy, topo, Constraint("required", "kubernetes.io/hostname")
    )
    assert _nodes(placed) == [0]
    # a member already bound on d (pinned) keeps the rest in d's leaf (leaf-1)
    placed = place_gang(cache.state, [pod4], policy, topo, Constraint("required", LEAF), pinned_nodes=[3])
    assert _nodes(placed)[0] in (2, 3)
    # unknown level: cannot be placed as asked
    assert place_gang(cache.state, [pod4], policy, topo, Constraint("required", "nope")) is None
