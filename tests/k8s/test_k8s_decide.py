"""One scheduling cycle on the cache: reservations, masked nodes, gangs waiting for members."""

from __future__ import annotations

import copy

from k8sobj import node, pod, pod_group

from gpudefrag.k8s import names
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.decide import decide_cycle
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.timefmt import to_rfc3339

NOW = 1_800_000_000.0


def _setup(*nodes):
    cache = ClusterCache()
    cache.replace_nodes(nodes)
    core = DecisionCore("bestfit", [])
    core.nodes_changed(cache)
    return cache, core


def _decide(cache, core):
    core.observe(cache)
    return decide_cycle(cache, cache.pending(), core.scheduler, core.policy, core.topology, NOW)


def _where(result):
    return {rec.key: result_node for rec, result_node in ((r, p.node) for r, p in result.binds)}


def test_reserved_node_only_for_its_pod():
    a = node("a", gpus=8)
    b = node("b", gpus=8)
    b["metadata"]["annotations"] = {
        names.RESERVED_FOR: "default/big",
        names.RESERVED_UNTIL: to_rfc3339(NOW + 60),
    }
    cache, core = _setup(a, b)
    cache.apply_pod("ADDED", pod("small", gpus=8, created="2026-12-01T00:00:00Z"))
    cache.apply_pod("ADDED", pod("big", gpus=8, created="2026-12-01T00:00:01Z"))
    cache.apply_pod("ADDED", pod("third", gpus=8, created="2026-12-01T00:00:02Z"))
    result = _decide(cache, core)
    # big owns b; small takes a (b is masked for it); third finds nothing left
    assert _where(result) == {"default/big": 1, "default/small": 0}
    assert [r.key for r in result.unplaced] == ["default/third"]


