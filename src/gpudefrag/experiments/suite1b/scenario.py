"""One suite-1b scenario wired and run: cluster, arrivals, scheduler, defragmenter, simulator.

The cluster and the arrivals depend only on (workload, load, seed, node count, hours), never on
the variant, so every variant of one (load, seed) sees the same cluster and arrivals.  A variant
is ``<base>`` or ``<base>+defrag``: the base ``solver`` is the CP-SAT batch placer on a session's
first batch, ``fgd-nudged`` FGD with one decision changed where the metrics window starts
(:mod:`gpudefrag.experiments.suite1b.nudge`), any other base a one-pod-at-a-time policy; ``+defrag``
adds the defragmenter.
Suite 1b (:func:`gpudefrag.experiments.suite1b.suite.run_one`) and ``gpudefrag sim`` both run a
scenario through :func:`run_scenario`, so one scenario gives one event hash wherever it runs.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.experiments.common.inputs import WorkloadInputs, cluster_from_nodes, workload_inputs
from gpudefrag.experiments.suite1b.config import NUDGED_VARIANT, SOLVER_BATCH_PODS, Suite1bConfig
from gpudefrag.experiments.suite1b.nudge import NudgedScheduler
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.port import RuntimeEstimator, Scheduler
from gpudefrag.policies.registry import make_policy
from gpudefrag.policies.scheduler import PolicyScheduler
from gpudefrag.profiles.build import defragmenter
from gpudefrag.sim.config import TimedConfig
from gpudefrag.sim.latency import LatencyModel
from gpudefrag.sim.results import TimedResult
from gpudefrag.sim.timed import Hook, Simulator
from gpudefrag.workloads.openb import load_workload
from gpudefrag.workloads.synthetic import (
    SyntheticWorkload,
    durations_from_table,
    make_workload,
    sample_cluster,
)


@lru_cache(maxsize=4)
def trace_durations_s(workload: str) -> np.ndarray:
    """The run times (s) of ``workload``'s trace pods, resampled with the pods (cached)."""
    return durations_from_table(load_workload(workload))


def scenario(
    config: Suite1bConfig, load: float, seed: int
) -> tuple[WorkloadInputs, ClusterState, SyntheticWorkload]:
    """The inputs, cluster and arrivals of one (load, seed): identical for every variant."""
    inputs = workload_inputs(config.workload)
    rng = np.random.default_rng([seed, round(load * 1000)])
    nodes = sample_cluster(inputs.nodes, config.n_nodes, rng)
    cluster = cluster_from_nodes(nodes)
    workload = make_workload(
        inputs.pods,
        trace_durations_s(config.workload),
        cluster.gpu_capacity_milli,
        load,
        config.horizon_h * 3600.0,
        rng,
    )
    return inputs, cluster, workload


def make_scheduler(
    config: Suite1bConfig,
    inputs: WorkloadInputs,
    base: str,
    seed: int,
    runtimes: RuntimeEstimator | None = None,
    with_defrag: bool = False,
    nudge_at_s: float = 0.0,
) -> tuple[Scheduler, LatencyModel]:
    """The scheduler of a variant's base and its simulated decision latency: the batch placer
    for ``solver`` (the solver's deterministic time on top of the base latency; its node
    lifetimes estimated with ``runtimes``; ``with_defrag``: next to the defragmenter, so with
    ``config.defrag_age_max_gpus`` when that is set), FGD nudged once at ``nudge_at_s`` for
    ``fgd-nudged``, else a policy."""
    if base == "solver":
        solver = config.solver
        if with_defrag and config.defrag_age_max_gpus is not None:
            solver = replace(solver, age_max_gpus=config.defrag_age_max_gpus)
        placer = BatchPlacer(inputs.typical, solver)
        return (
            BatchScheduler(placer, SOLVER_BATCH_PODS, solver_batches=1, runtimes=runtimes),
            LatencyModel.deterministic(base_s=config.decision_latency_s),
        )
    latency = LatencyModel.constant(config.decision_latency_s)
    if base == NUDGED_VARIANT:
        return NudgedScheduler(make_policy("fgd", inputs.typical, seed), nudge_at_s), latency
    return PolicyScheduler(make_policy(base, inputs.typical, seed)), latency


def migration_model(config: Suite1bConfig, restart_s: float) -> MigrationModel:
    """The migration model of a run: the suite's grace period, pods restarting in ``restart_s``."""
    return MigrationModel(eviction_grace_s=config.eviction_grace_s, restart_s=restart_s)


def make_defragmenter(
    config: Suite1bConfig, migration: MigrationModel, runtimes: RuntimeEstimator
) -> DefragController:
    """The defragmenter of a ``+defrag`` variant under ``migration``, estimating run times
    with ``runtimes`` (:func:`gpudefrag.profiles.build.defragmenter` of the suite's settings)."""
    return defragmenter(config.defragment_settings(), migration, runtimes)


def run_scenario(
    config: Suite1bConfig,
    variant: str,
    load: float,
    seed: int,
    restart_s: float,
    hook: Hook | None = None,
) -> tuple[TimedResult, SyntheticWorkload]:
    """Run ``variant`` on the scenario of (``load``, ``seed``) with pods restarting after
    ``restart_s`` seconds; ``hook`` sees every processed event (it must not change the run)."""
    inputs, cluster, workload = scenario(config, load, seed)
    base, _, extra = variant.partition("+")
    history = ResidualLife(workload.duration_s) if config.runtime_estimates == "history" else None
    scheduler, latency = make_scheduler(
        config, inputs, base, seed, history, with_defrag=extra == "defrag", nudge_at_s=workload.warmup_s
    )
    migration = migration_model(config, restart_s)
    timed = TimedConfig(migration=migration, latency=latency, hold_reserved_pods=config.hold_reserved_pods)
    sim = Simulator(cluster, workload, scheduler, timed, hook)
    runtimes: RuntimeEstimator = history if history is not None else sim.true_runtimes
    if isinstance(scheduler, BatchScheduler) and scheduler.runtimes is None:
        scheduler.runtimes = runtimes  # the oracle exists only once the simulator does
    defrag = make_defragmenter(config, migration, runtimes) if extra == "defrag" else None
    return sim.run(defrag), workload
