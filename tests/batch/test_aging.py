"""Age bonuses in the batch objective: the solver passes an older pod over for a younger one only
when the GPU milli gained exceeds the difference of their bonuses (examples worked out by hand)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudefrag.batch.bonuses import MAX_AGE_BONUS_MILLI, age_bonus_milli, whole_gpu_bonus_milli
from gpudefrag.batch.objective import Objective, evaluate_plan
from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.frag.typical import typical_pods
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.pods import PodSpec, pod_batch

LOADED_MACHINE_S = 60.0
"""The solves stop on their deterministic time; a wall-clock budget this long only guards
against a stuck solve, so a starved test process (a busy machine) decides as a quiet one does."""

OLD_SHARED = PodSpec(2000, 8192, 1, 810, name="old-shared")
YOUNG_WHOLE = PodSpec(2000, 8192, 1, 1000, name="young-whole")


def test_the_bonus_is_the_weighted_wait_floored_and_capped() -> None:
    assert age_bonus_milli(300.0, 1.0) == 300
    assert age_bonus_milli(300.9, 0.5) == 150  # floor(150.45)
    assert age_bonus_milli(-5.0, 2.0) == 0  # a clock skew never makes a penalty
    assert age_bonus_milli(1e12, 2.0) == MAX_AGE_BONUS_MILLI


def test_the_first_term_counts_gpu_milli_and_age_together() -> None:
    more_milli = Objective(gpu_milli=1000, pods=1, frag_milli=0.0)
    older = Objective(gpu_milli=810, pods=1, frag_milli=0.0, age_milli=300)
    assert older.value_milli == 1110
    assert older.better_than(more_milli)
    assert not Objective(810, 1, 0.0, 150).better_than(more_milli)


def one_gpu_node() -> ClusterState:
    return ClusterState(["n0"], [0], [1], [32000], [131072])


@pytest.mark.parametrize(
    ("weight", "placed"),
    [
        (0.0, "young-whole"),  # no ages: 1000 milli beat 810
        (0.5, "young-whole"),  # 810 + 150 = 960 < 1000
        (1.0, "old-shared"),  # 810 + 300 = 1110 > 1000: FGD's queue-order plan stands
    ],
)
def test_an_old_shared_pod_keeps_its_gpu_once_its_wait_outweighs_the_milli(
    weight: float, placed: str
) -> None:
    # One node with one GPU; the batch in queue order: an 810-milli pod that has waited 300 s,
    # then a 1-GPU pod that just arrived.  Only one of them fits.  FGD places in queue order (the
    # old pod); the solver's objective decides whether the younger whole-GPU pod replaces it.
    typical = typical_pods(pod_batch([OLD_SHARED, YOUNG_WHOLE]))
    placer = BatchPlacer(
        typical,
        SolverConfig(time_limit_s=LOADED_MACHINE_S, age_weight_milli_per_s=weight, min_solver_batch=1),
    )
    result = placer.place(one_gpu_node(), [OLD_SHARED, YOUNG_WHOLE], waited_s=[300.0, 0.0])
    assert [p.pod.name for p in result.placements if p is not None] == [placed]
    assert result.stats.source == ("fgd" if placed == "old-shared" else "solver")


def test_a_negative_or_infinite_weight_is_refused() -> None:
    typical = typical_pods(pod_batch([OLD_SHARED]))
    for weight in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="age_weight_milli_per_s"):
            BatchPlacer(typical, SolverConfig(time_limit_s=LOADED_MACHINE_S, age_weight_milli_per_s=weight))


def test_waits_must_match_the_batch() -> None:
    typical = typical_pods(pod_batch([OLD_SHARED]))
    placer = BatchPlacer(typical, SolverConfig(time_limit_s=LOADED_MACHINE_S, age_weight_milli_per_s=1.0))
    with pytest.raises(ValueError, match="2 waits for 1 pods"):
        placer.place(one_gpu_node(), [OLD_SHARED], waited_s=[1.0, 2.0])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_never_worse_than_fgd_with_ages(data, gen, typical_small) -> None:
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=8, max_prior=12))
    pods = data.draw(gen.batches(8))
    waits = data.draw(st.lists(st.floats(0, 5000), min_size=len(pods), max_size=len(pods)))
    above = data.draw(st.sampled_from([0, 500]))  # with and without whole-GPU bonuses
    most = data.draw(st.sampled_from([0, 1]))  # every pod ages, or only pods of <= 1 GPU
    config = SolverConfig(
        time_limit_s=LOADED_MACHINE_S,
        deterministic_time=0.05,
        age_weight_milli_per_s=2.0,
        whole_gpu_above_milli=above,
        age_max_gpus=most,
    )
    placer = BatchPlacer(typical_small, config)
    result = placer.place(state, pods, waited_s=waits)
    fgd = placer.fgd_plan(state, pods)
    ages = placer.pod_bonuses(pods, waits)
    nodes = {p.node for p in fgd if p is not None} | {p.node for p in result.placements if p is not None}

    def objective(plan) -> Objective:
        placed = [p for p in plan if p is not None]
        age = sum(a for a, p in zip(ages, plan) if p is not None)
        return evaluate_plan(state, placed, typical_small, nodes, age_milli=age)

    chosen, reference = objective(result.placements), objective(fgd)
    assert chosen.at_least(reference)
    if result.stats.source == "solver":
        assert chosen.better_than(reference)


# ---------------------------------------------------------------- whole-GPU sharing pods


def test_the_whole_gpu_bonus_tops_large_sharing_pods_up_to_a_gpu() -> None:
    assert whole_gpu_bonus_milli(OLD_SHARED, 700) == 190  # 810 -> counts 1,000
    assert whole_gpu_bonus_milli(PodSpec(2000, 8192, 1, 700), 700) == 0  # not above the line
    assert whole_gpu_bonus_milli(YOUNG_WHOLE, 700) == 0  # a whole GPU already
    assert whole_gpu_bonus_milli(PodSpec(2000, 8192, 2, 1000), 700) == 0
    assert whole_gpu_bonus_milli(PodSpec(2000, 8192, 0, 0), 700) == 0  # CPU-only
    assert whole_gpu_bonus_milli(OLD_SHARED, 0) == 0  # off


@pytest.mark.parametrize(
    ("above", "waited_s", "placed"),
    [
        (0, 10.0, "young-whole"),  # off: 1000 > 810 + 10
        (700, 10.0, "old-shared"),  # 810 + 190 + 10 = 1010 > 1000: queue order stands
        (700, 0.0, "young-whole"),  # a tie on 1000 milli: the full GPU fragments less
        (850, 10.0, "young-whole"),  # 810 is not above 850: no bonus
    ],
)
def test_a_large_sharing_pod_counts_as_a_whole_gpu(above: int, waited_s: float, placed: str) -> None:
    # One node with one GPU; the batch in queue order: an 810-milli pod, then a 1-GPU pod.
    # Aging 1 milli/s, the older pod has waited ``waited_s`` and the younger none.
    typical = typical_pods(pod_batch([OLD_SHARED, YOUNG_WHOLE]))
    config = SolverConfig(
        time_limit_s=LOADED_MACHINE_S,
        age_weight_milli_per_s=1.0,
        whole_gpu_above_milli=above,
        min_solver_batch=1,
    )
    placer = BatchPlacer(typical, config)
    result = placer.place(one_gpu_node(), [OLD_SHARED, YOUNG_WHOLE], waited_s=[waited_s, 0.0])
    assert [p.pod.name for p in result.placements if p is not None] == [placed]


def test_pod_bonuses_add_age_and_whole_gpu_bonuses() -> None:
    typical = typical_pods(pod_batch([OLD_SHARED, YOUNG_WHOLE]))
    placer = BatchPlacer(
        typical,
        SolverConfig(time_limit_s=LOADED_MACHINE_S, age_weight_milli_per_s=1.0, whole_gpu_above_milli=700),
    )
    assert placer.pod_bonuses([OLD_SHARED, YOUNG_WHOLE], [30.0, 5.0]) == [220, 5]
    assert placer.pod_bonuses([OLD_SHARED, YOUNG_WHOLE], []) == [190, 0]  # no waits given
    plain = BatchPlacer(typical, SolverConfig(time_limit_s=LOADED_MACHINE_S))
    assert plain.pod_bonuses([OLD_SHARED, YOUNG_WHOLE], [30.0, 5.0]) == []


@pytest.mark.parametrize("above", [-1, 1000, 5000])
def test_a_whole_gpu_line_outside_a_gpu_is_refused(above: int) -> None:
    typical = typical_pods(pod_batch([OLD_SHARED]))
    with pytest.raises(ValueError, match="whole_gpu_above_milli"):
        BatchPlacer(typical, SolverConfig(time_limit_s=LOADED_MACHINE_S, whole_gpu_above_milli=above))


# ---------------------------------------------------------------- no age bonus for multi-GPU pods

OLD_PAIR = PodSpec(4000, 16384, 2, 1000, name="old-pair")
YOUNG_ONE_A = PodSpec(2000, 8192, 1, 1000, name="young-a")
YOUNG_ONE_B = PodSpec(2000, 8192, 1, 1000, name="young-b")


def two_gpu_node() -> ClusterState:
    return ClusterState(["n0"], [0], [2], [32000], [131072])


@pytest.mark.parametrize(
    ("most", "placed"),
    [
        # every pod ages: 2000 + 3000 for the old pair beats 2000 + 10 + 10 for the two young pods
        (0, ["old-pair"]),
        # only pods of <= 1 GPU age: 2000 + 0 against 2000 + 20, so the young pods take the GPUs
        (1, ["young-a", "young-b"]),
        # pods of <= 2 GPUs age: as with 0
        (2, ["old-pair"]),
    ],
)
def test_age_max_gpus_keeps_the_age_bonus_to_small_pods(most: int, placed: list[str]) -> None:
    # One node with two free GPUs; the batch in queue order: a 2-GPU pod that has waited 3,000 s,
    # then two 1-GPU pods that have waited 10 s.  Either the pair or the two single pods fit.
    # FGD places in queue order (the pair); the solver replaces it only when its objective says so.
    pods = [OLD_PAIR, YOUNG_ONE_A, YOUNG_ONE_B]
    typical = typical_pods(pod_batch(pods))
    config = SolverConfig(
        time_limit_s=LOADED_MACHINE_S, age_weight_milli_per_s=1.0, age_max_gpus=most, min_solver_batch=1
    )
    placer = BatchPlacer(typical, config)
    assert placer.age_bonuses(pods, [3000.0, 10.0, 10.0]) == ([3000, 10, 10] if most != 1 else [0, 10, 10])
    result = placer.place(two_gpu_node(), pods, waited_s=[3000.0, 10.0, 10.0])
    assert [p.pod.name for p in result.placements if p is not None] == placed
    assert result.stats.source == ("fgd" if placed == ["old-pair"] else "solver")


def test_a_negative_age_max_gpus_is_refused() -> None:
    typical = typical_pods(pod_batch([OLD_PAIR]))
    with pytest.raises(ValueError, match="age_max_gpus"):
        BatchPlacer(
            typical, SolverConfig(time_limit_s=LOADED_MACHINE_S, age_weight_milli_per_s=1.0, age_max_gpus=-1)
        )