def test_expired_reservation_is_ignored_and_unready_node_masked():
    a = node("a", gpus=8)
    a["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    b = node("b", gpus=8)
    b["metadata"]["annotations"] = {
        names.RESERVED_FOR: "default/x",
        names.RESERVED_UNTIL: to_rfc3339(NOW - 1),
    }
    cache, core = _setup(a, b)
    cache.apply_pod("ADDED", pod("p", gpus=4))
    assert _where(_decide(cache, core)) == {"default/p": 1}


def test_gang_waits_for_min_member_then_binds_all_or_nothing():
    cache, core = _setup(node("a", gpus=8), node("b", gpus=8))
    cache.apply_pod_group("ADDED", pod_group("g", 3))
    for i in range(2):
        cache.apply_pod("ADDED", pod(f"g-{i}", gpus=8, group="g"))
    result = _decide(cache, core)
    assert result.binds == [] and result.gangs_waiting == ["default/g"]
    cache.apply_pod("ADDED", pod("g-2", gpus=8, group="g"))
    result = _decide(cache, core)  # 3 x 8 GPUs on 2 nodes: nothing binds
    assert result.binds == [] and len(result.unplaced) == 3
    cache.apply_pod_group("MODIFIED", pod_group("g", 2))
    shrunk = copy.deepcopy(cache.pods[cache.by_key["default/g-2"]].obj)
    cache.apply_pod("DELETED", shrunk)
    result = _decide(cache, core)
    assert sorted(p.node for _, p in result.binds) == [0, 1]


def test_solver_mode_places_a_cycle_validly():
    # the CP-SAT batch placer behind the same cycle: every bind fits, and applied in order they
    # never overfill a node (a 4-GPU node takes at most 4 of the 1-GPU pods)
    cache, _ = _setup(node("a", gpus=4), node("b", gpus=4))
    core = DecisionCore("solver", [])
    for i in range(10):
        cache.apply_pod("ADDED", pod(f"p{i}", gpus=1, created=f"2026-12-01T00:00:{i:02d}Z"))
    result = _decide(cache, core)
    state = cache.state.copy()
    for _, p in result.binds:
        state.bind(p)  # raises if a placement does not fit
    assert len(result.binds) == 8 and len(result.unplaced) == 2


def test_solver_mode_keeps_one_fgd_index_of_the_view_across_rebuilds():
    """With the solver, the decision core's policy is the batch placer's own FGD: the cycle
    attaches it to the cache's decision view and the observed pods' requests warm that one
    index; when the pods seen double, the typical pods are recomputed and the old index stops
    watching the view (one index on it, never two)."""
    from gpudefrag.policies.score_index import ScoreIndex

    cache, _ = _setup(node("a", gpus=4), node("b", gpus=4))
    core = DecisionCore("solver", [])
    assert core.policy is core.scheduler.placer.fgd
    view = cache.decision_view.state

    def indexes():
        return [w for w in view._watchers if isinstance(w, ScoreIndex)]

    cache.apply_pod("ADDED", pod("p0", gpus=1, created="2026-12-01T00:00:00Z"))
    _decide(cache, core)
    first = core.policy
    assert indexes() == [first._index] and first.expected  # attached and told the pods' requests
    for i in range(1, 4):  # the pods seen double: typical pods recomputed, a new FGD built
        cache.apply_pod("ADDED", pod(f"p{i}", gpus=1, created=f"2026-12-01T00:00:0{i}Z"))
    _decide(cache, core)
    assert core.policy is not first and first._index is None
    assert indexes() == [core.policy._index]


def test_gang_with_a_gated_member_waits():
    # minMember 3: two members schedulable, the third still carries a scheduling gate (Kueue lifts
    # them one by one); nothing may bind until all three can go together
    cache, core = _setup(node("a", gpus=8), node("b", gpus=8), node("c", gpus=8))
    cache.apply_pod_group("ADDED", pod_group("g", 3))
    for i in range(3):
        p = pod(f"g-{i}", gpus=8, group="g")
        if i == 2:
            p["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
        cache.apply_pod("ADDED", p)
    result = _decide(cache, core)
    assert result.binds == [] and result.gangs_waiting == ["default/g"]
    # only one member in this cycle's slice: the other pending members are placed with it
    ungated = copy.deepcopy(cache.pods[cache.by_key["default/g-2"]].obj)
    ungated["spec"].pop("schedulingGates")
    cache.apply_pod("MODIFIED", ungated)
    core.observe(cache)
    only_new = [cache.pods[cache.by_key["default/g-2"]]]
    result = decide_cycle(cache, only_new, core.scheduler, core.policy, core.topology, NOW)
    assert sorted(p.node for _, p in result.binds) == [0, 1, 2]


def test_solver_settings_reach_the_placer_and_ages_count_from_creation():
    # one node with two GPUs; a 2-GPU pod created 3,000 s ago, then two 1-GPU pods created 10 s
    # ago.  Aging 1 milli/s: the pair is worth 2,000 + 3,000 against 2,000 + 10 + 10, so it keeps
    # the node (FGD's queue order); with age_max_gpus=1 it earns no bonus and the two young pods
    # are worth more (worked out as in tests/batch/test_aging.py)
    from gpudefrag.batch.solver_config import SolverConfig

    placed = {}
    for most in (0, 1):
        cache = ClusterCache()
        cache.replace_nodes([node("a", gpus=2)])
        core = DecisionCore("solver", [], solver=SolverConfig(age_weight_milli_per_s=1.0, age_max_gpus=most))
        core.nodes_changed(cache)
        assert core.scheduler.placer.config.age_max_gpus == most
        cache.apply_pod("ADDED", pod("pair", gpus=2, created=to_rfc3339(NOW - 3000)))
        cache.apply_pod("ADDED", pod("young-a", gpus=1, created=to_rfc3339(NOW - 10)))
        cache.apply_pod("ADDED", pod("young-b", gpus=1, created=to_rfc3339(NOW - 10)))
        placed[most] = sorted(rec.key for rec, _ in _decide(cache, core).binds)
    assert placed == {0: ["default/pair"], 1: ["default/young-a", "default/young-b"]}


def test_observing_the_cache_tells_the_policy_its_pods_requests_most_common_first():
    """At the first cycle (and each doubling of the pods seen) the policy expects the requests of
    the pods the cache holds, most common first, and an index attached builds their trees."""
    import numpy as np

    cache = ClusterCache()
    cache.replace_nodes([node("a"), node("b")])
    for i in range(3):
        cache.apply_pod("ADDED", pod(f"s{i}", milli=300, cpu="2"))
    cache.apply_pod("ADDED", pod("w", gpus=1, cpu="4", node_name="a", gpu_index="0", phase="Running"))
    core = DecisionCore("fgd", [], typical=None)
    core.observe(cache)
    shared = cache.pods[cache.by_key["default/s0"]].request.spec.fit_key
    whole = cache.pods[cache.by_key["default/w"]].request.spec.fit_key
    assert core.policy.expected == (shared, whole)
    view = cache.decision_view.sync(np.zeros(0, dtype=np.int64))
    core.policy.attach(view)
    index = core.policy._index
    for request in (shared, whole):  # each request's own floor has its tree
        assert request in index._shapes


def test_a_cordoned_node_with_its_taint_is_masked_once_and_pods_decide_on_the_indexed_view():
    """A cordoned node carries ``node.kubernetes.io/unschedulable``, which a pod does not
    tolerate; it is already masked, so the pod still decides on the decision view itself (the
    policy's index attached there), not on a copy, and does not land on it."""
    a, b = node("a", gpus=8), node("b", gpus=8)
    b["spec"] = {
        "unschedulable": True,
        "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    }
    cache, core = _setup(a, b)
    cache.apply_pod("ADDED", pod("p", gpus=1))
    core.observe(cache)  # the observed typical pods: a new policy, spied on below
    seen = []
    select = core.policy.select

    def spy(state, spec):
        seen.append(state)
        return select(state, spec)

    core.policy.select = spy
    result = _decide(cache, core)
    assert _where(result) == {"default/p": cache.index["a"]}
    assert seen and all(s is cache.decision_view.state for s in seen)
    assert core.policy._index is not None and core.policy._index.state is cache.decision_view.state
