"""Property tests of ClusterState (bind/unbind/copy) and of the version-keyed FGD cache."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudefrag.frag.tracker import FragTracker
from gpudefrag.model.cluster import Placement, PlacementError, affinity_tag
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_GPUS_PER_NODE, MAX_PODS_PER_NODE
from gpudefrag.model.gpu_models import mask_accepts
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.fgd import FgdPolicy
from gpudefrag.policies.registry import POLICY_NAMES, make_policy

PROPS = settings(max_examples=40, deadline=None)


def _image(state):
    return state.snapshot(), state.version.tobytes()


def _assert_within_capacity(state):
    assert (state.cpu_milli_left >= 0).all()
    assert (state.cpu_milli_left <= state.cpu_capacity_milli).all()
    assert (state.memory_mib_left >= 0).all()
    assert (state.memory_mib_left <= state.memory_capacity_mib).all()
    slots = np.arange(MAX_GPUS_PER_NODE)[None, :] < state.gpu_count[:, None]
    assert (state.gpu_milli_left[slots] >= 0).all()
    assert (state.gpu_milli_left[slots] <= GPU_MILLI_PER_GPU).all()
    assert (state.gpu_milli_left[~slots] == 0).all(), "GPU slots beyond gpu_count must stay 0"
    assert ((state.pod_count >= 0) & (state.pod_count <= MAX_PODS_PER_NODE)).all()
    assert (state.affinity >= 0).all()
    used = int((state.gpu_count * GPU_MILLI_PER_GPU).sum() - state.gpu_milli_left.sum())
    assert state.used_gpu_milli == used


def _random_placement(data, gen, state, pod):
    options = [(n, g) for n in range(state.num_nodes) for g in gen.fitting_placements(state, pod, n)]
    if not options:
        return None
    node, gpus = data.draw(st.sampled_from(options))
    return Placement(node, gpus, pod)


@PROPS
@given(data=st.data())
def test_capacity_never_exceeded_under_any_policy(gen, typical_small, data):
    state = data.draw(gen.clusters(max_prior=5))
    start_cpu = state.cpu_milli_left.copy()
    names = data.draw(st.lists(st.sampled_from(POLICY_NAMES), min_size=1, max_size=3))
    policies = {n: make_policy(n, typical_small, data.draw(st.integers(0, 100))) for n in names}
    bound_cpu = np.zeros(state.num_nodes, dtype=np.int64)
    bound_pods = state.pod_count.copy()
    for pod in data.draw(st.lists(gen.pods(), min_size=1, max_size=40)):
        placement = policies[data.draw(st.sampled_from(names))].select(state, pod)
        if placement is None:
            continue
        state.bind(placement)
        bound_cpu[placement.node] += pod.cpu_milli
        bound_pods[placement.node] += 1
        _assert_within_capacity(state)
    assert (start_cpu - state.cpu_milli_left == bound_cpu).all()
    assert (state.pod_count == bound_pods).all()


@PROPS
@given(data=st.data())
def test_bind_then_unbind_restores_snapshot(gen, data):
    state = data.draw(gen.clusters())
    before = state.snapshot()
    placements = []
    for pod in data.draw(st.lists(gen.pods(), min_size=1, max_size=8)):
        placement = _random_placement(data, gen, state, pod)
        if placement is None:
            continue
        one_before = state.snapshot()
        state.bind(placement)
        assert state.snapshot() != one_before
        placements.append(placement)
    # Unbind in an arbitrary order: bind/unbind commute, so any order restores the start.
    for placement in data.draw(st.permutations(placements)):
        state.unbind(placement)
    assert state.snapshot() == before


@PROPS
@given(data=st.data())
def test_single_bind_unbind_is_exact_inverse(gen, data):
    state = data.draw(gen.clusters())
    pod = data.draw(gen.pods())
    placement = _random_placement(data, gen, state, pod)
    if placement is None:
        return
    before, version = state.snapshot(), state.version.copy()
    cpu, mem, aff = state.cpu_milli_left.copy(), state.memory_mib_left.copy(), state.affinity.copy()
    left, used = state.gpu_milli_left.copy(), state.used_gpu_milli
    state.bind(placement)
    n = placement.node
    assert state.cpu_milli_left[n] == cpu[n] - pod.cpu_milli
    assert state.memory_mib_left[n] == mem[n] - pod.memory_mib
    for g in placement.gpus:
        assert state.gpu_milli_left[n, g] == left[n, g] - pod.gpu_milli
    assert state.used_gpu_milli == used + pod.total_gpu_milli
    tag = affinity_tag(pod)
    expected_aff = aff.copy()
    if tag >= 0:  # GpuClustering counts GPU pods only
        expected_aff[n, tag] += 1
    assert state.affinity.tolist() == expected_aff.tolist()
    state.unbind(placement)
    assert state.snapshot() == before
    # Only the touched node got a new version; the new version is fresh (never seen before).
    changed = np.flatnonzero(state.version != version)
    assert changed.tolist() == [n]
    assert state.version[n] > version.max()


def _oracle_why_not(state, node, pod, gpus) -> bool:
    """True when the placement is infeasible, from first principles (spec §3.2)."""
    if not 0 <= node < state.num_nodes:
        return True
    if state.cpu_milli_left[node] < pod.cpu_milli or state.memory_mib_left[node] < pod.memory_mib:
        return True
    if state.pod_count[node] + 1 > MAX_PODS_PER_NODE:
        return True
    if len(gpus) != (pod.num_gpu if pod.gpu_milli > 0 else 0) or len(set(gpus)) != len(gpus):
        return True
    if pod.gpu_milli > 0 and not mask_accepts(pod.gpu_model_mask, int(state.model_id[node])):
        return True
    return any(
        not 0 <= g < state.gpu_count[node] or state.gpu_milli_left[node, g] < pod.gpu_milli for g in gpus
    )


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_bind_of_infeasible_placement_raises_and_leaves_state_unchanged(gen, data):
    state = data.draw(gen.clusters())
    pod = data.draw(gen.pods())
    node = data.draw(st.integers(-1, state.num_nodes))
    gpus = tuple(data.draw(st.lists(st.integers(-1, MAX_GPUS_PER_NODE), max_size=3)))
    before = _image(state)
    infeasible = _oracle_why_not(state, node, pod, gpus)
    if infeasible:
        with pytest.raises(PlacementError):
            state.bind(Placement(node, gpus, pod))
        assert _image(state) == before
    else:
        state.bind(Placement(node, gpus, pod))
        _assert_within_capacity(state)


@pytest.mark.parametrize(
    "case",
    ["cpu", "memory", "gpu_count", "gpu_range", "repeat", "gpu_short", "model", "node_range", "pod_limit"],
)
def test_each_infeasibility_reason_raises(gen, case):
    state = gen.build_cluster([("V100M16", 4, 32000, 131072), ("", 0, 64000, 262144)])
    state.bind(Placement(0, (1,), PodSpec(1000, 0, 1, 700)))
    pods = {
        "cpu": Placement(0, (0,), PodSpec(32000, 0, 1, 500)),
        "memory": Placement(0, (0,), PodSpec(1000, 131073, 1, 500)),
        "gpu_count": Placement(0, (0,), PodSpec(1000, 0, 2, 1000)),
        "gpu_range": Placement(0, (4,), PodSpec(1000, 0, 1, 500)),
        "repeat": Placement(0, (0, 0), PodSpec(1000, 0, 2, 1000)),
        "gpu_short": Placement(0, (1,), PodSpec(1000, 0, 1, 301)),
        "model": Placement(0, (0,), PodSpec(1000, 0, 1, 500, 1 << 1)),  # G2 only
        "node_range": Placement(2, (), PodSpec(1000, 0)),
        "pod_limit": Placement(1, (), PodSpec(0, 0)),
    }
    if case == "pod_limit":
        for _ in range(MAX_PODS_PER_NODE):
            state.bind(Placement(1, (), PodSpec(0, 0)))
    before = _image(state)
    with pytest.raises(PlacementError):
        state.bind(pods[case])
    assert _image(state) == before


@PROPS
@given(data=st.data())
def test_copy_is_independent(gen, data):
    original = data.draw(gen.clusters())
    twin = original.copy()
    assert twin.snapshot() == original.snapshot()
    before = _image(original)
    for pod in data.draw(st.lists(gen.pods(), min_size=1, max_size=6)):
        placement = _random_placement(data, gen, twin, pod)
        if placement is not None:
            twin.bind(placement)
    assert _image(original) == before
    # ...and the other way round.
    twin_image = _image(twin)
    for pod in data.draw(st.lists(gen.pods(), min_size=1, max_size=6)):
        placement = _random_placement(data, gen, original, pod)
        if placement is not None:
            original.bind(placement)
    assert _image(twin) == twin_image


# ----------------------------------------------------------------------------- FGD cache
WARM_SHAPES = [PodSpec(1000 * (i + 1), 0, 1, 50 * (i + 1)) for i in range(18)]  # > 16 shape keys


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_fgd_cache_correct_across_copies(gen, typical_small, data):
    cached = FgdPolicy(typical_small)
    states = [data.draw(gen.clusters(max_prior=10))]
    bound: list[list[Placement]] = [[]]
    for shape in WARM_SHAPES:  # grows the per-shape cache beyond its initial width
        cached.score_nodes(states[0], shape)
    for _ in range(data.draw(st.integers(1, 12))):
        op = data.draw(st.sampled_from(("bind", "bind", "unbind", "copy", "select_bind")))
        i = data.draw(st.integers(0, len(states) - 1))
        state = states[i]
        if op == "copy":
            states.append(state.copy())
            bound.append(list(bound[i]))
        elif op == "unbind" and bound[i]:
            state.unbind(bound[i].pop(data.draw(st.integers(0, len(bound[i]) - 1))))
        elif op == "select_bind":
            pod = data.draw(gen.pods())
            placement = cached.select(state, pod)
            if placement is not None:
                state.bind(placement)
                bound[i].append(placement)
        else:
            placement = _random_placement(data, gen, state, data.draw(gen.pods()))
            if placement is not None:
                state.bind(placement)
                bound[i].append(placement)
        pods = data.draw(st.lists(gen.pods(), min_size=1, max_size=3)) + [
            data.draw(st.sampled_from(WARM_SHAPES))
        ]
        for s in states:
            for pod in pods:
                fresh = FgdPolicy(typical_small)
                got_scores, got_gpus = cached.score_nodes_and_gpus(s, pod)
                want_scores, want_gpus = fresh.score_nodes_and_gpus(s, pod)
                assert got_scores.tolist() == want_scores.tolist()
                assert got_gpus.tolist() == want_gpus.tolist()
                assert cached.select(s, pod) == FgdPolicy(typical_small).select(s, pod)
            assert cached.node_frag_milli(s).tolist() == FgdPolicy(typical_small).node_frag_milli(s).tolist()


def test_fgd_cache_not_confused_by_same_sized_clusters(gen, typical_small):
    # Two clusters with the same number of nodes but different contents, scored alternately.
    a = gen.build_cluster([("G2", 8, 96000, 1 << 20), ("T4", 2, 104000, 1 << 20)])
    b = gen.build_cluster([("T4", 2, 104000, 1 << 20), ("G2", 8, 96000, 1 << 20)])
    b.bind(Placement(1, (0,), PodSpec(80000, 0, 1, 1000)))
    pod = PodSpec(3152, 0, 1, 810)
    cached = FgdPolicy(typical_small)
    for _ in range(2):
        for s in (a, b):
            assert (
                cached.score_nodes(s, pod).tolist() == FgdPolicy(typical_small).score_nodes(s, pod).tolist()
            )


@PROPS
@given(data=st.data())
def test_frag_tracker_running_total_matches_recomputation(gen, typical_small, data):
    state = data.draw(gen.clusters(max_prior=5))
    tracker = FragTracker(typical_small, state)
    for pod in data.draw(st.lists(gen.pods(), min_size=1, max_size=15)):
        placement = _random_placement(data, gen, state, pod)
        if placement is None:
            continue
        state.bind(placement)
        total = tracker.update(state, placement.node)
        fresh = FragTracker(typical_small, state)
        assert total == pytest.approx(fresh.total_milli, rel=1e-12, abs=1e-9)
        assert tracker.frag_milli.tolist() == fresh.frag_milli.tolist()
