"""One conformance suite for every registered placement policy (scikit-learn ``check_*`` style).

Each ``check_*`` function states one property of the ``Policy`` contract (policies/base.py) and
takes ``(name, make, state, pods)``: the policy name, a zero-argument factory of fresh instances
(same seed each time), a random small cluster and a list of pods with one pod of every shape.
``_yield_checks`` lists the checks that apply to a policy; the test below runs each
(policy, check) pair on hypothesis-generated clusters of 1-12 nodes (0/1/2/4/8 GPUs, mixed
models, partly filled by random earlier binds).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudefrag.errors import ConfigError
from gpudefrag.model.constants import ANY_GPU_MODEL, GPU_MILLI_PER_GPU
from gpudefrag.model.fit import feasible_mask
from gpudefrag.model.gpu_models import gpu_model_mask, mask_accepts
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.base import Policy
from gpudefrag.policies.registry import POLICY_NAMES, make_policy

SEED = 7
SCORE_BASED = tuple(n for n in POLICY_NAMES if n != "random")
BEST_GPU_CHOICE = ("bestfit", "gpupacking", "gpuclustering", "dotprod")

CPU = st.sampled_from((1000, 2000, 3152, 4000, 8000, 12500, 16000, 32000, 96000))
MEM = st.sampled_from((0, 1024, 16384, 200000))
CONSTRAINT = st.sampled_from(("V100M32", "V100M16|V100M32", "G2", "T4|P100", "A10|G3", "P100"))


@st.composite
def one_pod_per_shape(draw):
    """CPU-only, sharing, one whole GPU, 2/4/8 whole GPUs, and a model-constrained pod."""
    share_milli = st.integers(1, GPU_MILLI_PER_GPU - 1)
    constrained_kind = draw(st.sampled_from(("share", "whole", "multi")))
    mask = gpu_model_mask(draw(CONSTRAINT))
    if constrained_kind == "share":
        constrained = PodSpec(draw(CPU), draw(MEM), 1, draw(share_milli), mask, "constrained")
    elif constrained_kind == "whole":
        constrained = PodSpec(draw(CPU), draw(MEM), 1, GPU_MILLI_PER_GPU, mask, "constrained")
    else:
        constrained = PodSpec(
            draw(CPU), draw(MEM), draw(st.sampled_from((2, 4))), GPU_MILLI_PER_GPU, mask, "constrained"
        )
    pods = [
        PodSpec(draw(CPU), draw(MEM), 0, 0, ANY_GPU_MODEL, "cpu-only"),
        PodSpec(draw(CPU), draw(MEM), 1, draw(share_milli), ANY_GPU_MODEL, "share"),
        PodSpec(draw(CPU), draw(MEM), 1, GPU_MILLI_PER_GPU, ANY_GPU_MODEL, "whole"),
        PodSpec(draw(CPU), draw(MEM), 2, GPU_MILLI_PER_GPU, ANY_GPU_MODEL, "multi-2"),
        PodSpec(draw(CPU), draw(MEM), 4, GPU_MILLI_PER_GPU, ANY_GPU_MODEL, "multi-4"),
        PodSpec(draw(CPU), draw(MEM), 8, GPU_MILLI_PER_GPU, ANY_GPU_MODEL, "multi-8"),
        constrained,
    ]
    return draw(st.permutations(pods))


def _mask(state, pod) -> np.ndarray:
    return feasible_mask(
        state.cpu_milli_left,
        state.memory_mib_left,
        state.gpu_milli_left,
        state.gpu_count,
        state.model_id,
        state.pod_count,
        pod.cpu_milli,
        pod.memory_mib,
        pod.num_gpu,
        pod.gpu_milli,
        pod.gpu_model_mask,
    )


def _oracle_feasible(state, pod) -> np.ndarray:
    """Feasibility from first principles (spec §3.2), not from the compiled filter."""
    out = np.zeros(state.num_nodes, dtype=bool)
    for n in range(state.num_nodes):
        if (
            state.cpu_milli_left[n] < pod.cpu_milli
            or state.memory_mib_left[n] < pod.memory_mib
            or state.pod_count[n] + 1 > 1001
        ):
            continue
        if pod.gpu_milli <= 0:
            out[n] = True
            continue
        count = int(state.gpu_count[n])
        if count == 0 or not mask_accepts(pod.gpu_model_mask, int(state.model_id[n])):
            continue
        out[n] = sum(int(state.gpu_milli_left[n, g]) >= pod.gpu_milli for g in range(count)) >= pod.num_gpu
    return out


def _image(state) -> tuple:
    return state.snapshot(), state.version.tobytes(), state.used_gpu_milli


# ------------------------------------------------------------------------------------------ checks
def check_placement_feasible_or_none(name, make, state, pods):
    """select returns a feasible placement, or None exactly when no node is feasible."""
    policy = make()
    for pod in pods:
        mask = _mask(state, pod)
        assert mask.tolist() == _oracle_feasible(state, pod).tolist(), pod
        placement = policy.select(state, pod)
        if placement is None:
            assert not mask.any(), f"{name} returned None for {pod} but nodes {np.flatnonzero(mask)} fit"
            continue
        node = placement.node
        assert placement.pod == pod
        assert mask[node], f"{name} chose infeasible node {node} for {pod}"
        assert state.why_not_fits(node, pod, placement.gpus) is None
        assert all(0 <= g < state.gpu_count[node] for g in placement.gpus)
        assert len(placement.gpus) == (pod.num_gpu if pod.gpu_milli > 0 else 0)
        if pod.gpu_milli > 0:
            assert mask_accepts(pod.gpu_model_mask, int(state.model_id[node]))


def check_select_does_not_mutate(name, make, state, pods):
    """select and score_nodes leave the state's contents and versions untouched."""
    policy = make()
    before = _image(state)
    for pod in pods:
        policy.select(state, pod)
        assert _image(state) == before, f"{name}.select mutated the state for {pod}"
        policy.score_nodes(state, pod)
        assert _image(state) == before, f"{name}.score_nodes mutated the state for {pod}"


