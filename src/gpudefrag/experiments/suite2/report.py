"""Suite 2's report: paired tables by window with 95 % CIs, the issue's bars, charts and CSV.

Differences are paired by window (every variant of a (window, load) replays the same jobs on the
same cluster); intervals are Student-t over windows (:mod:`gpudefrag.experiments.common.stats`).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.charts import save_png
from gpudefrag.experiments.common.checks import Check, checks_table
from gpudefrag.experiments.common.runs_csv import write_runs_csv
from gpudefrag.experiments.common.stats import Paired, paired
from gpudefrag.experiments.suite2.config import BASELINES, PLACEMENT_BASELINES, Suite2Config
from gpudefrag.experiments.suite2.suite import Run2

__all__ = ["bars", "load_sections", "markdown", "window_values", "write_report"]

TABLE_METRICS = (
    ("alloc_pct", "alloc %", 2),
    ("goodput_pct", "goodput %", 2),
    ("wait_p50_s", "wait p50 s", 0),
    ("wait_p95_s", "wait p95 s", 0),
    ("wait_p95_s_32p", "p95 wait 32+ s", 0),
    ("wait_p95_s_32p_censored", "p95 wait 32+ incl. pending s", 0),
    ("jct_mean_s", "JCT mean s", 0),
    ("pending_at_end", "pending", 1),
    ("gang_one_leaf_pct", "gangs in 1 leaf %", 1),
    ("excess_spread_leaf", "excess leafs", 3),
    ("whole_nodes_mean", "whole free nodes", 2),
    ("stranded_gpus_mean", "stranded GPUs", 1),
    ("migrations", "moves", 1),
    ("gang_moves", "gang moves", 1),
    ("gpu_hours_lost", "GPU-h wasted", 1),
    ("decision_p99_ms", "decision p99 ms", 3),
    ("pass_p99_ms", "pass p99 ms", 2),
)
CHART_METRICS = (
    "alloc_pct",
    "goodput_pct",
    "wait_p95_s",
    "wait_p95_s_32p",
    "jct_mean_s",
    "pending_at_end",
    "gang_one_leaf_pct",
    "excess_spread_leaf",
    "whole_nodes_mean",
    "stranded_gpus_mean",
    "migrations",
    "gpu_hours_lost",
    "decision_p99_ms",
    "idle_reachable_pct",
)
IDLE_PARTS = (
    ("idle_empty_pct", "queue empty"),
    ("idle_blocked_pct", "every queued job asks more than is free"),
    ("idle_reachable_pct", "reachable: queued jobs fit by count"),
    ("idle_surplus_pct", "free beyond what the fitting jobs ask"),
)
IDLE_NOTE = (
    "Where the idle GPU time was (% of GPU time, mean over windows; the parts sum to 100 - alloc %).  "
    "Only the *reachable* part is room that queued jobs fit by count, so it bounds, to first order, "
    "what any placement or move-based defragmenter could add over that variant: the gap in a "
    "placement or defrag bar cannot exceed the reference's reachable idle "
    "(`gpudefrag.gangs.metrics`)."
)


def window_values(
    runs: list[Run2], load: float, variant: str, metric: str, windows: tuple[str, ...]
) -> np.ndarray:
    """``metric`` of ``variant`` at ``load``, one value per window in ``windows`` order (NaN where it did not run)."""
    by = {r.window: r.metrics.get(metric, math.nan) for r in runs if r.load == load and r.variant == variant}
    return np.array([by.get(w, math.nan) for w in windows], dtype=np.float64)


def _mean(x: np.ndarray) -> float:
    ok = x[np.isfinite(x)]
    return float(ok.mean()) if ok.size else math.nan


def _diff(
    runs: list[Run2], cfg: Suite2Config, load: float, a: str, b: str, metric: str, mb: str | None = None
):
    x = window_values(runs, load, a, metric, cfg.windows)
    y = window_values(runs, load, b, mb or metric, cfg.windows)
    return paired(x, y)


def best_placement_baseline(runs: list[Run2], cfg: Suite2Config, load: float) -> str | None:
    """The placement-only baseline with the highest mean allocation at ``load``."""
    have = [v for v in PLACEMENT_BASELINES if v in cfg.variants]
    if not have:
        return None
    return max(have, key=lambda v: _mean(window_values(runs, load, v, "alloc_pct", cfg.windows)))


def _reachable(runs: list[Run2], cfg: Suite2Config, load: float, ref: str) -> str:
    """The reference's reachable idle: to first order, the most the bar's variant could gain."""
    r = _mean(window_values(runs, load, ref, "idle_reachable_pct", cfg.windows))
    return f"; {ref} left {r:.2f} pp reachable idle" if math.isfinite(r) else ""


def _ci(p: Paired) -> str:
    return f"{p.diff.mean:+.2f} [{p.diff.low:+.2f}, {p.diff.high:+.2f}] pp"


def bars(runs: list[Run2], cfg: Suite2Config, wall_s: float) -> list[Check]:
    """The suite's acceptance checks on ``runs``, thresholds from ``cfg.acceptance``; a check
    whose variants did not run is left out."""
    limits = cfg.acceptance
    out: list[Check] = []
    v = set(cfg.variants)
    for load in cfg.loads:
        best = best_placement_baseline(runs, cfg, load)
        if "ours" in v and best:
            p = _diff(runs, cfg, load, "ours", best, "alloc_pct")
            if load > 1.0:
                need = limits.placement_min_gain_pp
                met = p.diff.mean >= need and p.diff.low > 0
                text = f"ours - best baseline ({best}) at {load}x >= {need:+g} pp, CI above 0"
            else:
                need = limits.placement_floor_pp
                met = p.diff.mean >= need
                text = f"ours - best baseline ({best}) at {load}x >= {need:+g} pp"
            out.append(Check(text, met, _ci(p) + _reachable(runs, cfg, load, best)))
    top = max(cfg.loads)
    if "ours+defrag" in v:
        for base, need in (
            ("volcano", limits.defrag_min_gain_vs_volcano_pp),
            ("kai+consolidate", limits.defrag_min_gain_vs_consolidate_pp),
        ):
            if base in v:
                p = _diff(runs, cfg, top, "ours+defrag", base, "alloc_pct")
                out.append(
                    Check(
                        f"ours+defrag - {base} at {top}x >= {need:+g} pp, CI above 0",
                        p.diff.mean >= need and p.diff.low > 0,
                        _ci(p) + _reachable(runs, cfg, top, base),
                    )
                )
        if "volcano" in v:
            need = limits.defrag_min_net_gain_vs_volcano_pp
            p = _diff(runs, cfg, top, "ours+defrag", "volcano", "goodput_pct")
            out.append(
                Check(
                    f"ours+defrag net of migration waste - volcano at {top}x >= {need:+g} pp",
                    p.diff.mean >= need,
                    _ci(p),
                )
            )
        bases = [b for b in BASELINES if b in v]
        if bases:
            # pending gangs count as waiting until the window's end: same jobs for every variant
            metric = "wait_p95_s_32p_censored"
            p95 = {b: _mean(window_values(runs, top, b, metric, cfg.windows)) for b in bases}
            best_b = min(p95, key=lambda b: p95[b])
            ours = _mean(window_values(runs, top, "ours+defrag", metric, cfg.windows))
            out.append(
                Check(
                    f"p95 wait of 32+ GPU gangs (pending ones until the window's end), ours+defrag <= best "
                    f"baseline ({best_b}) at {top}x",
                    ours <= p95[best_b],
                    f"{ours:,.0f} s vs {p95[best_b]:,.0f} s",
                )
            )
    ours_runs = [r for r in runs if r.variant.startswith("ours")]
    if ours_runs:
        worst = max(r.metrics["pass_p99_ms"] for r in ours_runs)
        cap = limits.pass_p99_max_ms
        out.append(
            Check(
                f"decision p99 <= {cap:g} ms per batch (scheduling pass), ours",
                worst <= cap,
                f"{worst:.2f} ms (worst run)",
            )
        )
    cap_s = limits.wall_max_s
    out.append(
        Check(f"whole suite <= {cap_s / 60:g} min on 2 cores", wall_s <= cap_s, f"{wall_s / 60:.1f} min")
    )
    return out


def _fmt(x: float, digits: int) -> str:
    return "–" if not math.isfinite(x) else f"{x:,.{digits}f}"


def _load_table(runs: list[Run2], cfg: Suite2Config, load: float) -> list[str]:
    head = "| variant | " + " | ".join(h for _, h, _ in TABLE_METRICS) + " |"
    lines = [head, "|---" + "|---:" * len(TABLE_METRICS) + "|"]
    for var in cfg.variants:
        cells = [_fmt(_mean(window_values(runs, load, var, m, cfg.windows)), d) for m, _, d in TABLE_METRICS]
        lines.append(f"| {var} | " + " | ".join(cells) + " |")
    return lines


def _paired_table(runs: list[Run2], cfg: Suite2Config, load: float) -> list[str]:
    refs: list[str] = [r for r in ("volcano", "kai+consolidate") if r in cfg.variants]
    best = best_placement_baseline(runs, cfg, load)
    if best and best not in refs:
        refs.append(best)
    lines = ["| variant | " + " | ".join(f"alloc vs {r} (pp)" for r in refs) + " | goodput vs volcano (pp) |"]
    lines.append("|---" + "|---:" * (len(refs) + 1) + "|")
    for var in cfg.variants:
        cells = []
        for r in refs:
            p = _diff(runs, cfg, load, var, r, "alloc_pct")
            cells.append(f"{p.diff.mean:+.2f} [{p.diff.low:+.2f}, {p.diff.high:+.2f}] ({p.wins}/{p.losses})")
        if "volcano" in cfg.variants:
            p = _diff(runs, cfg, load, var, "volcano", "goodput_pct")
            cells.append(f"{p.diff.mean:+.2f} [{p.diff.low:+.2f}, {p.diff.high:+.2f}]")
        else:
            cells.append("–")
        lines.append(f"| {var} | " + " | ".join(cells) + " |")
    return lines


def _wait_by_size(runs: list[Run2], cfg: Suite2Config, load: float) -> list[str]:
    sizes = ("1", "2", "4", "8", "16", "32p")
    lines = ["| variant | " + " | ".join(f"p50/p95/p99 {s} GPUs (h)" for s in sizes) + " |"]
    lines.append("|---" + "|---:" * len(sizes) + "|")
    for var in cfg.variants:
        cells = []
        for s in sizes:
            q = [
                _mean(window_values(runs, load, var, f"wait_p{p}_s_{s}", cfg.windows)) / 3600
                for p in (50, 95, 99)
            ]
            cells.append("/".join(_fmt(x, 1) for x in q))
        lines.append(f"| {var} | " + " | ".join(cells) + " |")
    return lines


def _idle_table(runs: list[Run2], cfg: Suite2Config, load: float) -> list[str]:
    lines = ["| variant | " + " | ".join(h for _, h in IDLE_PARTS) + " |"]
    lines.append("|---" + "|---:" * len(IDLE_PARTS) + "|")
    for var in cfg.variants:
        cells = [_fmt(_mean(window_values(runs, load, var, m, cfg.windows)), 2) for m, _ in IDLE_PARTS]
        lines.append(f"| {var} | " + " | ".join(cells) + " |")
    return lines


def markdown(runs: list[Run2], cfg: Suite2Config, wall_s: float, nodes: dict[str, int]) -> str:
    lines = [
        f"# Suite 2: gangs on a topology ({cfg.set_name} windows)",
        "",
        f"Windows: {', '.join(f'{w} ({nodes.get(w, 0)} nodes)' for w in cfg.windows)}.  "
        f"Loads {', '.join(f'{x:g}x' for x in cfg.loads)} (arrivals compressed, durations kept, cluster "
        f"sized for 1.0).  Topology `{cfg.topology}` (leaf groups of {cfg.leaf_nodes} nodes); multi-node "
        f"gangs carry `{cfg.gang_constraint}`.  Checkpoints every {cfg.checkpoint_interval_s:g} s, restart "
        f"{cfg.restart_s:g} s.  Means over {len(cfg.windows)} windows; paired differences with 95 % CIs "
        f"(wins/losses by window).  Wall time {wall_s / 60:.1f} min.",
        "",
    ]
    lines += checks_table(bars(runs, cfg, wall_s), heading="## Bars")
    for load in cfg.loads:
        lines += load_sections(runs, cfg, load)
    return "\n".join(lines) + "\n"


def load_sections(runs: list[Run2], cfg: Suite2Config, load: float, title: str = "Load") -> list[str]:
    """The report's section for one load: every variant's figures, the paired allocation
    differences, waits by job size and where the idle GPU time was."""
    lines = [
        "",
        f"## {title} {load:g}x",
        "",
        *_load_table(runs, cfg, load),
        "",
        "Paired allocation differences:",
        "",
    ]
    lines += _paired_table(runs, cfg, load)
    lines += ["", "Wait by job size (hours, mean over windows of each percentile):", ""]
    lines += _wait_by_size(runs, cfg, load)
    lines += ["", IDLE_NOTE, ""]
    lines += _idle_table(runs, cfg, load)
    return lines


def write_csv(runs: list[Run2], path: Path) -> Path:
    rows = [((r.window, r.load, r.variant, r.nodes, r.event_hash), r.metrics) for r in runs]
    return write_runs_csv(path, ("window", "load", "variant", "nodes", "event_hash"), rows)


def write_charts(runs: list[Run2], cfg: Suite2Config, folder: Path) -> list[Path]:
    """One PNG per metric: mean over windows per variant, one group of bars per load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    width = 0.8 / max(1, len(cfg.variants))
    for metric in CHART_METRICS:
        fig, ax = plt.subplots(figsize=(9, 4.6))
        shown: list[float] = []
        for i, var in enumerate(cfg.variants):
            means = [_mean(window_values(runs, load, var, metric, cfg.windows)) for load in cfg.loads]
            ax.bar(np.arange(len(cfg.loads)) + i * width, means, width, label=var)
            shown += [m for m in means if math.isfinite(m)]
        if shown and min(shown) > 0:  # zoom in: the differences are small next to the level
            lo, hi = min(shown), max(shown)
            pad = 0.15 * (hi - lo) or 0.05 * hi
            ax.set_ylim(max(0.0, lo - pad), hi + pad)
        ax.set_xticks(np.arange(len(cfg.loads)) + 0.4 - width / 2, [f"{x:g}x" for x in cfg.loads])
        ax.set_title(f"{metric} (mean over {len(cfg.windows)} {cfg.set_name} windows)")
        ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.1))
        out.append(save_png(fig, folder / f"{metric}.png"))
    return out


def read_csv(path: Path) -> list[Run2]:
    """The runs of a ``runs.csv`` written by :func:`write_csv` (to redraw charts)."""
    out = []
    with path.open() as f:
        for row in csv.DictReader(f):
            fixed = {k: row.pop(k) for k in ("window", "load", "variant", "nodes", "event_hash")}
            metrics = {k: float(v) for k, v in row.items() if v != ""}
            out.append(
                Run2(
                    fixed["window"],
                    float(fixed["load"]),
                    fixed["variant"],
                    int(fixed["nodes"]),
                    fixed["event_hash"],
                    metrics,
                )
            )
    return out


def write_report(runs: list[Run2], cfg: Suite2Config, wall_s: float, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    nodes = {r.window: r.nodes for r in runs}
    report = folder / "report.md"
    with atomic_write(report) as f:
        f.write(markdown(runs, cfg, wall_s, nodes))
    paths = [report, write_csv(runs, folder / "runs.csv")]
    paths += write_charts(runs, cfg, folder / "charts")
    return paths
