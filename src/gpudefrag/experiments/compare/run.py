"""``compare``'s runs: every (window, growth, variant) of a :class:`ComparePlan`, one simulation
each (suite 2's :func:`~gpudefrag.experiments.suite2.suite.simulate_variant`), on a pool of
processes with a progress bar.  The trace is read once per process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from gpudefrag.experiments.common.executor import RunExecutor
from gpudefrag.experiments.compare.plan import ComparePlan
from gpudefrag.experiments.suite2.suite import Run2, simulate_variant
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.jobtrace import load_job_trace

__all__ = ["run_compare", "run_one"]


@cache
def _trace(path: Path) -> tuple[Job, ...]:
    return tuple(load_job_trace(path))


def run_one(plan: ComparePlan, window: str, growth: float, variant: str) -> Run2:
    """One simulation: window ``window`` of the trace at ``growth`` with ``variant``."""
    jobs, measure = plan.run_jobs(list(_trace(plan.trace)), window, growth)
    topo = plan.topology()
    event_hash, metrics = simulate_variant(plan.suite, topo, jobs, measure, variant, plan.gpus_per_node)
    return Run2(window, growth, variant, topo.num_nodes, event_hash, metrics)


def _task(args: tuple[ComparePlan, str, float, str]) -> Run2:
    return run_one(*args)


def run_compare(plan: ComparePlan, executor: RunExecutor, progress: bool = True) -> list[Run2]:
    """Every (window, growth, variant) of ``plan``, in that order."""
    cfg = plan.suite
    specs = [(plan, w, g, v) for w in cfg.windows for g in cfg.loads for v in cfg.variants]
    return executor.run_all(_task, specs, "compare", progress)
