"""Decision latency against cluster size: the growth chart of ``gpudefrag bench --sweep``.

For each size (GPUs) one cluster is built (:func:`~gpudefrag.experiments.scale_bench.large_cluster`,
same seed) and every (policy, mode) pair times its decisions on its own copy of it
(:func:`~gpudefrag.experiments.scale_bench.time_decisions`): mode ``index`` is the incremental
index, ``scan`` the full scan of every node.  One row per (size, policy, mode, pod shape) goes
to a CSV; the chart plots p50 and p99 (over all shapes' decisions) against GPUs on log-log axes,
so linear growth (the scan) and near-flat growth (the index) show at a glance.  The growth
ratio reported is p99 at the largest size over p99 at the size nearest 10,000 GPUs.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudefrag.experiments.atomic import atomic_write
from gpudefrag.experiments.scale_bench import large_cluster, time_decisions
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
) -> list[SweepRow]:
    """Every (size, policy, mode) of the module docstring, in that order."""
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
    return rows


def _pooled(rows: list[SweepRow]) -> dict[tuple[str, str], list[tuple[int, float, float]]]:
    """(policy, mode) -> [(gpus, p50, p99)] over all shapes' decisions, by size."""
    groups: dict[tuple[str, str, int], list[np.ndarray]] = {}
    for r in rows:
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


def write_chart(rows: list[SweepRow], path: Path) -> Path:
    """p50 (dashed) and p99 (solid) decision latency against GPUs, log-log, one colour per
    (policy, mode)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for (policy, mode), points in _pooled(rows).items():
        gpus = [p[0] for p in points]
        (line,) = ax.plot(gpus, [p[2] for p in points], marker="o", label=f"{policy} {mode} p99")
        ax.plot(
            gpus,
            [p[1] for p in points],
            marker=".",
            linestyle="--",
            color=line.get_color(),
            label=f"{policy} {mode} p50",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cluster size (GPUs)")
    ax.set_ylabel("decision latency per pod (ms)")
    ax.set_title("Single-pod decision latency against cluster size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
