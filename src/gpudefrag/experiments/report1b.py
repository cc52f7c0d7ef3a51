"""Suite 1b report: tidy CSV, Markdown with paired statistics, PNG charts."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from gpudefrag.experiments.atomic import atomic_write
from gpudefrag.experiments.environment import environment_lines
from gpudefrag.experiments.stats import mean_ci, paired
from gpudefrag.experiments.suite1b import METRICS, Run1b, Suite1bConfig

CONTROL = "fgd"


def _select(runs: list[Run1b], variant: str, load: float, restart_s: float) -> list[Run1b]:
    return sorted((r for r in runs if r.variant == variant and r.load == load and r.restart_s == restart_s),
                  key=lambda r: r.seed)


def write_csv(runs: list[Run1b], path: Path) -> Path:
    with atomic_write(path) as fh:
        out = csv.writer(fh)
        out.writerow(["variant", "load", "seed", "restart_s", "metric", "value"])
        for r in runs:
            for m in METRICS:
                out.writerow([r.variant, r.load, r.seed, r.restart_s, m, f"{r.metrics[m]:.6g}"])
            out.writerow([r.variant, r.load, r.seed, r.restart_s, "event_hash", r.event_hash])
            out.writerow([r.variant, r.load, r.seed, r.restart_s, "wall_s", f"{r.wall_s:.3f}"])
    return path


def _paired_cell(a: list[Run1b], b: list[Run1b], metric: str, digits: int = 2) -> str:
    p = paired([r.metrics[metric] for r in a], [r.metrics[metric] for r in b])
    return f"{p.diff.mean:+.{digits}f} [{p.diff.low:+.{digits}f}, {p.diff.high:+.{digits}f}]"


def _small_budget(config: Suite1bConfig) -> str:
    if config.small_pods_per_tick <= 0:
        return "pods of one GPU or less share that budget"
    return (f"plus {config.small_plans_per_tick} plan(s) from {config.small_pods_per_tick} tries "
            f"for pods of one GPU or less")


def markdown(runs: list[Run1b], config: Suite1bConfig, wall_s: float, title: str) -> str:
    seeds = sorted({r.seed for r in runs})
    lines = [f"# Suite 1b: {title}", "",
             f"Seeds {', '.join(map(str, seeds))}; {config.n_nodes} openb GPU nodes sampled per seed; "
             f"{config.horizon_h:g} simulated hours per run, the first quarter excluded as warm-up; "
             f"restart {config.restart_s:g} s, eviction grace 30 s; defrag: a tick every {config.tick_interval_s:g} s, "
             f"per tick up to {config.plans_per_tick} plan(s) of at most {config.planner.max_moves} moves "
             f"({_small_budget(config)}), "
             f"margin {config.planner.margin:g}, queue-harm weight {config.planner.harm_weight:g}; "
             f"solver: {'keeps every pod FGD places' if config.solver.keep_fgd_pods else 'may drop pods FGD places'}.  "
             f"Whole suite: {wall_s:.0f} s wall.", ""]
    lines += environment_lines(["openb_pod_list_default", "openb_node_list_gpu_node"]) + [""]
    for load in config.loads:
        lines += [f"## Offered load {load:g}", "",
                  "| variant | GPU alloc % | wait p50 / p95 / p99 s | pending at end | stranded 8-GPU | "
                  "migrations | GPU-h lost | decision p99 ms | GPU-h to 2+ GPU pods / others |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for v in config.variants:
            rs = _select(runs, v, load, config.restart_s)
            if not rs:
                continue
            m = {k: np.mean([r.metrics[k] for r in rs]) for k in METRICS}
            alloc = mean_ci([r.metrics["gpu_alloc_pct"] for r in rs])
            lines.append(f"| {v} | {alloc.fmt()} | {m['wait_p50_s']:.0f} / {m['wait_p95_s']:.0f} / "
                         f"{m['wait_p99_s']:.0f} | {m['pending_at_end']:.1f} | {m['stranded_8gpu']:.1f} of "
                         f"{m['eight_gpu_arrived']:.0f} | {m['migrations_executed']:.0f} | {m['gpu_hours_lost']:.1f} | "
                         f"{1000 * m['decision_latency_p99_s']:.0f} | "
                         f"{m['gpu_hours_multi_gpu_pods']:.0f} / {m['gpu_hours_other_pods']:.0f} |")
        control = _select(runs, CONTROL, load, config.restart_s)
        if control:
            lines += ["", "Paired difference to FGD, mean [95 % CI]:", "",
                      "| variant | GPU alloc pp | wait p95 s | stranded 8-GPU | seeds won / lost (alloc) |",
                      "|---|---|---|---|---|"]
            for v in config.variants:
                rs = _select(runs, v, load, config.restart_s)
                if v == CONTROL or not rs:
                    continue
                p = paired([r.metrics["gpu_alloc_pct"] for r in rs], [r.metrics["gpu_alloc_pct"] for r in control])
                lines.append(f"| {v} | {_paired_cell(rs, control, 'gpu_alloc_pct')} | "
                             f"{_paired_cell(rs, control, 'wait_p95_s', 0)} | "
                             f"{_paired_cell(rs, control, 'stranded_8gpu', 1)} | {p.wins} / {p.losses} |")
        lines.append("")
    sweep = sorted({r.restart_s for r in runs if r.variant == config.sweep_variant and r.load == config.sweep_load})
    control = _select(runs, CONTROL, config.sweep_load, config.restart_s)
    if len(sweep) > 1 and control:
        lines += [f"## Restart-time sweep ({config.sweep_variant}, load {config.sweep_load:g})", "",
                  "| restart s | GPU alloc minus FGD pp | migrations | GPU-h lost | wait p95 minus FGD s |",
                  "|---|---|---|---|---|"]
        for rs_s in sweep:
            rs = _select(runs, config.sweep_variant, config.sweep_load, rs_s)
            lines.append(f"| {rs_s:g} | {_paired_cell(rs, control, 'gpu_alloc_pct')} | "
                         f"{np.mean([r.metrics['migrations_executed'] for r in rs]):.0f} | "
                         f"{np.mean([r.metrics['gpu_hours_lost'] for r in rs]):.1f} | "
                         f"{_paired_cell(rs, control, 'wait_p95_s', 0)} |")
        lines.append("")
    lines += ["![allocation](suite1b.png)", ""]
    return "\n".join(lines)


def write_chart(runs: list[Run1b], config: Suite1bConfig, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    others = [v for v in config.variants if v != CONTROL]
    width = 0.8 / max(len(others), 1)
    for ax, metric, label in ((axes[0], "gpu_alloc_pct", "GPU allocation minus FGD (pp)"),
                              (axes[1], "wait_p95_s", "wait p95 minus FGD (s)")):
        for k, v in enumerate(others):
            means, errs = [], []
            for load in config.loads:
                rs, ctl = _select(runs, v, load, config.restart_s), _select(runs, CONTROL, load, config.restart_s)
                if not rs or not ctl:
                    means.append(np.nan)
                    errs.append(0)
                    continue
                p = paired([r.metrics[metric] for r in rs], [r.metrics[metric] for r in ctl])
                means.append(p.diff.mean)
                errs.append(p.diff.half_width)
            ax.bar(np.arange(len(config.loads)) + k * width, means, width, yerr=errs, capsize=3, label=v)
        ax.set_xticks(np.arange(len(config.loads)) + width * (len(others) - 1) / 2)
        ax.set_xticklabels([f"load {x:g}" for x in config.loads])
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    axes[0].set_title("Allocation vs FGD (paired, 95 % CI)")
    axes[1].set_title("p95 wait vs FGD (paired, 95 % CI)")
    sweep = sorted({r.restart_s for r in runs if r.variant == config.sweep_variant and r.load == config.sweep_load})
    ctl = _select(runs, CONTROL, config.sweep_load, config.restart_s)
    if sweep and ctl:
        diffs = [paired([r.metrics["gpu_alloc_pct"] for r in _select(runs, config.sweep_variant, config.sweep_load, s)],
                        [r.metrics["gpu_alloc_pct"] for r in ctl]).diff for s in sweep]
        axes[2].errorbar(sweep, [d.mean for d in diffs], yerr=[d.half_width for d in diffs], marker="o", capsize=3)
        axes[2].axhline(0, color="black", linewidth=0.8)
        axes[2].set_xscale("log")
        axes[2].set_xlabel("restart time (s)")
        axes[2].set_ylabel("allocation minus FGD (pp)")
        axes[2].set_title(f"When defrag stops paying ({config.sweep_variant}, load {config.sweep_load:g})")
    fig.tight_layout()
    tmp = path.with_suffix(".part.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def write_report(runs: list[Run1b], config: Suite1bConfig, folder: Path, wall_s: float, title: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [write_csv(runs, folder / "results.csv"), write_chart(runs, config, folder / "suite1b.png")]
    md = folder / "report.md"
    with atomic_write(md) as fh:
        fh.write(markdown(runs, config, wall_s, title))
    return paths + [md]
