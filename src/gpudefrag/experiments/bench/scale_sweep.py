"""Decision latency against cluster size: the growth chart of ``gpudefrag bench --sweep``.

For each size (GPUs) one cluster is built (:func:`~gpudefrag.experiments.bench.scale.large_cluster`,
same seed) and every (policy, mode) pair times its decisions on its own copy of it
(:func:`~gpudefrag.experiments.bench.scale.time_decisions`): mode ``index`` is the incremental
index, ``scan`` the full scan of every node.  One row per (size, policy, mode, pod shape) goes
to a CSV; the chart plots p50 and p99 (over all shapes' decisions) against GPUs on log-log axes,
so linear growth (the scan) and near-flat growth (the index) show at a glance.  The growth
ratio reported is p99 at the largest size over p99 at the size nearest 10,000 GPUs.

With ``gang_sizes``, each size also times gang placements
(:func:`~gpudefrag.experiments.bench.gang_scale.bench_gangs`, on its own filled cluster of that
size): rows of policy ``ours``, mode ``gang``, shape ``"<n> GPUs"`` for every gang size up to
half the cluster, plotted per gang size in a second panel.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpudefrag.experiments.bench.gang_scale import bench_gangs
from gpudefrag.experiments.bench.scale import large_cluster, time_decisions
from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.charts import save_png
from gpudefrag.frag.typical import TypicalPods
from gpudefrag.model.jobs import Job
from gpudefrag.model.pods import PodBatch

__all__ = ["SweepRow", "growth_ratio", "sweep", "write_chart", "write_csv"]


@dataclass(frozen=True)
class SweepRow:
    """One (size, policy, mode, shape): latencies in ms and the cluster's node count."""

    gpus: int
    nodes: int
    policy: str
    mode: str
    shape: str
    latency_ms: np.ndarray

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latency_ms, q))


def sweep(
    sizes: list[int],
    preset: str,
    pods: PodBatch,
    typical: TypicalPods,
    policies: list[str],
    modes: list[str],
    decisions: int,
    seed: int,
    itp_jobs: list[Job] | None,
    on_step: Callable[[str], None] | None = None,
    gang_sizes: tuple[int, ...] = (),
    gang_decisions: int = 50,
    leaf_nodes: int | None = None,
) -> list[SweepRow]:
    """Every (size, policy, mode) of the module docstring, in that order, then each size's
    gangs when ``gang_sizes`` is given (``leaf_nodes``: superpod's nodes per leaf group)."""
    rows: list[SweepRow] = []
    for gpus in sizes:
        base = large_cluster(gpus, preset, pods, seed, itp_jobs=itp_jobs)
        for policy in policies:
            for mode in modes:
                _, latency = time_decisions(
                    base.copy(), typical, policy, decisions, seed, scan=mode == "scan"
                )
                total_gpus = int(base.gpu_count.sum())
                rows.extend(
                    SweepRow(total_gpus, base.num_nodes, policy, mode, shape, ms)
                    for shape, ms in latency.items()
                )
                if on_step is not None:
                    on_step(f"{gpus} GPUs {policy} {mode}")
        fitting = tuple(g for g in gang_sizes if g <= gpus // 2)
        if fitting:
            res = bench_gangs(gpus, preset, seed, gang_decisions, fitting, leaf_nodes=leaf_nodes)
            rows.extend(
                SweepRow(res.gpus, res.nodes, "ours", GANG_MODE, f"{g} GPUs", res.latency_ms[g])
                for g in fitting
            )
        if gang_sizes and on_step is not None:
            on_step(f"{gpus} GPUs gangs")
    return rows


GANG_MODE = "gang"
"""The mode of the gang rows."""


def _gang_points(rows: list[SweepRow]) -> dict[str, list[tuple[int, float, float]]]:
    """Gang size label -> [(gpus, p50, p99)] by cluster size."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    for r in sorted(
        (r for r in rows if r.mode == GANG_MODE), key=lambda r: (int(r.shape.split()[0]), r.gpus)
    ):
        out.setdefault(r.shape, []).append((r.gpus, r.percentile(50), r.percentile(99)))
    return out


def _pooled(rows: list[SweepRow]) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    """(policy, mode) -> [(gpus, p50, p99)] over all shapes' decisions, by size."""
    groups: dict[tuple[str, str, int], list[np.ndarray]] = {}
    for r in rows:
        if r.mode == GANG_MODE:
            continue
        groups.setdefault((r.policy, r.mode, r.gpus), []).append(r.latency_ms)
    out: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    for (policy, mode, gpus), arrays in sorted(groups.items()):
        ms = np.concatenate(arrays)
        out.setdefault((policy, mode), []).append(
            (gpus, float(np.percentile(ms, 50)), float(np.percentile(ms, 99)))
        )
    return out


def growth_ratio(rows: list[SweepRow], policy: str, mode: str) -> tuple[int, int, float] | None:
    """(reference GPUs, largest GPUs, p99 ratio) for one (policy, mode), or None with < 2 sizes."""
    points = _pooled(rows).get((policy, mode), [])
    if len(points) < 2:
        return None
    ref = min(points, key=lambda p: abs(np.log10(p[0]) - 4.0))
    top = max(points, key=lambda p: p[0])
    if ref[0] == top[0]:
        return None
    return ref[0], top[0], top[2] / ref[2]


def write_csv(rows: list[SweepRow], path: Path) -> Path:
    """One row per (size, policy, mode, shape): gpus, nodes, p50/p99/max ms, decisions."""
    with atomic_write(path) as f:
        w = csv.writer(f)
        w.writerow(["gpus", "nodes", "policy", "mode", "shape", "p50_ms", "p99_ms", "max_ms", "decisions"])
        for r in rows:
            w.writerow(
                [
                    r.gpus,
                    r.nodes,
                    r.policy,
                    r.mode,
                    r.shape,
                    f"{r.percentile(50):.4f}",
                    f"{r.percentile(99):.4f}",
                    f"{r.latency_ms.max():.4f}",
                    r.latency_ms.size,
                ]
            )
    return path


def _panel(ax: Any, series: dict[str, list[tuple[int, float, float]]], ylabel: str, title: str) -> None:
    """One log-log panel: per series, p99 (solid) and p50 (dashed, same colour) against GPUs."""
    for name, points in series.items():
        gpus = [p[0] for p in points]
        (line,) = ax.plot(gpus, [p[2] for p in points], marker="o", label=f"{name} p99")
        ax.plot(
            gpus,
            [p[1] for p in points],
            marker=".",
            linestyle="--",
            color=line.get_color(),
            label=f"{name} p50",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cluster size (GPUs)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def write_chart(rows: list[SweepRow], path: Path) -> Path:
    """p50 (dashed) and p99 (solid) decision latency against GPUs, log-log, one colour per
    (policy, mode); gangs (when swept) in a second panel, one colour per gang size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gangs = _gang_points(rows)
    fig, axes = plt.subplots(1, 2 if gangs else 1, figsize=(14 if gangs else 8, 5), squeeze=False)
    pods = {f"{policy} {mode}": points for (policy, mode), points in _pooled(rows).items()}
    _panel(
        axes[0][0], pods, "decision latency per pod (ms)", "Single-pod decision latency against cluster size"
    )
    if gangs:
        _panel(
            axes[0][1],
            {f"gang of {label}": points for label, points in gangs.items()},
            "gang placement latency (ms)",
            "Gang placement latency (ours, required level) against cluster size",
        )
    return save_png(fig, path)
