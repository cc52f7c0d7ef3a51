"""Suite 1b's charts: allocation and wait against FGD per variant and load, and the trade-off of
allocation gained against p95 wait added (one point per seed and variant, with its
least-squares slope)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpudefrag.experiments.common.charts import save_png
from gpudefrag.experiments.suite1b.acceptance import CONTROL, paired_to_control, per_seed_differences
from gpudefrag.experiments.suite1b.config import NUDGED_VARIANT
from gpudefrag.experiments.suite1b.suite import Run1b, Suite1bConfig

__all__ = ["sweep_restarts", "tradeoff_points", "tradeoff_slope", "write_chart", "write_tradeoff_chart"]


def sweep_restarts(runs: list[Run1b], config: Suite1bConfig, variant: str) -> list[float]:
    """The sweep's restart times at which ``variant`` ran at the sweep load, shortest first."""
    ran = {r.restart_s for r in runs if r.variant == variant and r.load == config.sweep_load}
    return sorted(ran & set(config.sweep_restart_s))


def _pyplot():
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _compared(config: Suite1bConfig) -> list[str]:
    """The variants the charts and the trade-off fit compare with FGD: all but FGD itself and
    its nudged control (the noise floor, reported in its own table)."""
    return [v for v in config.variants if v not in (CONTROL, NUDGED_VARIANT)]


def write_chart(runs: list[Run1b], config: Suite1bConfig, path: Path) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    others = _compared(config)
    width = 0.8 / max(len(others), 1)
    for ax, metric, label in (
        (axes[0], "gpu_alloc_pct", "GPU allocation minus FGD (pp)"),
        (axes[1], "wait_p95_s", "wait p95 minus FGD (s)"),
    ):
        for k, v in enumerate(others):
            means: list[float] = []
            errs: list[float] = []
            for load in config.loads:
                p = paired_to_control(runs, v, load, config.restart_s, metric)
                if p is None:
                    means.append(np.nan)
                    errs.append(0)
                    continue
                means.append(p.diff.mean)
                errs.append(p.diff.half_width)
            ax.bar(np.arange(len(config.loads)) + k * width, means, width, yerr=errs, capsize=3, label=v)
        ax.set_xticks(np.arange(len(config.loads)) + width * (len(others) - 1) / 2)
        ax.set_xticklabels([f"load {x:g}" for x in config.loads])
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(label)
    if others:  # a legend only when some variant is compared with FGD
        axes[0].legend(fontsize=8)
    axes[0].set_title("Allocation vs FGD (paired, 95 % CI)")
    axes[1].set_title("p95 wait vs FGD (paired, 95 % CI)")
    for v in dict.fromkeys(config.sweep_variants):
        pairs = {
            r: paired_to_control(
                runs, v, config.sweep_load, r, "goodput_pct", control_restart_s=config.restart_s
            )
            for r in sweep_restarts(runs, config, v)
        }
        diffs = {r: p.diff for r, p in pairs.items() if p is not None}
        if diffs:
            axes[2].errorbar(
                list(diffs),
                [d.mean for d in diffs.values()],
                yerr=[d.half_width for d in diffs.values()],
                marker="o",
                capsize=3,
                label=v,
            )
    if axes[2].lines:
        axes[2].legend(fontsize=8)
        axes[2].axhline(0, color="black", linewidth=0.8)
        axes[2].set_xscale("log")
        axes[2].set_xlabel("restart time (s)")
        axes[2].set_ylabel("allocation net of migration waste minus FGD (pp)")
        axes[2].set_title(f"When defrag stops paying (load {config.sweep_load:g})")
    return save_png(fig, path)


def _variant_points(
    runs: list[Run1b], variant: str, load: float, restart_s: float
) -> tuple[list[float], list[float]]:
    """``variant``'s allocation gained (pp) and p95 wait added (s) over FGD, one pair per seed."""
    alloc = per_seed_differences(runs, variant, load, restart_s, "gpu_alloc_pct")
    wait = per_seed_differences(runs, variant, load, restart_s, "wait_p95_s")
    seeds = sorted(alloc.keys() & wait.keys())
    return [alloc[s] for s in seeds], [wait[s] for s in seeds]


def tradeoff_points(runs: list[Run1b], config: Suite1bConfig, load: float) -> tuple[np.ndarray, np.ndarray]:
    """Every (variant other than FGD and its nudged control, seed) at ``load``: allocation
    gained (pp) and p95 wait added (s) over FGD."""
    xs: list[float] = []
    ys: list[float] = []
    for v in _compared(config):
        x, y = _variant_points(runs, v, load, config.restart_s)
        xs += x
        ys += y
    return np.array(xs), np.array(ys)


def tradeoff_slope(runs: list[Run1b], config: Suite1bConfig, load: float) -> tuple[float, float, int] | None:
    """Least-squares slope of p95 wait added on allocation gained over the points of
    :func:`tradeoff_points` (s per pp), its R², and the number of points; ``None`` with fewer
    than three points or no spread in allocation."""
    x, y = tradeoff_points(runs, config, load)
    if len(x) < 3 or np.ptp(x) == 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else 1.0
    return float(slope), r2, len(x)


def write_tradeoff_chart(runs: list[Run1b], config: Suite1bConfig, path: Path) -> Path:
    """One panel per load: each seed's (allocation gained, p95 wait added) over FGD per variant,
    the variant means as large markers, and at the defragmentation check's load the box that
    check asks for."""
    plt = _pyplot()
    loads = list(config.loads)
    fig, axes = plt.subplots(1, len(loads), figsize=(5 * len(loads), 4.5), squeeze=False)
    others = _compared(config)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    limits = config.acceptance
    for ax, load in zip(axes[0], loads):
        for k, v in enumerate(others):
            x, y = _variant_points(runs, v, load, config.restart_s)
            if not x:
                continue
            colour = colours[k % len(colours)]
            ax.scatter(x, y, s=18, alpha=0.55, color=colour)
            ax.scatter(
                [np.mean(x)], [np.mean(y)], s=110, marker="D", edgecolor="black", color=colour, label=v
            )
        if load == limits.defrag_load:
            x_hi = max(ax.get_xlim()[1], limits.defrag_min_gain_pp + 0.5)
            y_lo = min(ax.get_ylim()[0], -10.0)
            ax.fill_between(
                [limits.defrag_min_gain_pp, x_hi],
                y_lo,
                limits.defrag_max_p95_wait_added_s,
                color="green",
                alpha=0.12,
                label="defragmentation check (mean)",
            )
            ax.set_xlim(right=x_hi)
            ax.set_ylim(bottom=y_lo)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel("GPU allocation minus FGD (pp)")
        ax.set_ylabel("wait p95 minus FGD (s)")
        ax.set_title(f"Offered load {load:.1f}: one point per seed")
    axes[0][0].legend(fontsize=8)
    return save_png(fig, path)
