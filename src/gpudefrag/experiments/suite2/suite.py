"""Suite 2: gangs on a multi-level topology, replayed from real traces.

For every window (:mod:`gpudefrag.workloads.suite_windows`), load (1.0, 1.25, 1.5: arrivals compressed,
durations kept, the cluster sized for load 1.0) and variant (:mod:`gpudefrag.experiments.suite2.config`)
one simulation (:func:`gpudefrag.sim.gang_sim.simulate`); all variants of a (window, load)
see the same jobs and cluster, so differences are paired by window.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.environment import record_executor
from gpudefrag.experiments.common.executor import RunExecutor
from gpudefrag.experiments.suite2.config import Suite2Config, make_variant
from gpudefrag.experiments.suite2.summary import summarise
from gpudefrag.model.jobs import Job, parse_constraint
from gpudefrag.model.topology import PRESETS, Topology, nvl72, superpod
from gpudefrag.sim.gang_sim import GangSimConfig, simulate
from gpudefrag.workloads.suite_windows import SUITE_GPUS_PER_NODE, suite_run

__all__ = ["Run2", "build_topology", "run_one", "run_suite", "simulate_variant", "tasks"]


@dataclass(frozen=True)
class Run2:
    window: str
    load: float
    variant: str
    nodes: int
    event_hash: str
    metrics: dict[str, float]


def build_topology(cfg: Suite2Config, nodes: int) -> Topology:
    if cfg.topology == "superpod":
        return superpod(nodes, cfg.leaf_nodes)
    if cfg.topology == "nvl72":
        return nvl72(nodes)
    raise ConfigError(f"unknown topology preset {cfg.topology!r}; known: {', '.join(PRESETS)}")


def tasks(cfg: Suite2Config) -> list[tuple[str, float, str]]:
    return [(w, load, v) for w in cfg.windows for load in cfg.loads for v in cfg.variants]


def run_one(cfg: Suite2Config, window: str, load: float, variant: str) -> Run2:
    """One simulation: window ``window`` at load ``load`` with ``variant``."""
    gpn = SUITE_GPUS_PER_NODE if cfg.topology == "superpod" else 4
    run = suite_run(window, load, gpn)
    constraint = parse_constraint(cfg.gang_constraint)
    jobs = [replace(j, constraint=constraint) if j.gpus > gpn else j for j in run.jobs]
    topo = build_topology(cfg, run.nodes)
    event_hash, metrics = simulate_variant(cfg, topo, jobs, run.measure, variant, gpn)
    return Run2(window, load, variant, run.nodes, event_hash, metrics)


def simulate_variant(
    cfg: Suite2Config, topo: Topology, jobs: list[Job], measure: tuple[float, float], variant: str, gpn: int
) -> tuple[str, dict[str, float]]:
    """(event hash, suite 2's figures) of one simulation of ``jobs`` on ``topo`` with
    ``variant``, measured over ``measure``, with ``cfg``'s checkpoints, restarts and ticks."""
    policy, defrag = make_variant(variant, jobs, gpn, cfg)
    sim_cfg = GangSimConfig(
        measure[0],
        measure[1],
        checkpoint_interval_s=cfg.checkpoint_interval_s,
        restart_s=cfg.restart_s,
        defrag_tick_s=cfg.defrag_tick_s,
    )
    result = simulate(topo, jobs, policy, sim_cfg, defrag)
    metrics = summarise(result, topo)
    for outcome, count in getattr(policy, "outcomes", {}).items():  # the batch placer's fallbacks
        metrics[f"batch_{outcome}"] = float(count)
    return result.event_hash, metrics


def _run_task(args: tuple[Suite2Config, str, float, str]) -> Run2:
    return run_one(*args)


def run_suite(
    cfg: Suite2Config,
    jobs: int | None = None,
    progress: bool = True,
    executor: RunExecutor | None = None,
) -> list[Run2]:
    """Every task of ``cfg`` on ``executor`` (default: a local pool of ``jobs`` processes, all
    cores by default), in task order."""
    todo = tasks(cfg)
    executor = executor or RunExecutor(jobs)
    record_executor(executor.describe())
    return executor.run_all(_run_task, [(cfg, *t) for t in todo], "suite 2", progress)