def check_deterministic(name, make, state, pods):
    """Two fresh instances with the same seed make the same decisions over a pod sequence."""
    sequences = []
    for _ in range(2):
        policy, work = make(), state.copy()
        seq = []
        for pod in pods + pods:
            placement = policy.select(work, pod)
            seq.append(None if placement is None else (placement.node, placement.gpus))
            if placement is not None:
                work.bind(placement)
        sequences.append(seq)
    assert sequences[0] == sequences[1]


def check_argmax_lowest_tie_rank(name, make, state, pods):
    """The chosen node has the maximum score_nodes score; among maxima, the lowest tie_rank."""
    policy = make()
    for pod in pods:
        scores = np.asarray(policy.score_nodes(state, pod))
        mask = _mask(state, pod)
        assert scores.shape == (state.num_nodes,)
        assert (scores[~mask] == -1).all() and (scores[mask] >= 0).all()
        placement = policy.select(state, pod)
        if not mask.any():
            assert placement is None
            continue
        best = scores.max()
        tied = np.flatnonzero(scores == best)
        expected = int(tied[np.argmin(state.tie_rank[tied])])
        assert placement is not None and placement.node == expected, (
            f"{name}: chose {placement and placement.node}, scores {scores.tolist()}, "
            f"ranks {state.tie_rank.tolist()}"
        )
        # A fresh instance scores the same (no hidden state leaks into scores).
        assert np.array_equal(make().score_nodes(state, pod), scores)


def check_random_scores_are_feasibility(name, make, state, pods):
    """Random scores every feasible node 0 and every other node -1."""
    policy = make()
    for pod in pods:
        assert (
            np.asarray(policy.score_nodes(state, pod)).tolist() == np.where(_mask(state, pod), 0, -1).tolist()
        )


