"""Suite 1a: solver batch placement vs FGD on FGD's own protocol (arrival-only, 130 % load).

Variants: ``fgd`` and ``bestfit`` (one pod at a time) and ``solver-b<B>`` (the batch placer on
the next B arrivals).  Every variant replays the same seeded arrival sequence and tie ranks, so
per-seed differences are paired.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np

from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.batch.stats import BatchStats
from gpudefrag.experiments.calib.discretize import discretize
from gpudefrag.experiments.common.environment import record_executor
from gpudefrag.experiments.common.executor import RunExecutor
from gpudefrag.experiments.common.inputs import DEFAULT_WORKLOAD, cluster_from_nodes, workload_inputs
from gpudefrag.policies.registry import make_policy
from gpudefrag.sim.arrival import run_arrivals
from gpudefrag.sim.batch_arrival import run_batched
from gpudefrag.workloads.fgd_protocol import prepare_run

CHECKPOINTS = (100, 120, 130)
DEFAULT_BATCH_SIZES = (1, 16, 64)


@dataclass(frozen=True)
class Suite1aConfig:
    workload: str = DEFAULT_WORKLOAD
    seeds: tuple[int, ...] = tuple(range(42, 52))
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    baselines: tuple[str, ...] = ("fgd", "bestfit")
    solver: SolverConfig = field(default_factory=SolverConfig)

    def variants(self) -> list[str]:
        return list(self.baselines) + [f"solver-b{b}" for b in self.batch_sizes]


@dataclass(frozen=True)
class VariantRun:
    variant: str
    seed: int
    curve: np.ndarray
    failed: int
    wall_s: float
    decisions_sha256: str
    batches: list[BatchStats]


def _decisions_hash(node: np.ndarray, gpu_mask: np.ndarray) -> str:
    return hashlib.sha256(node.tobytes() + gpu_mask.tobytes()).hexdigest()


def run_variant(
    variant: str, seed: int, workload: str, solver: SolverConfig, limit_pods: int | None = None
) -> VariantRun:
    """One (variant, seed) run; ``limit_pods`` truncates the arrivals (tests, smoke runs)."""
    inputs = workload_inputs(workload)
    prepared = prepare_run(inputs.pods, inputs.nodes.names, inputs.gpu_capacity_milli, seed)
    arrivals = prepared.arrivals
    if limit_pods is not None:
        arrivals = arrivals.take(list(range(min(limit_pods, len(arrivals)))))
    state = cluster_from_nodes(inputs.nodes, prepared.tie_rank)
    batches: list[BatchStats] = []
    if variant.startswith("solver-b"):
        size = int(variant.removeprefix("solver-b"))
        result, batches = run_batched(state, arrivals, BatchPlacer(inputs.typical, solver), size)
    else:
        result = run_arrivals(state, arrivals, make_policy(variant, inputs.typical, seed))
    curve = discretize(result.used_gpu_milli, result.arrived_gpu_milli, inputs.nodes.total_gpus)
    return VariantRun(
        variant,
        seed,
        curve,
        result.failed,
        result.wall_s,
        _decisions_hash(result.node, result.gpu_mask),
        batches,
    )


def _task(args: tuple[str, int, str, SolverConfig]) -> VariantRun:
    return run_variant(*args)


def run_suite(
    config: Suite1aConfig,
    jobs: int | None = None,
    progress: bool = True,
    executor: RunExecutor | None = None,
) -> list[VariantRun]:
    """All variants x seeds on ``executor`` (default: a local pool of ``jobs`` processes);
    results ordered by (variant, seed)."""
    from gpudefrag.experiments.calib.gate import warm_up

    workload_inputs(config.workload)
    executor = executor or RunExecutor(jobs)
    record_executor(executor.describe())
    if executor.local:
        warm_up()
    tasks = [(v, s, config.workload, config.solver) for v in config.variants() for s in config.seeds]
    # Longest first (small batches are slowest) so the workers drain evenly.
    order = sorted(tasks, key=lambda t: (not t[0].startswith("solver"), t[0]))
    by_key = {(r.variant, r.seed): r for r in executor.run_all(_task, order, "suite 1a", progress)}
    return [by_key[(t[0], t[1])] for t in tasks]


def batch_rows(runs: list[VariantRun]) -> list[dict]:
    """The per-batch solver trace as rows (variant, seed, batch index, statistics)."""
    rows = []
    for r in runs:
        for i, b in enumerate(r.batches):
            rows.append({"variant": r.variant, "seed": r.seed, "batch": i, **asdict(b)})
    return rows
