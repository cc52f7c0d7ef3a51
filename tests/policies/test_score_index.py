"""The incremental score index decides exactly what the full scan decides.

Every deterministic policy is run twice on the same random state: one instance attached to the
state (indexed), one fresh instance per query on the state itself (full scan, never attached).
After every bind, unbind and mask the two must pick the same node and GPUs for random pods.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.registry import DETERMINISTIC_POLICIES, make_policy
from gpudefrag.policies.score_index import ScoreIndex


def _scan(name: str, typical, state: ClusterState, pod: PodSpec) -> Placement | None:
    return make_policy(name, typical).select(state, pod)


def _check_same(indexed, name: str, typical, state: ClusterState, probes: list[PodSpec]) -> None:
    for pod in probes:
        got = indexed.select(state, pod)
        want = _scan(name, typical, state, pod)
        assert (got is None) == (want is None), (name, pod)
        if got is not None and want is not None:
            assert (got.node, got.gpus) == (want.node, want.gpus), (name, pod)


@pytest.mark.parametrize("name", DETERMINISTIC_POLICIES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_indexed_decisions_equal_full_scan(name, data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=10, max_prior=15))
    probes = data.draw(st.lists(gen.pods(), min_size=1, max_size=4))
    indexed = make_policy(name, typical_small)
    indexed.attach(state)
    rng = random.Random(data.draw(st.integers(0, 2**16)))
    bound: list[Placement] = []
    _check_same(indexed, name, typical_small, state, probes)
    for _ in range(data.draw(st.integers(1, 12))):
        op = rng.random()
        if op < 0.55:
            pod = rng.choice(probes)
            p = indexed.select(state, pod)
            if p is not None:
                state.bind(p)
                bound.append(p)
        elif op < 0.9 and bound:
            state.unbind(bound.pop(rng.randrange(len(bound))))
        else:  # a what-if mask on the state itself also goes through the watchers
            state.mask_many(np.array([rng.randrange(state.num_nodes)], dtype=np.int64))
        _check_same(indexed, name, typical_small, state, probes)


def test_equal_tie_ranks_fall_back_to_the_lowest_index(gen, typical_small):
    nodes = [("V100M32", 8, 96000, 1 << 20)] * 5
    state = gen.build_cluster(nodes, np.zeros(5, dtype=np.int64))
    policy = make_policy("fgd", typical_small)
    policy.attach(state)
    pod = PodSpec(1000, 1024, 1, 1000)
    assert policy.select(state, pod).node == _scan("fgd", typical_small, state, pod).node == 0
    state.bind(Placement(0, (0,), pod))
    state.bind(Placement(3, (0,), pod))
    got = policy.select(state, pod)
    assert (got.node, got.gpus) == ((lambda p: (p.node, p.gpus))(_scan("fgd", typical_small, state, pod)))


def test_copies_are_scanned_and_do_not_disturb_the_index(gen, typical_small):
    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 20)] * 4)
    policy = make_policy("bestfit", typical_small)
    policy.attach(state)
    pod = PodSpec(2000, 1024, 2, 1000)
    first = policy.select(state, pod)
    what_if = state.copy()
    what_if.mask(first.node)
    assert policy.select(what_if, pod).node != first.node  # a copy is scanned, mask seen
    assert policy.select(state, pod).node == first.node  # the index ignored the copy


def test_a_long_log_compacts_and_a_lagging_shape_rescans(gen, typical_small):
    """Far more changes than the log holds, with one shape asked rarely: still exact."""
    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 20), ("T4", 4, 32000, 1 << 19)] * 3)
    index = ScoreIndex(state, kind=0)  # BestFit's kernel id
    frequent = PodSpec(1000, 512, 1, 250)
    rare = PodSpec(4000, 2048, 2, 1000)
    rng = random.Random(7)
    bound: list[Placement] = []
    policy = make_policy("bestfit", typical_small)
    for step in range(3000):
        node, _ = index.best(frequent)
        if node >= 0 and rng.random() < 0.6:
            p = policy.select(state, frequent)
            assert p is not None and p.node == node
            state.bind(p)
            bound.append(p)
        elif bound:
            state.unbind(bound.pop(rng.randrange(len(bound))))
        if step % 700 == 0:
            want = _scan("bestfit", typical_small, state, rare)
            assert index.best(rare)[0] == (-1 if want is None else want.node)
    assert index._log.size <= 4096  # compaction kept the log bounded
    index.close()
    assert index not in state._watchers


def test_pickled_state_leaves_watchers_behind(gen, typical_small):
    import pickle

    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 20)] * 2)
    make_policy("fgd", typical_small).attach(state)
    assert len(state._watchers) == 1
    assert pickle.loads(pickle.dumps(state))._watchers == []


@pytest.mark.parametrize("name", ["fgd", "bestfit"])
def test_bounded_kinds_keep_one_tree_per_gpu_request_and_stay_exact(name, gen, typical_small):
    """FGD and BestFit build trees per GPU request and CPU floor (the typical pods' when attached,
    floor 0 of others when first asked): pods that differ only in CPU or memory share them, and
    each still gets the full scan's node and GPU, on a cluster of many alike
    nodes (long score ties) filled until CPU runs short on some."""
    rng = np.random.default_rng(11)
    specs = [("V100M32", 8, 96000, 1 << 18), ("T4", 4, 32000, 1 << 16), ("", 0, 64000, 1 << 17)]
    state = gen.build_cluster(
        [specs[int(i)] for i in rng.integers(0, 3, size=120)], rng.permutation(120).astype(np.int64)
    )
    policy = make_policy(name, typical_small)
    policy.attach(state)
    gpu_parts = [(0, 0), (1, 250), (1, 500), (1, 1000), (2, 1000), (8, 1000)]
    asked: set[tuple[int, int]] = set()
    for step in range(400):
        num, milli = gpu_parts[int(rng.integers(len(gpu_parts)))]
        pod = PodSpec(int(rng.integers(0, 48)) * 1000, int(rng.integers(0, 64)) * 1024, num, milli)
        got = policy.select(state, pod)
        want = _scan(name, typical_small, state, pod)
        assert (got is None) == (want is None), (step, pod)
        if got is None or want is None:
            continue
        assert (got.node, got.gpus) == (want.node, want.gpus), (step, pod)
        asked.add((num, milli))
        state.bind(got)
    index = policy._index
    # built when attached: floor 0 and the typical request's CPU, per typical GPU request
    warmed = {(f, 0, n, m, mask) for cpu, n, m, mask in typical_small.requests() for f in (0, cpu)}
    assert index is not None and set(index._shapes) == warmed | {(0, 0, n, m, -1) for n, m in asked}
    assert index.leaves_scored < 400 * 40  # a search scores a few leaves, not the cluster


def test_an_unbounded_kind_evicts_the_shape_used_least_recently_and_stays_exact(
    gen, typical_small, monkeypatch
):
    """Past its tree budget, a per-shape index (GpuPacking) drops the shape used least recently;
    a dropped shape asked again is rebuilt and still gets the full scan's node."""
    from gpudefrag.policies import score_index

    monkeypatch.setattr(score_index, "TREE_BUDGET_BYTES", 0)
    monkeypatch.setattr(score_index, "MIN_TREES", 3)
    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 20), ("T4", 4, 32000, 1 << 19)] * 4)
    policy = make_policy("gpupacking", typical_small)
    policy.attach(state)
    shapes = [PodSpec(1000 * (k + 1), 512, 1, 500) for k in range(5)]
    rng = random.Random(3)
    for step in range(60):
        pod = shapes[0] if step % 2 else rng.choice(shapes)  # shape 0 stays hot
        got = policy.select(state, pod)
        want = _scan("gpupacking", typical_small, state, pod)
        assert (got is None) == (want is None)
        if got is not None:
            assert (got.node, got.gpus) == (want.node, want.gpus)
            state.bind(got)
        assert policy.index_trees() <= 3
    index = policy._index
    assert index.max_trees == 3
    assert shapes[0].fit_key in index._shapes  # the hot shape was never the least recent


