"""The large fragmented cluster of ``gpudefrag bench --gpus``: deterministic, filled, valid."""

from __future__ import annotations

import numpy as np

from gpudefrag.experiments.inputs import workload_inputs
from gpudefrag.experiments.scale_bench import SHAPES, bench_scale, large_cluster


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
