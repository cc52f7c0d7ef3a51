"""Suite 1b: the time-driven simulator with departures, queueing and defragmentation.

Per seed: ~150 openb GPU nodes sampled stratified by (model, GPU count), and openb GPU pods
resampled with their trace durations under Poisson arrivals at an offered GPU load.  Every
variant at one (load, seed) sees the same cluster and arrivals, so differences are paired.
Variants: ``fgd``, ``bestfit``, ``solver`` (CP-SAT batch placement), and ``+defrag`` versions.
"""

from __future__ import annotations

import numpy as np

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.environment import record_executor
from gpudefrag.experiments.common.executor import RunExecutor
from gpudefrag.experiments.common.overrides import apply_overrides
from gpudefrag.experiments.suite1b.config import SOLVER_BATCH_PODS, VARIANTS, Suite1bConfig
from gpudefrag.experiments.suite1b.runs import Run1b, select_runs
from gpudefrag.experiments.suite1b.scenario import run_scenario, trace_durations_s
from gpudefrag.workloads.openb import load_node_list

__all__ = [
    "METRICS",
    "SOLVER_BATCH_PODS",
    "TIMED_METRICS",
    "VARIANTS",
    "Run1b",
    "Suite1bConfig",
    "build_config",
    "gpu_hours_by_pod_size",
    "run_one",
    "run_suite",
    "select_runs",
    "tasks",
]

TIMED_METRICS = (
    "gpu_alloc_pct",
    "goodput_pct",
    "gpu_idle_whole_pct",
    "gpu_idle_shared_pct",
    "wait_p50_s",
    "wait_p95_s",
    "wait_p99_s",
    "pending_at_end",
    "stranded_8gpu",
    "eight_gpu_arrived",
    "migrations_executed",
    "migrations_aborted",
    "gpu_hours_lost",
    "decision_latency_p99_s",
    "bind_conflicts",
    "reservations_made",
    "reservations_fulfilled",
    "reservations_bound_elsewhere",
    "reservation_expiries",
    "reservations_released",
)
METRICS = TIMED_METRICS + ("gpu_hours_multi_gpu_pods", "gpu_hours_other_pods")


def build_config(
    workload: str, horizon_h: float, n_nodes: int, settings: list[str] | tuple[str, ...] = (), **fields
) -> Suite1bConfig:
    """The configuration ``gpudefrag suite 1b`` and ``gpudefrag sim`` run: the defaults with
    ``workload``, ``horizon_h``, ``n_nodes`` and ``fields`` set, then the ``KEY=VALUE``
    ``settings`` applied (they win over ``fields``), every setting in its range, and no more
    nodes than the GPU-node list holds."""
    config = apply_overrides(
        Suite1bConfig(workload=workload, horizon_h=horizon_h, n_nodes=n_nodes, **fields), list(settings)
    )
    available = len(load_node_list())
    if config.n_nodes > available:
        raise ConfigError(f"--nodes {config.n_nodes}: the GPU-node list has {available} nodes to sample from")
    return config


def run_one(config: Suite1bConfig, variant: str, load: float, seed: int, restart_s: float) -> Run1b:
    """One run of the suite: :func:`~gpudefrag.experiments.suite1b.scenario.run_scenario` and its metrics."""
    result, workload = run_scenario(config, variant, load, seed, restart_s)
    metrics = {m: float(getattr(result, m)) for m in TIMED_METRICS}
    metrics.update(gpu_hours_by_pod_size(result, workload))
    return Run1b(variant, load, seed, restart_s, metrics, result.event_hash, result.wall_s)


def gpu_hours_by_pod_size(result, workload) -> dict[str, float]:
    """GPU-hours held inside the metrics window by pods asking for 2+ GPUs and by the others.

    Each pod counts from its first bind to its completion (or the horizon); the time a moved
    pod holds two places, and its restart, are not split out.
    """
    H, W = result.horizon_s, result.warmup_s
    start = np.nan_to_num(result.first_bind_s, nan=H)
    end = np.nan_to_num(result.completion_s, nan=H)
    held_s = np.clip(np.minimum(end, H) - np.maximum(start, W), 0.0, None)
    gpus = workload.pods.num_gpu * workload.pods.gpu_milli / 1000.0
    gpu_h = held_s * gpus / 3600.0
    multi = workload.pods.num_gpu >= 2
    return {
        "gpu_hours_multi_gpu_pods": float(gpu_h[multi].sum()),
        "gpu_hours_other_pods": float(gpu_h[~multi].sum()),
    }


def _task(args) -> Run1b:
    return run_one(*args)


def tasks(config: Suite1bConfig) -> list[tuple]:
    """Every run of the suite as ``run_one``'s arguments: each variant at each load and seed
    with the main restart time, then the restart-time sweep (each sweep variant at the sweep
    load, each sweep restart time and seed) without the runs the main grid already holds."""
    main = [
        (config, v, load, s, config.restart_s)
        for load in config.loads
        for v in config.variants
        for s in config.seeds
    ]
    in_main = {(v, load, config.restart_s) for v in config.variants for load in config.loads}
    sweep = [
        (config, v, config.sweep_load, s, r)
        for v in dict.fromkeys(config.sweep_variants)
        for r in dict.fromkeys(config.sweep_restart_s)
        if (v, config.sweep_load, r) not in in_main
        for s in config.seeds
    ]
    return main + sweep


def run_suite(
    config: Suite1bConfig,
    jobs: int | None = None,
    progress: bool = True,
    executor: RunExecutor | None = None,
) -> list[Run1b]:
    """Every run of :func:`tasks` on ``executor`` (default: a local pool of ``jobs`` processes);
    results ordered by (load, variant, restart_s, seed)."""
    todo = tasks(config)
    executor = executor or RunExecutor(jobs)
    record_executor(executor.describe())
    if executor.local:
        trace_durations_s(config.workload)  # loaded once before the workers fork
    # Slow variants first so the workers drain evenly.
    todo.sort(key=lambda t: ("defrag" not in t[1], not t[1].startswith("solver")))
    out = executor.run_all(_task, todo, "suite 1b", progress)
    out.sort(key=lambda r: (r.load, r.variant, r.restart_s, r.seed))
    return out
