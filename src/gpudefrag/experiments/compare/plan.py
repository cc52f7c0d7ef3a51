"""What ``compare`` runs: the trace cut into windows, the cluster, the variants and the growths.

* **Windows.**  The trace's days after a first day of warm-up: window ``k`` measures
  ``[first + G x warmup + k x length, ... + length)`` of the trace, where ``first`` is the first
  submission and ``G`` the largest growth, as long as the window replayed at ``G`` (``G x length``
  of the trace) ends by the last submission.  A trace shorter than that is one window over its
  first ``1 / G`` (all of it at growth ``G``), without warm-up.  Each window is one paired
  sample: every variant and growth of a window replays the same jobs, so differences come with
  confidence intervals across windows.
* **Growth** ``g`` (1, 1.25, 1.5 by default) replays a window's arrivals ``g`` times as fast,
  durations kept (suite 2's load scaling, :func:`~gpudefrag.workloads.windows.scaled_jobs`): the
  same cluster under a busier month.
* **The cluster**: ``--nodes`` nodes of a preset topology, or a topology file; by default sized
  for the trace as it is: the GPU time it offers over its span, in the preset's nodes (at least
  its largest job).
* **Constraints**: ``--constraint``; else the trace's own ``topology`` column when it has one,
  else multi-node gangs preferred inside the topology's lowest level (``leaf`` on superpod), as
  ``gang-sim`` does; every level named is checked against the topology before a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.suite2.config import Suite2Config
from gpudefrag.model.jobs import Job, parse_constraint
from gpudefrag.model.topology import Topology, load_topology
from gpudefrag.workloads.windows import DAY_S, Window, scaled_jobs, size_cluster

__all__ = ["ComparePlan", "cluster_nodes", "trace_windows"]

DEFAULT_VARIANTS = ("volcano", "kueue", "kai", "kai+consolidate", "slurm", "fgd", "ours", "ours+defrag")
"""Every baseline and ours with and without defragmentation (``ours-batch``, CP-SAT batches,
only when asked: it is the slowest by far)."""


def trace_windows(
    jobs: list[Job], length_s: float = DAY_S, warmup_s: float = DAY_S, max_growth: float = 1.0
) -> tuple[list[Window], float]:
    """(windows, warm-up seconds) of the trace (module docstring); replayed at ``max_growth``
    (``length x growth`` of the trace in each window), every window still reads arrivals."""
    if not jobs:
        raise ConfigError("the trace has no jobs")
    first = min(j.submit_s for j in jobs)
    last = max(j.submit_s for j in jobs)
    out: list[Window] = []
    start = first + warmup_s * max_growth
    while start + length_s * max_growth <= last:
        out.append(Window("trace", start, start + length_s, 0.0, f"day{len(out) + 1:02d}"))
        start += length_s
    if out:
        return out, warmup_s
    return [Window("trace", first, first + (last - first) / max_growth + 1.0, 0.0, "all")], 0.0


def cluster_nodes(jobs: list[Job], gpus_per_node: int) -> int:
    """Nodes that carry the trace's offered GPU time over its span (at least its largest job)."""
    first = min(j.submit_s for j in jobs)
    last = max(j.submit_s for j in jobs)
    return size_cluster(jobs, Window("trace", first, max(last, first + 1.0), 0.0), gpus_per_node)


@dataclass(frozen=True)
class ComparePlan:
    """Everything one task needs: the trace, its windows, the suite 2 settings (``loads`` are the
    growths, ``windows`` the window names) and the cluster."""

    trace: Path
    windows: tuple[Window, ...]
    warmup_s: float
    suite: Suite2Config
    nodes: int
    topology_file: Path | None
    gang_constraint: str  # "keep": the trace's own

    @cached_property
    def gpus_per_node(self) -> int:
        if self.topology_file is not None:
            return load_topology(self.topology_file).max_gpus_per_node
        return 8 if self.suite.topology == "superpod" else 4

    def window(self, name: str) -> Window:
        for w in self.windows:
            if w.name == name:
                return w
        raise ConfigError(f"no window {name!r}")

    def topology(self) -> Topology:
        if self.topology_file is not None:
            return load_topology(self.topology_file)
        return self.preset(self.suite.topology, self.nodes, self.suite.leaf_nodes)

    @staticmethod
    def preset(name: str, nodes: int, leaf_nodes: int) -> Topology:
        """Suite 2's preset ``name`` of ``nodes`` nodes (leaf groups of ``leaf_nodes``)."""
        from gpudefrag.experiments.suite2.suite import build_topology

        return build_topology(
            Suite2Config(windows=(), set_name="", topology=name, leaf_nodes=leaf_nodes), nodes
        )

    def run_jobs(self, jobs: list[Job], name: str, growth: float) -> tuple[list[Job], tuple[float, float]]:
        """The jobs of window ``name`` at ``growth`` (times from the run's start) and its measure."""
        run = scaled_jobs(jobs, self.window(name), growth, self.warmup_s)
        if self.gang_constraint == "keep":
            return run.jobs, run.measure
        constraint = parse_constraint(self.gang_constraint)
        gpn = self.gpus_per_node
        return [replace(j, constraint=constraint) if j.gpus > gpn else j for j in run.jobs], run.measure
