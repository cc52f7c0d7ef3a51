"""Suite 3's report: per study, every variant paired to the study's reference by (window, seed)
with 95 % CIs (Student t over the pairs), the issue's bars, a chart per study and ``runs.csv``.

The bars (docs/suite3.md), each computed on the runs of this report only, their thresholds the
fields of :class:`~gpudefrag.experiments.suite3.config.Acceptance3` (defaults in brackets):

* preemption: ``ours`` loses at least ``preemption_min_cut`` (30 %) fewer GPU-hours to
  preemption (work thrown away plus the victims' restarts) than ``kube`` (total over the runs;
  the paired CI of the per-run difference is shown) while the production class's p95 wait (mean
  over runs) stays within ``production_wait_max_ratio`` (1.05) of ``kube``'s;
* spares: the pooled variant named by :attr:`Suite3Config.pooled_variant` (chosen on the tuning
  windows, never by the runs being judged) reaches at least ``spares_min_gain_pp`` (+5 pp)
  goodput over ``dedicated`` with the CI above 0, and its p95 restart time of failed gangs (mean
  over the (window, seed) pairs where both variants had one) is no worse than ``dedicated``'s;
* elastic: ``elastic`` serves the jobs with fewer node-hours than ``fixed-peak`` (mean paired
  difference and CI below 0), with as many or fewer jobs unserved at the end (never started
  although submitted at least a tick plus the provisioning delay before the end; this test
  replaced "pending at the end" after the confirmation windows had been run, see
  ``docs/suite3.md``);
* time: the whole suite within ``wall_max_s`` (45 minutes).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.charts import save_png
from gpudefrag.experiments.common.checks import Check, checks_table
from gpudefrag.experiments.common.runs_csv import write_runs_csv
from gpudefrag.experiments.common.stats import paired
from gpudefrag.experiments.suite3.config import STUDIES, Suite3Config, variant
from gpudefrag.experiments.suite3.suite import Run3

__all__ = ["bars", "markdown", "write_report"]

STUDY_METRICS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "preemption": (
        ("lost_preemption_gpu_h", "lost to preemption GPU-h", 1),
        ("restart_preemption_gpu_h", "of which restarts GPU-h", 1),
        ("lost_migration_gpu_h", "lost to moves GPU-h", 1),
        ("preempted_jobs", "jobs killed", 1),
        ("moves", "jobs moved", 1),
        ("preemption_waits", "waits for checkpoints", 1),
        ("wait_p95_s_production", "p95 wait production s", 0),
        ("wait_p95_s_research", "p95 wait research s", 0),
        ("wait_p95_s_best-effort", "p95 wait best-effort s", 0),
        ("goodput_pct", "goodput %", 2),
        ("alloc_pct", "alloc %", 2),
        ("victim_p99_ms", "victim p99 ms", 1),
    ),
    "spares": (
        ("goodput_pct", "goodput %", 2),
        ("alloc_pct", "alloc %", 2),
        ("restart_gang_p50_s", "gang restart p50 s", 0),
        ("restart_gang_p95_s", "gang restart p95 s", 0),
        ("restart_all_p95_s", "restart p95 s (all)", 0),
        ("lost_failure_gpu_h", "lost to failures GPU-h", 1),
        ("lost_preemption_gpu_h", "lost to preemption GPU-h", 1),
        ("spare_evictions", "spare evictions", 1),
        ("wait_p95_s_production", "p95 wait production s", 0),
        ("pending_at_end", "pending at end", 1),
    ),
    "elastic": (
        ("node_hours", "node-hours", 0),
        ("goodput_pct", "goodput %", 2),
        ("alloc_pct", "alloc %", 2),
        ("wait_p95_s_production", "p95 wait production s", 0),
        ("wait_p95_s_research", "p95 wait research s", 0),
        ("pending_at_end", "pending at end", 1),
        ("unserved_at_end", "unserved at end", 1),
        ("lost_migration_gpu_h", "lost to moves GPU-h", 1),
        ("nodes_powered_on", "power-ons", 1),
        ("drains", "drains", 1),
    ),
}


def _pairs(runs: list[Run3]) -> list[tuple[str, int]]:
    return sorted({(r.window, r.seed) for r in runs})


def values(runs: list[Run3], name: str, metric: str) -> np.ndarray:
    """One value per (window, seed) pair, in pair order (NaN where the run lacks it)."""
    by = {(r.window, r.seed): r.metrics.get(metric, math.nan) for r in runs if r.variant == name}
    return np.array([by.get(p, math.nan) for p in _pairs(runs)], dtype=np.float64)


def _nanmean(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else math.nan


def _common_means(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Means of ``a`` and ``b`` over the pairs where both have a value."""
    both = np.isfinite(a) & np.isfinite(b)
    if not both.any():
        return math.nan, math.nan
    return float(a[both].mean()), float(b[both].mean())