def _scan_top(name: str, typical, state: ClusterState, pod: PodSpec, k: int) -> list[tuple[int, int]]:
    """(node, score) of the ``k`` best nodes by a full scan: highest score, then tie rank, then
    node index."""
    scores = make_policy(name, typical).score_nodes(state, pod)
    feasible = [n for n in range(state.num_nodes) if scores[n] >= 0]
    feasible.sort(key=lambda n: (-int(scores[n]), int(state.tie_rank[n]), n))
    return [(n, int(scores[n])) for n in feasible[:k]]


@pytest.mark.parametrize("name", ["fgd", "bestfit"])
def test_top_nodes_of_an_index_are_the_full_scans_in_its_order(name, gen, typical_small):
    """The index's ``top(pod, k)`` (the batch placer's candidates) returns the nodes and scores a
    full scan ranks first, in the same order, for every k, as binds change the state; on a
    cluster with long score ties and repeated tie ranks."""
    rng = np.random.default_rng(5)
    specs = [("V100M32", 8, 96000, 1 << 18), ("T4", 4, 32000, 1 << 16), ("", 0, 64000, 1 << 17)]
    state = gen.build_cluster(
        [specs[int(i)] for i in rng.integers(0, 3, size=90)], rng.integers(0, 30, size=90).astype(np.int64)
    )
    policy = make_policy(name, typical_small)
    policy.attach(state)
    index = policy._index
    gpu_parts = [(0, 0), (1, 250), (1, 500), (1, 1000), (2, 1000), (8, 1000)]
    for step in range(150):
        num, milli = gpu_parts[int(rng.integers(len(gpu_parts)))]
        pod = PodSpec(int(rng.integers(0, 48)) * 1000, int(rng.integers(0, 64)) * 1024, num, milli)
        k = int(rng.choice([0, 1, 2, 5, 16, 200]))
        nodes, scores = index.top(pod, k)
        assert list(zip(nodes.tolist(), scores.tolist())) == _scan_top(name, typical_small, state, pod, k), (
            step,
            pod,
            k,
        )
        got = policy.select(state, pod)
        if got is not None:
            state.bind(got)


def test_fgd_top_nodes_agree_attached_or_scanned(gen, typical_small):
    """``FgdPolicy.top_nodes`` answers from the index on the attached state and from a scan on a
    copy; both agree with each other."""
    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 20), ("T4", 4, 32000, 1 << 19)] * 6)
    policy = make_policy("fgd", typical_small)
    policy.attach(state)
    pod = PodSpec(2000, 1024, 1, 500)
    state.bind(Placement(3, (0,), pod))
    assert policy.top_nodes(state, pod, 4).tolist() == policy.top_nodes(state.copy(), pod, 4).tolist()
    with pytest.raises(ValueError, match="bounded"):
        ScoreIndex(state, kind=1).top(pod, 3)  # GpuPacking keeps one tree per shape
