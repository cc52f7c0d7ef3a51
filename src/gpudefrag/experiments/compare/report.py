"""``compare``'s report: a verdict first, what switching would change, then suite 2's tables per
growth, ``runs.csv`` and charts.

The verdict, per growth: ours (with defragmentation when it ran) against the best of the
placement-only baselines that ran (highest mean allocation, :func:`~gpudefrag.experiments.
suite2.report.best_placement_baseline`), paired by window: allocation and goodput (allocation
net of the GPU time moves waste) with 95 % CIs across windows and the windows won; the p95 wait
of the jobs that started, and of jobs of 32 or more GPUs with those still pending at a window's
end counted as waiting to its end; and the GPU-hours moves lose per window.  With one window there is no
interval (``n/a``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.stats import Paired, paired
from gpudefrag.experiments.compare.plan import ComparePlan
from gpudefrag.experiments.suite2.report import (
    best_placement_baseline,
    load_sections,
    window_values,
    write_charts,
    write_csv,
)
from gpudefrag.experiments.suite2.suite import Run2

__all__ = ["verdict_lines", "write_compare_report"]


def _ci(p: Paired, unit: str, digits: int = 2) -> str:
    d = p.diff
    if d.n == 0 or not math.isfinite(d.mean):
        return "n/a (no window has it for both)"
    if d.n < 2:
        return f"{d.mean:+,.{digits}f} {unit} (one window: no interval)"
    return f"{d.mean:+,.{digits}f} {unit} [{d.low:+,.{digits}f}, {d.high:+,.{digits}f}]"


def verdict_lines(runs: list[Run2], plan: ComparePlan) -> list[str]:
    """The module docstring's verdict, one paragraph per growth."""
    cfg = plan.suite
    ours = next((v for v in ("ours+defrag", "ours") if v in cfg.variants), None)
    lines = ["## Verdict", ""]
    for g in cfg.loads:
        ref = best_placement_baseline(runs, cfg, g)
        if ours is None or ref is None:
            lines.append(f"- {g:g}x: no verdict (it needs ours and a placement-only baseline)")
            continue

        def pair(metric: str, g: float = g, ref: str = ref, ours: str = ours) -> Paired:
            a, b = (
                window_values(runs, g, ours, metric, cfg.windows),
                window_values(runs, g, ref, metric, cfg.windows),
            )
            both = np.isfinite(a) & np.isfinite(b)  # e.g. a window without 32+ GPU jobs
            return paired(a[both], b[both])

        alloc, good = pair("alloc_pct"), pair("goodput_pct")
        wait, big = pair("wait_p95_s"), pair("wait_p95_s_32p_censored")
        lost = float(np.nanmean(window_values(runs, g, ours, "gpu_hours_lost", cfg.windows)))
        n = len(cfg.windows)
        lines.append(
            f"- **{g:g}x**: {ours} instead of {ref} (the best placement-only baseline) changes allocation by "
            f"{_ci(alloc, 'pp')} (better on {alloc.wins} of {n} windows, worse on {alloc.losses}), goodput "
            f"net of moves by {_ci(good, 'pp')}, the p95 wait of the jobs that started by {_ci(wait, 's', 0)} and the p95 wait of "
            f"32+ GPU jobs (pending ones counted) by {_ci(big, 's', 0)}; its moves lose {lost:,.1f} GPU-hours "
            "per window."
        )
    return [*lines, ""]


def markdown(runs: list[Run2], plan: ComparePlan, jobs: int, wall_s: float) -> str:
    cfg = plan.suite
    w0, w1 = plan.windows[0], plan.windows[-1]
    where = (
        f"topology file {plan.topology_file}"
        if plan.topology_file is not None
        else f"`{cfg.topology}` of {plan.nodes} nodes"
        + (f" (leaf groups of {cfg.leaf_nodes})" if cfg.topology == "superpod" else "")
    )
    constraint = (
        "the trace's own"
        if plan.gang_constraint == "keep"
        else f"`{plan.gang_constraint}` for multi-node gangs"
    )
    lines = [
        f"# Your trace: {plan.trace.name}",
        "",
        f"{jobs:,} jobs; {len(plan.windows)} windows of {w0.length_s / 3600:g} h ({w0.name} .. {w1.name}, "
        f"after {plan.warmup_s / 3600:g} h of warm-up); cluster: {where}; constraints: {constraint}; growth "
        f"{', '.join(f'{g:g}x' for g in cfg.loads)} (arrivals that much faster, durations kept); variants "
        f"{', '.join(cfg.variants)}.  Differences are paired by window, 95 % CIs across windows.  Wall "
        f"time {wall_s / 60:.1f} min.",
        "",
        *verdict_lines(runs, plan),
    ]
    for g in cfg.loads:
        lines += load_sections(runs, cfg, g, title="Growth")
    return "\n".join(lines) + "\n"


def write_compare_report(
    runs: list[Run2], plan: ComparePlan, jobs: int, wall_s: float, folder: Path
) -> list[Path]:
    """``report.md``, ``runs.csv`` and ``charts/`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "report.md"
    with atomic_write(report) as f:
        f.write(markdown(runs, plan, jobs, wall_s))
    return [report, write_csv(runs, folder / "runs.csv"), *write_charts(runs, plan.suite, folder / "charts")]