def _fmt(x: float, digits: int) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:,.{digits}f}"


def bars(runs: list[Run3], cfg: Suite3Config, wall_s: float) -> list[Check]:
    """The module docstring's bars, thresholds from ``cfg.acceptance``, for the variants that ran."""
    limits = cfg.acceptance
    ran = {r.variant for r in runs}
    out: list[Check] = []
    if {"ours", "kube"} <= ran:
        ours, kube = (
            values(runs, "ours", "lost_preemption_gpu_h"),
            values(runs, "kube", "lost_preemption_gpu_h"),
        )
        total_o, total_k = float(np.nansum(ours)), float(np.nansum(kube))
        cut = 1.0 - total_o / total_k if total_k > 0 else math.nan
        d = paired(ours, kube).diff
        wo, wk = _common_means(
            values(runs, "ours", "wait_p95_s_production"), values(runs, "kube", "wait_p95_s_production")
        )
        wait_ok = wo <= limits.production_wait_max_ratio * wk
        out.append(
            Check(
                f"checkpoint-aware preemption loses >= {100 * limits.preemption_min_cut:g} % fewer GPU-h than kube "
                f"default, production p95 wait within {100 * (limits.production_wait_max_ratio - 1):g} %",
                bool(cut >= limits.preemption_min_cut and wait_ok),
                f"GPU-h lost to preemption {total_o:,.1f} vs {total_k:,.1f} ({100 * cut:+.1f} % fewer; per run "
                f"{d.mean:+.2f} [{d.low:+.2f}, {d.high:+.2f}]); production p95 wait {wo:,.0f} s vs {wk:,.0f} s",
            )
        )
    if cfg.pooled_variant in ran and "dedicated" in ran:
        best = cfg.pooled_variant
        d = paired(values(runs, best, "goodput_pct"), values(runs, "dedicated", "goodput_pct")).diff
        rb, rd = _common_means(
            values(runs, best, "restart_gang_p95_s"), values(runs, "dedicated", "restart_gang_p95_s")
        )
        restart_ok = not math.isfinite(rb) or rb <= rd  # NaN: no (window, seed) had a failed gang in both
        out.append(
            Check(
                f"pooled reserve + best-effort backfill >= {limits.spares_min_gain_pp:+g} pp goodput over the "
                f"dedicated {100 * cfg.spare_fraction:g} % reserve, failed-gang p95 restart no worse",
                bool(d.mean >= limits.spares_min_gain_pp and d.low > 0 and restart_ok),
                f"{best}: {d.mean:+.2f} pp [{d.low:+.2f}, {d.high:+.2f}]; failed-gang p95 restart "
                f"{_fmt(rb, 0)} s vs {_fmt(rd, 0)} s",
            )
        )
    if {"elastic", "fixed-peak"} <= ran:
        d = paired(values(runs, "elastic", "node_hours"), values(runs, "fixed-peak", "node_hours")).diff
        ue = _nanmean(values(runs, "elastic", "unserved_at_end"))
        uf = _nanmean(values(runs, "fixed-peak", "unserved_at_end"))
        fixed = _nanmean(values(runs, "fixed-peak", "node_hours"))
        out.append(
            Check(
                "elastic mode serves the same jobs with fewer node-hours than a fixed cluster sized for the peak",
                bool(d.high < 0 and ue <= uf),
                f"{d.mean:+,.0f} node-hours per run [{d.low:+,.0f}, {d.high:+,.0f}] of {fixed:,.0f} "
                f"({100 * d.mean / fixed:+.1f} %); unserved at end {ue:.2f} vs {uf:.2f} per run",
            )
        )
    cap_s = limits.wall_max_s
    out.append(
        Check(f"the suite within {cap_s / 60:g} minutes on 2 cores", wall_s <= cap_s, f"{wall_s:,.0f} s")
    )
    return out