def check_exclusive_lowest_free_gpus(name, make, state, pods):
    """Whole-GPU pods take the lowest-index fully free GPUs of the chosen node."""
    policy = make()
    for pod in pods:
        if pod.gpu_milli != GPU_MILLI_PER_GPU:
            continue
        placement = policy.select(state, pod)
        if placement is None:
            continue
        row = state.gpu_milli_left[placement.node]
        free = [g for g in range(int(state.gpu_count[placement.node])) if row[g] == GPU_MILLI_PER_GPU]
        assert placement.gpus == tuple(free[: pod.num_gpu])


def check_sharing_tightest_gpu(name, make, state, pods):
    """Sharing pods under the 'best' GPU choice take the smallest left >= milli, lowest index on ties."""
    policy = make()
    for pod in pods:
        if not pod.is_sharing:
            continue
        placement = policy.select(state, pod)
        if placement is None:
            continue
        row = state.gpu_milli_left[placement.node].tolist()[: int(state.gpu_count[placement.node])]
        fitting = [(left, g) for g, left in enumerate(row) if left >= pod.gpu_milli]
        assert placement.gpus == (min(fitting)[1],)


def _yield_checks(name):
    yield check_placement_feasible_or_none
    yield check_select_does_not_mutate
    yield check_deterministic
    yield check_exclusive_lowest_free_gpus
    if name in SCORE_BASED:
        yield check_argmax_lowest_tie_rank
    else:
        yield check_random_scores_are_feasibility
    if name in BEST_GPU_CHOICE:
        yield check_sharing_tightest_gpu


CASES = [(name, check) for name in POLICY_NAMES for check in _yield_checks(name)]


@pytest.mark.parametrize("name,check", CASES, ids=[f"{n}-{c.__name__}" for n, c in CASES])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_policy_conformance(name, check, gen, typical_small, data):
    state = data.draw(gen.clusters(), label="state")
    pods = data.draw(one_pod_per_shape(), label="pods")
    check(name, lambda: make_policy(name, typical_small, SEED), state, pods)


# ------------------------------------------------------------------------------ fixed-case checks
@pytest.mark.parametrize("name", POLICY_NAMES)
def test_none_when_nothing_fits(name, gen, typical_small):
    state = gen.build_cluster(
        [("V100M16", 4, 32000, 131072), ("T4", 2, 104000, 524288), ("", 0, 64000, 262144)]
    )
    policy = make_policy(name, typical_small, SEED)
    assert policy.select(state, PodSpec(1000, 0, 8, 1000)) is None  # no 8-GPU node
    assert policy.select(state, PodSpec(1000, 0, 1, 500, gpu_model_mask("G2"))) is None  # no G2
    assert policy.select(state, PodSpec(200000, 0)) is None  # CPU too large
    assert policy.select(state, PodSpec(1000, 600000)) is None  # memory too large
    # ...and the CPU-only pod fits the GPU-less node.
    placement = policy.select(state, PodSpec(60000, 200000))
    assert placement is not None and placement.gpus == ()


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_sharing_pod_may_open_idle_gpu_and_gpuless_node_rejects_gpu_pods(name, gen, typical_small):
    state = gen.build_cluster([("", 0, 128000, 1 << 20), ("P100", 1, 8000, 61440)])
    policy = make_policy(name, typical_small, SEED)
    pod = PodSpec(1000, 0, 1, 300)
    assert policy.select(state, pod).node == 1
    assert policy.score_nodes(state, pod)[0] == -1


def test_registry_names_and_instances(typical_small):
    assert POLICY_NAMES == ("random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")
    for name in POLICY_NAMES:
        policy = make_policy(name, typical_small, 1)
        assert isinstance(policy, Policy) and policy.name == name


def test_registry_unknown_policy_lists_known_names(typical_small):
    with pytest.raises(ConfigError) as info:
        make_policy("tetris", typical_small, 0)
    message = str(info.value)
    assert "tetris" in message
    for name in POLICY_NAMES:
        assert name in message
