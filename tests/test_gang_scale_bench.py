"""The gang latency bench on a small cluster: a seeded, filled occupancy and valid gangs.

Behaviour only (no timings): the same seed gives the same occupancy, the fill lands where the
rule puts it, and every gang the bench places binds and respects its required level.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_mirror
from gpudefrag.experiments.bench.gang_scale import (
    SHARING_SHARE,
    bench_gangs,
    gang_cluster,
    required_level,
)
from gpudefrag.gangs.topo_search import all_in_one_domain
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.model.topology import nvl72, superpod

GPUS = 2048
BIGGEST_ITP_JOB = 64  # GPUs: the largest job of ITP cluster04


@needs_mirror
@pytest.mark.parametrize("preset", ["superpod", "nvl72"])
def test_same_seed_same_occupancy(preset: str) -> None:
    a = gang_cluster(GPUS, preset, seed=5)
    b = gang_cluster(GPUS, preset, seed=5)
    c = gang_cluster(GPUS, preset, seed=6)
    assert np.array_equal(a.gpu_milli_left, b.gpu_milli_left) and a.placements == b.placements
    assert not np.array_equal(a.gpu_milli_left, c.gpu_milli_left)


@needs_mirror
@pytest.mark.parametrize("preset", ["superpod", "nvl72"])
@pytest.mark.parametrize("sigma", [0.0, 1.0])
def test_fill_lands_near_the_target(preset: str, sigma: float) -> None:
    state = gang_cluster(GPUS, preset, seed=3, fill=0.6, domain_sigma=sigma)
    total = state.topology.total_gpus
    assert total == GPUS
    used = state.used_gpus()
    # the fill stops at the first sharing pod that reaches 60 % (half a GPU at most beyond)
    assert 0.6 * total <= used <= 0.6 * total + 0.5
    shared = sum(j.gpu_milli for j in state.jobs.values() if j.is_sharing) / GPU_MILLI_PER_GPU
    whole = used - shared
    # the ITP jobs stop at the first that reaches 80 % of the fill (one job, <= 64 GPUs, beyond)
    itp_target = (1 - SHARING_SHARE) * 0.6 * total
    assert itp_target <= whole < itp_target + BIGGEST_ITP_JOB
    assert state.kept_counts().equals(state.domain_counts())


def test_required_level_is_the_lowest_that_holds_the_gang() -> None:
    # superpod: leaves of 32 x 8 = 256 GPUs; nvl72: NVLink domains of 18 x 4 = 72, groups of
    # 8 domains = 576 GPUs; both with 2,048 GPUs in all
    sp, nv = superpod(256), nvl72(512)
    assert [required_level(sp, g) for g in (8, 64, 256, 257, 2048, 2049)] == [
        "leaf", "leaf", "leaf", "spine", "spine", None,
    ]  # fmt: skip
    assert [required_level(nv, g) for g in (64, 72, 73, 512, 576, 577, 2049)] == [
        "nvlink", "nvlink", "group", "group", "group", "spine", None,
    ]  # fmt: skip


@needs_mirror
@pytest.mark.parametrize(
    ("preset", "levels"),
    [
        ("superpod", {16: "leaf", 64: "leaf", 512: "spine", 1024: "spine", 8192: "none"}),
        ("nvl72", {16: "nvlink", 64: "nvlink", 512: "group", 1024: "spine", 8192: "none"}),
    ],
)
def test_every_bench_gang_binds_inside_its_required_domain(preset: str, levels: dict[int, str]) -> None:
    decisions = 5
    res = bench_gangs(GPUS, preset, seed=9, decisions=decisions, sizes=tuple(levels))
    assert res.level == levels
    assert res.gpus == GPUS and res.build_s >= 0
    assert res.no_room[8192] == decisions  # more GPUs than the cluster has
    fresh = gang_cluster(GPUS, preset, seed=9)
    gpn = fresh.topology.max_gpus_per_node
    whole = (fresh.free_gpus == gpn).astype(np.float64)
    for size, found in res.placed.items():
        assert res.latency_ms[size].shape == (decisions,) and len(found) == decisions
        assert sum(1 for nodes in found if not nodes) == res.no_room[size]
        # every size starts from the filled cluster: the first decision finds room exactly
        # when some domain of its level has size / gpn wholly free nodes
        level = None if levels[size] == "none" else fresh.topology.level_index(levels[size])
        dom = (
            np.zeros(fresh.topology.num_nodes, dtype=np.int64)
            if level is None
            else fresh.topology.domains(level)
        )
        assert bool(found[0]) == (np.bincount(dom, weights=whole).max() >= size // gpn)
        for i, nodes in enumerate(found):
            if not nodes:
                continue
            assert len(nodes) == len(set(nodes)) == size // gpn
            if level is not None:
                assert all_in_one_domain(fresh.topology, level, list(nodes))
            fresh.copy().bind_job(Job(-1 - i, 0.0, 1.0, size), list(nodes))  # raises unless it fits
    assert any(res.placed[16]), "the test needs some gangs placed"


@needs_mirror
def test_leaf_nodes_sets_the_leaf_groups_and_so_the_required_level() -> None:
    # 2,048 GPUs = 256 nodes; leaves of 128 nodes hold 1,024 GPUs, so a 1,024-GPU gang is
    # required inside one leaf instead of the spine
    res = bench_gangs(GPUS, "superpod", seed=9, decisions=2, sizes=(1024,), leaf_nodes=128)
    assert res.level == {1024: "leaf"}
    assert res.levels == "leaf of 128 nodes, spine of 256 nodes"
    with pytest.raises(ValueError, match="superpod"):
        gang_cluster(GPUS, "nvl72", seed=9, leaf_nodes=18)