def _study_table(runs: list[Run3], study: str) -> list[str]:
    ref = STUDIES[study]
    names = [v for v in dict.fromkeys(r.variant for r in runs) if variant(v).study == study]
    if not names:
        return []
    lines = [f"### {study} (reference: {ref})", ""]
    metrics = STUDY_METRICS[study]
    lines.append("| variant | " + " | ".join(m[1] for m in metrics) + " |")
    lines.append("|---" * (len(metrics) + 1) + "|")
    for v in names:
        cells = [_fmt(_nanmean(values(runs, v, m)), digits) for m, _, digits in metrics]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    if ref in names:
        lines += ["", f"Paired to {ref}, mean [95 % CI] over (window, seed) pairs:", ""]
        lines.append("| variant | " + " | ".join(m[1] for m in metrics) + " |")
        lines.append("|---" * (len(metrics) + 1) + "|")
        for v in names:
            if v == ref:
                continue
            cells = []
            for m, _, digits in metrics:
                a, b = values(runs, v, m), values(runs, ref, m)
                ok = np.isfinite(a) & np.isfinite(b)
                if ok.sum() < 1:
                    cells.append("n/a")
                    continue
                d = paired(a[ok], b[ok]).diff
                cells.append(f"{d.mean:+,.{digits}f} [{d.low:+,.{digits}f}, {d.high:+,.{digits}f}]")
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def markdown(runs: list[Run3], cfg: Suite3Config, wall_s: float) -> str:
    nodes = {(r.window, variant(r.variant).peak_sized): r.nodes for r in runs}
    lines = [
        f"# Suite 3: failures, spares, preemption, elastic nodes ({cfg.set_name} windows)",
        "",
        f"Windows: {', '.join(cfg.windows)}; seeds {', '.join(map(str, cfg.seeds))}; load {cfg.load:g}; "
        f"classes production/research/best-effort {cfg.class_shares}; checkpoints every "
        f"{cfg.checkpoint_interval_s:g} s, restart {cfg.restart_s:g} s; failures at "
        f"{cfg.failures.node_rate_per_h * cfg.failures.scale:.3g} per node-hour (Llama 3), x{cfg.stress_scale:g} "
        f"in the spare study; repairs lognormal, median {cfg.failures.repair_median_s:g} s; spares "
        f"{100 * cfg.spare_fraction:g} % of the nodes; under ours a blocked research job may wait "
        f"{cfg.checkpoint_wait_s:g} s for its victims' checkpoints.",
        "",
        "Nodes per window (load-1.0 size / peak size): "
        + ", ".join(
            f"{w} {nodes.get((w, False), '-')}/{nodes.get((w, True), '-')}"
            for w in dict.fromkeys(cfg.windows)
        )
        + f"; elastic mode may power on {100 * cfg.burst_fraction:g} % more (standby nodes, "
        "off at the start; capacity shares count the peak nodes only).",
        "",
    ]
    lines += checks_table(bars(runs, cfg, wall_s), heading="## Bars", measured="figures")
    lines += ["", "## Studies", ""]
    for study in STUDIES:
        lines += _study_table(runs, study)
    lines += [f"Whole suite: {wall_s:,.0f} s wall.", ""]
    return "\n".join(lines)


def write_csv(runs: list[Run3], path: Path) -> Path:
    rows = [((r.window, r.seed, r.variant, r.nodes, r.event_hash), r.metrics) for r in runs]
    return write_runs_csv(path, ("window", "seed", "variant", "nodes", "event_hash"), rows)


def write_charts(runs: list[Run3], folder: Path) -> list[Path]:
    """One PNG per study: each metric's mean over the pairs per variant, as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for study, metrics in STUDY_METRICS.items():
        names = [v for v in dict.fromkeys(r.variant for r in runs) if variant(v).study == study]
        if not names:
            continue
        cols = 3
        rows = math.ceil(len(metrics) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(13, 3.2 * rows), squeeze=False)
        for ax, (m, label, _) in zip(axes.flat, metrics):
            ax.bar(names, [_nanmean(values(runs, v, m)) for v in names], color="#3a7dc9")
            ax.set_title(label, fontsize=9)
            ax.tick_params(axis="x", rotation=25, labelsize=7)
        for ax in list(axes.flat)[len(metrics) :]:
            ax.axis("off")
        fig.suptitle(f"suite 3, {study} study (mean over window x seed pairs)")
        out.append(save_png(fig, folder / f"{study}.png"))
    return out


def write_report(runs: list[Run3], cfg: Suite3Config, wall_s: float, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / "report.md"
    with atomic_write(report) as f:
        f.write(markdown(runs, cfg, wall_s))
    return [report, write_csv(runs, folder / "runs.csv"), *write_charts(runs, folder / "charts")]
