"""The large fragmented cluster of ``gpudefrag bench --gpus``: deterministic, filled, valid."""

from __future__ import annotations

import numpy as np

from gpudefrag.experiments.bench.scale import SHAPES, bench_scale, large_cluster
from gpudefrag.experiments.bench.scale_sweep import GANG_MODE, growth_ratio, sweep, write_chart, write_csv
from gpudefrag.experiments.common.inputs import workload_inputs
from gpudefrag.model.jobs import Job
from gpudefrag.policies.registry import make_policy


def test_same_seed_same_cluster_filled_and_fragmented(mirror):
    pods = workload_inputs().pods
    a = large_cluster(2000, "superpod", pods, seed=7)
    b = large_cluster(2000, "superpod", pods, seed=7)
    c = large_cluster(2000, "superpod", pods, seed=8)
    assert a.snapshot() == b.snapshot() and a.snapshot() != c.snapshot()
    assert a.num_nodes == 250 and a.gpu_capacity_milli == 2000 * 1000
    assert 0.6 <= a.used_gpu_milli / a.gpu_capacity_milli < 0.62
    # fragmented: many nodes partly used, not a packed prefix of full nodes and empty ones
    used = 8000 - a.gpu_milli_left.sum(axis=1)
    assert ((used > 0) & (used < 8000)).sum() > 100
    assert (a.gpu_milli_left >= 0).all() and (a.cpu_milli_left >= 0).all()
    nvl = large_cluster(2000, "nvl72", pods, seed=7)
    assert nvl.num_nodes == 500 and int(nvl.gpu_count.max()) == 4


def test_bench_times_every_shape(mirror):
    inputs = workload_inputs()
    r = bench_scale(1000, "superpod", inputs.pods, inputs.typical, "fgd", decisions=5)
    assert set(r.latency_ms) == set(SHAPES) and all(
        v.shape == (5,) and np.all(v >= 0) for v in r.latency_ms.values()
    )


def _itp_like() -> list[Job]:
    """A hand-made job mix: 8-GPU and 32-GPU jobs with all GPU time, a few 1-GPU ones."""
    return [Job(i, 0.0, 3600.0, g) for i, g in enumerate([8] * 6 + [32] * 3 + [1] * 4)]


def test_itp_jobs_fill_whole_nodes_and_openb_the_rest(mirror):
    pods = workload_inputs().pods
    a = large_cluster(4096, "superpod", pods, seed=3, itp_jobs=_itp_like())
    b = large_cluster(4096, "superpod", pods, seed=3, itp_jobs=_itp_like())
    assert a.snapshot() == b.snapshot()
    assert 0.6 <= a.used_gpu_milli / a.gpu_capacity_milli < 0.62
    full = int((a.gpu_milli_left.sum(axis=1) == 0).sum())
    # 80 % of 60 % of 512 nodes comes from whole-node ITP pods: about 245 full nodes
    assert 200 <= full <= 300
    # the openb share leaves partly used nodes
    used = 8000 - a.gpu_milli_left.sum(axis=1)
    assert ((used > 0) & (used < 8000)).sum() > 20


def test_indexed_and_scanned_benches_make_the_same_decisions(mirror):
    inputs = workload_inputs()
    a = large_cluster(2000, "superpod", inputs.pods, seed=5)
    b = a.copy()
    indexed = make_policy("fgd", inputs.typical)
    indexed.attach(a)
    scanned = make_policy("fgd", inputs.typical)
    for spec in list(SHAPES.values()) * 20:
        pa, pb = indexed.select(a, spec), scanned.select(b, spec)
        assert (pa is None) == (pb is None)
        if pa is not None and pb is not None:
            assert (pa.node, pa.gpus) == (pb.node, pb.gpus)
            a.bind(pa)
            b.bind(pb)
    assert a.snapshot() == b.snapshot()


def test_sweep_writes_rows_csv_chart_and_growth(mirror, tmp_path):
    inputs = workload_inputs()
    sizes = [1000, 10000, 20000]
    rows = sweep(sizes, "superpod", inputs.pods, inputs.typical, ["bestfit"], ["index", "scan"], 3, 42, None)
    assert len(rows) == len(sizes) * 2 * len(SHAPES)
    assert {r.gpus for r in rows} == set(sizes) and {r.mode for r in rows} == {"index", "scan"}
    growth = growth_ratio(rows, "bestfit", "index")
    assert growth is not None and growth[:2] == (10000, 20000) and growth[2] > 0
    assert growth_ratio(rows[: 2 * len(SHAPES)], "bestfit", "index") is None  # one size only
    csv_path = write_csv(rows, tmp_path / "s.csv")
    assert csv_path.read_text().count("\n") == 1 + len(rows)
    png = write_chart(rows, tmp_path / "s.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_sweep_with_gangs_adds_rows_per_fitting_gang_size(mirror, tmp_path):
    inputs = workload_inputs()
    sizes = [1024, 4096]
    rows = sweep(
        sizes, "superpod", inputs.pods, inputs.typical, ["bestfit"], ["index"], 2, 42, None,
        gang_sizes=(64, 512, 1024), gang_decisions=3,
    )  # fmt: skip
    gang = [r for r in rows if r.mode == GANG_MODE]
    # gangs up to half the cluster: 64 and 512 at 1,024 GPUs; all three at 4,096
    assert [(r.gpus, r.shape) for r in gang] == [
        (1024, "64 GPUs"), (1024, "512 GPUs"), (4096, "64 GPUs"), (4096, "512 GPUs"), (4096, "1024 GPUs"),
    ]  # fmt: skip
    assert all(r.latency_ms.shape == (3,) for r in gang)
    assert growth_ratio(rows, "ours", GANG_MODE) is None  # gang rows stay out of the pooled pod lines
    assert write_chart(rows, tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
