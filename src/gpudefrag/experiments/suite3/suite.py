"""Suite 3: failures, spare capacity, checkpoint-aware preemption and elastic nodes, replayed
from suite 2's trace windows (:mod:`gpudefrag.experiments.suite3.config` names the studies).

One run = (window, seed, variant).  The window's jobs come from suite 2
(:func:`~gpudefrag.workloads.suite_windows.suite_run` at ``load``; gangs get the suite's topology
constraint), each job gets a priority class drawn with the seed
(:func:`~gpudefrag.capacity.classes.assign_classes`), and node failures are drawn with the same
seed for the run's topology (:func:`~gpudefrag.capacity.failures.failure_events`), so every
variant of a (window, seed) sees the same jobs and the same failures.  Placement is ours
(``Suite3Config.placer``, ours by default: :class:`~gpudefrag.gangs.ours.GangAware` on the
run's job mix) in every variant.

The peak-sized cluster of the elastic study has, per window, as many nodes as the busiest hour
of the measurement window offers GPUs (each job counted from its submission for its duration,
as the load-1.0 sizing does), rounded up, and at least the load-1.0 size.  The elastic
cluster has the same nodes plus ``ceil(burst_fraction x peak)`` standby nodes (numbered last,
powered off at the start): room to catch up a backlog that even the peak-sized cluster builds.
Node failures are drawn node by node in order, so the peak nodes fail at the same times in both
variants; capacity shares are measured against the peak nodes in both.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace

import numpy as np

from gpudefrag.capacity.classes import assign_classes
from gpudefrag.capacity.failures import failure_events
from gpudefrag.capacity.spares import spare_nodes
from gpudefrag.capacity.victims import VictimRule
from gpudefrag.experiments.common.environment import record_executor
from gpudefrag.experiments.common.executor import RunExecutor
from gpudefrag.experiments.suite3.config import Suite3Config, variant
from gpudefrag.experiments.suite3.summary import summarise3
from gpudefrag.model.jobs import Job, parse_constraint
from gpudefrag.model.topology import superpod
from gpudefrag.profiles.jobs import gang_placer, victim_rule
from gpudefrag.profiles.schema import PreemptSettings
from gpudefrag.sim.capacity_model import Sim3Config
from gpudefrag.sim.capacity_sim import simulate3
from gpudefrag.workloads.suite_windows import SUITE_GPUS_PER_NODE, suite_run

__all__ = ["Run3", "peak_nodes", "run_one", "run_suite", "tasks"]


@dataclass(frozen=True)
class Run3:
    window: str
    seed: int
    variant: str
    nodes: int
    event_hash: str
    metrics: dict[str, float]


def peak_nodes(jobs: list[Job], start_s: float, end_s: float, gpus_per_node: int, at_least: int) -> int:
    """Nodes for the busiest hour of ``[start_s, end_s)`` (module docstring)."""
    hours = max(1, math.ceil((end_s - start_s) / 3600.0))
    offered = np.zeros(hours, dtype=np.float64)
    edges = start_s + 3600.0 * np.arange(hours + 1)
    for j in jobs:
        lo, hi = max(j.submit_s, start_s), min(j.submit_s + j.duration_s, end_s)
        if hi <= lo:
            continue
        overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0.0, None)
        offered += j.gpu_share * overlap
    return max(at_least, math.ceil(float(offered.max()) / 3600.0 / gpus_per_node))


def _victim_rule(name: str | None, cfg: Suite3Config) -> VictimRule | None:
    """The variant's victim rule (:func:`~gpudefrag.profiles.jobs.victim_rule`) with the suite's
    preemption settings (the shipped ``suite3`` profile's unless overridden)."""
    if name is None:
        return None
    settings = PreemptSettings.model_validate(
        {"victims": name, "checkpoint_wait_s": cfg.checkpoint_wait_s, "wait_price": cfg.wait_price}
    )
    return victim_rule(settings)


def _seed(window: str, seed: int, salt: str) -> int:
    return zlib.crc32(f"{window}/{seed}/{salt}".encode())


def run_one(cfg: Suite3Config, window: str, seed: int, name: str) -> Run3:
    """One simulation (module docstring)."""
    v = variant(name)
    gpn = SUITE_GPUS_PER_NODE
    run = suite_run(window, cfg.load, gpn)
    constraint = parse_constraint(cfg.gang_constraint)
    jobs = [replace(j, constraint=constraint) if j.gpus > gpn else j for j in run.jobs]
    jobs = assign_classes(jobs, cfg.class_shares, _seed(window, seed, "classes"))
    start_s, end_s = run.measure
    nodes = peak_nodes(jobs, start_s, end_s, gpn, run.nodes) if v.peak_sized else run.nodes
    standby = math.ceil(cfg.burst_fraction * nodes) if v.elastic else 0
    topo = superpod(nodes + standby, cfg.leaf_nodes)
    fcfg = replace(cfg.failures, scale=cfg.failures.scale * (cfg.stress_scale if v.stressed else 1.0))
    outages = failure_events(topo, fcfg, end_s, _seed(window, seed, "failures"))
    sim_cfg = Sim3Config(
        start_s,
        end_s,
        checkpoint_interval_s=cfg.checkpoint_interval_s,
        restart_s=cfg.restart_s,
        spare_policy=v.spare,
        elastic=cfg.elastic if v.elastic else None,
        standby_nodes=standby,
        checkpoint_wait_s=cfg.checkpoint_wait_s,
    )
    spares = spare_nodes(topo, v.spare, cfg.spare_fraction)
    policy = gang_placer(cfg.placer, jobs)
    result = simulate3(topo, jobs, policy, sim_cfg, outages, spares, _victim_rule(v.victims, cfg))
    metrics = summarise3(result, gpn, cfg.serve_grace_s)
    metrics["outages"] = float(len(outages))
    return Run3(window, seed, name, nodes, result.event_hash, metrics)


def tasks(cfg: Suite3Config) -> list[tuple[str, int, str]]:
    return [(w, s, v) for w in cfg.windows for s in cfg.seeds for v in cfg.variants]


def _run_task(args: tuple[Suite3Config, str, int, str]) -> Run3:
    return run_one(*args)


def run_suite(
    cfg: Suite3Config, jobs: int | None = None, progress: bool = True, executor: RunExecutor | None = None
) -> list[Run3]:
    """Every task of ``cfg`` on ``executor`` (default: a local pool), in task order."""
    todo = tasks(cfg)
    executor = executor or RunExecutor(jobs)
    record_executor(executor.describe())
    return executor.run_all(_run_task, [(cfg, *t) for t in todo], "suite 3", progress)
