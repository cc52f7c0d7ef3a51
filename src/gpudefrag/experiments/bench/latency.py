"""Placement-decision latency: time every ``select`` call of one FGD-protocol run."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gpudefrag.experiments.common.inputs import DEFAULT_WORKLOAD, cluster_from_nodes, workload_inputs
from gpudefrag.policies.registry import make_policy
from gpudefrag.workloads.fgd_protocol import DEFAULT_TUNE_RATIO, prepare_run


@dataclass(frozen=True)
class BenchResult:
    policy: str
    pods: int
    nodes: int
    decision_us: np.ndarray
    run_wall_s: float

    @property
    def p50_us(self) -> float:
        return float(np.percentile(self.decision_us, 50))

    @property
    def p99_us(self) -> float:
        return float(np.percentile(self.decision_us, 99))

    @property
    def pods_per_s(self) -> float:
        return self.pods / self.run_wall_s


def bench_policy(
    policy: str, workload: str = DEFAULT_WORKLOAD, seed: int = 42, tune_ratio: float = DEFAULT_TUNE_RATIO
) -> BenchResult:
    """Replay one run, timing each decision (select) separately; wall time covers binds too."""
    inputs = workload_inputs(workload)
    prepared = prepare_run(inputs.pods, inputs.nodes.names, inputs.gpu_capacity_milli, seed, tune_ratio)
    # Warm-up: compile or load the kernels outside the timed run.
    warm = cluster_from_nodes(inputs.nodes, prepared.tie_rank)
    make_policy(policy, inputs.typical, seed).select(warm, prepared.arrivals.pod(0))
    state = cluster_from_nodes(inputs.nodes, prepared.tie_rank)
    chooser = make_policy(policy, inputs.typical, seed)
    arrivals = prepared.arrivals
    times = np.empty(len(arrivals), dtype=np.float64)
    clock = time.perf_counter_ns
    started = time.perf_counter()
    for i in range(len(arrivals)):
        pod = arrivals.pod(i)
        t0 = clock()
        placement = chooser.select(state, pod)
        times[i] = (clock() - t0) / 1000.0
        if placement is not None:
            state.bind(placement)
    wall = time.perf_counter() - started
    return BenchResult(policy, len(arrivals), state.num_nodes, times, wall)
