"""Suite 1b report: tidy CSV, Markdown with paired statistics and the suite's acceptance checks,
PNG charts."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.environment import environment_lines
from gpudefrag.experiments.common.stats import mean_ci
from gpudefrag.experiments.suite1b import acceptance as acceptance1b
from gpudefrag.experiments.suite1b.acceptance import CONTROL, paired_to_control
from gpudefrag.experiments.suite1b.charts import (
    sweep_restarts,
    tradeoff_slope,
    write_chart,
    write_tradeoff_chart,
)
from gpudefrag.experiments.suite1b.noise import defrag_power_lines, noise_floor_lines
from gpudefrag.experiments.suite1b.pool import write_settings
from gpudefrag.experiments.suite1b.suite import METRICS, SOLVER_BATCH_PODS, Run1b, Suite1bConfig
from gpudefrag.experiments.suite1b.suite import select_runs as _select

TRADEOFF_PNG = "suite1b-tradeoff.png"


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


def _paired_cell(
    runs: list[Run1b],
    variant: str,
    load: float,
    restart_s: float,
    metric: str,
    digits: int = 2,
    control_restart_s: float | None = None,
) -> str:
    p = paired_to_control(runs, variant, load, restart_s, metric, control_restart_s)
    if p is None:
        return "n/a"
    return f"{p.diff.mean:+.{digits}f} [{p.diff.low:+.{digits}f}, {p.diff.high:+.{digits}f}]"


def _small_budget(config: Suite1bConfig) -> str:
    if config.small_pods_per_tick <= 0:
        return "pods of one GPU or less share that budget"
    return (
        f"plus {config.small_plans_per_tick} plan(s) from {config.small_pods_per_tick} tries "
        f"for pods of one GPU or less"
    )


def _headroom(config: Suite1bConfig) -> str:
    if config.headroom_fraction <= 0:
        return "no headroom gate"
    return (
        f"pods of 2+ GPUs planned for only while {100 * config.headroom_fraction:g} % of the "
        f"GPUs would stay free with them placed"
    )


def _runtimes(config: Suite1bConfig) -> str:
    if config.runtime_estimates == "history":
        return "run times estimated from the workload's run-time distribution"
    return "each pod's true run time known"


def _solver(config: Suite1bConfig) -> str:
    cfg = config.solver
    first = f"a session's first batch of up to {SOLVER_BATCH_PODS} pods goes to the placer"
    lone = (
        f"{first}, a lone pod too"
        if cfg.min_solver_batch <= 1
        else f"{first} if it has {cfg.min_solver_batch}+ pods"
    )
    protect = (
        f"every batch keeps off the node closest to fitting each of the first "
        f"{cfg.protect_blocked} blocked pod(s) of {cfg.protect_min_gpus}+ GPUs while it fits "
        f"elsewhere"
        if cfg.protect_blocked > 0
        else "no node protected for blocked pods"
    )
    return f"{lone}, {protect}"


PLAN_OUTCOMES = (
    ("reservations_fulfilled", "fulfilled"),
    ("reservations_bound_elsewhere", "bound elsewhere first"),
    ("reservation_expiries", "expired"),
    ("reservations_released", "aborted"),
)
"""How an executed plan ended: the reservation it made for its blocked pod, by how it ended."""


def _plan_outcome_lines(runs: list[Run1b], config: Suite1bConfig, load: float) -> list[str]:
    """Per defrag variant at ``load``: plans executed (one reservation each) and how they ended,
    mean per run; the rest were still open at the horizon."""
    rows = []
    for v in config.variants:
        rs = _select(runs, v, load, config.restart_s)
        made = float(np.mean([r.metrics["reservations_made"] for r in rs])) if rs else 0.0
        if made <= 0:
            continue
        ends = [float(np.mean([r.metrics[k] for r in rs])) for k, _ in PLAN_OUTCOMES]
        cells = [f"{e:.1f} ({100 * e / made:.0f} %)" for e in ends]
        rows.append(f"| {v} | {made:.1f} | {' | '.join(cells)} | {made - sum(ends):.1f} |")
    if not rows:
        return []
    head = " | ".join(label for _, label in PLAN_OUTCOMES)
    return [
        "",
        "How executed plans ended (mean per run; each plan reserves the node it frees for its blocked pod):",
        "",
        f"| variant | plans | {head} | open at the horizon |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]


def stops_moving_line(runs: list[Run1b], config: Suite1bConfig, variant: str) -> str | None:
    """Where ``variant`` stops moving in the sweep: the shortest sweep restart time from which
    on (it and every longer one) it made no migration on average, or that it still moves at the
    longest; ``None`` if it was not swept."""
    restarts = sweep_restarts(runs, config, variant)
    if not restarts:
        return None
    moves = [
        np.mean([x.metrics["migrations_executed"] for x in _select(runs, variant, config.sweep_load, r)])
        for r in restarts
    ]
    moving = [k for k, m in enumerate(moves) if m > 0]
    if moving and moving[-1] == len(restarts) - 1:
        plans, _ = acceptance1b.plans_and_fulfilled_share(runs, variant, config.sweep_load, restarts[-1])
        return f"{variant} still moves at {restarts[-1]:g} s ({plans:.1f} plans per run)"
    if not moving:
        return f"{variant} made no migration at any restart time of the sweep"
    return f"{variant} stops moving at {restarts[moving[-1] + 1]:g} s (no migration from there on)"


def _sweep_lines(runs: list[Run1b], config: Suite1bConfig) -> list[str]:
    """The restart-time sweep: per sweep variant and restart time, its differences to FGD (FGD
    at the main restart time) and its plans, then where each variant stops moving."""
    control = _select(runs, CONTROL, config.sweep_load, config.restart_s)
    swept = {v: sweep_restarts(runs, config, v) for v in dict.fromkeys(config.sweep_variants)}
    if not control or not any(swept.values()):
        return []
    lines = [
        f"## Restart-time sweep (load {config.sweep_load:g})",
        "",
        f"Paired differences to FGD (FGD at restart {config.restart_s:g} s; it never moves a pod), "
        "mean [95 % CI]; migrations, GPU-h lost and plans executed are means per run, the fulfilled "
        "share is of all plans executed over the seeds.",
        "",
        "| variant | restart s | GPU alloc minus FGD pp | useful alloc minus FGD pp | migrations | GPU-h lost | "
        "wait p95 minus FGD s | plans executed | fulfilled share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v, restarts in swept.items():
        for rs_s in restarts:
            rs = _select(runs, v, config.sweep_load, rs_s)
            alloc_cell, useful_cell, wait_cell = (
                _paired_cell(runs, v, config.sweep_load, rs_s, m, d, control_restart_s=config.restart_s)
                for m, d in (("gpu_alloc_pct", 2), ("goodput_pct", 2), ("wait_p95_s", 0))
            )
            plans, share = acceptance1b.plans_and_fulfilled_share(runs, v, config.sweep_load, rs_s)
            share_cell = "n/a" if share is None else f"{100 * share:.0f} %"
            lines.append(
                f"| {v} | {rs_s:g} | {alloc_cell} | {useful_cell} | "
                f"{np.mean([r.metrics['migrations_executed'] for r in rs]):.0f} | "
                f"{np.mean([r.metrics['gpu_hours_lost'] for r in rs]):.1f} | {wait_cell} | "
                f"{plans:.1f} | {share_cell} |"
            )
    lines.append("")
    lines += [f"- {line}" for v in swept if (line := stops_moving_line(runs, config, v)) is not None]
    return lines + [""]


def markdown(runs: list[Run1b], config: Suite1bConfig, wall_s: float, title: str) -> str:
    seeds = sorted({r.seed for r in runs})
    lines = [
        f"# Suite 1b: {title}",
        "",
        f"Seeds {', '.join(map(str, seeds))}; {config.n_nodes} openb GPU nodes sampled per seed; "
        f"{config.horizon_h:g} simulated hours per run, the first quarter excluded as warm-up; "
        f"restart {config.restart_s:g} s, eviction grace {config.eviction_grace_s:g} s; defrag: a tick every {config.tick_interval_s:g} s, "
        f"per tick up to {config.plans_per_tick} plan(s) of at most {config.planner.max_moves} moves "
        f"({_small_budget(config)}; {_headroom(config)}), "
        f"margin {config.planner.margin:g}, queue-harm weight {config.planner.harm_weight:g}, "
        f"{_runtimes(config)}; "
        f"solver: {_solver(config)}.  "
        f"Whole suite: {wall_s:.0f} s wall.",
        "",
    ]
    lines += environment_lines(["openb_pod_list_default", "openb_node_list_gpu_node"]) + [""]
    for load in config.loads:
        lines += [
            f"## Offered load {load:g}",
            "",
            "| variant | GPU alloc % | idle % on free / shared GPUs | wait p50 / p95 / p99 s | "
            "pending at end | stranded 8-GPU | migrations | GPU-h lost | decision p99 ms | "
            "GPU-h to 2+ GPU pods / others |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for v in config.variants:
            rs = _select(runs, v, load, config.restart_s)
            if not rs:
                continue
            m = {k: np.mean([r.metrics[k] for r in rs]) for k in METRICS}
            alloc = mean_ci([r.metrics["gpu_alloc_pct"] for r in rs])
            lines.append(
                f"| {v} | {alloc.fmt()} | {m['gpu_idle_whole_pct']:.1f} / {m['gpu_idle_shared_pct']:.1f} | "
                f"{m['wait_p50_s']:.0f} / {m['wait_p95_s']:.0f} / "
                f"{m['wait_p99_s']:.0f} | {m['pending_at_end']:.1f} | {m['stranded_8gpu']:.1f} of "
                f"{m['eight_gpu_arrived']:.0f} | {m['migrations_executed']:.0f} | {m['gpu_hours_lost']:.1f} | "
                f"{1000 * m['decision_latency_p99_s']:.0f} | "
                f"{m['gpu_hours_multi_gpu_pods']:.0f} / {m['gpu_hours_other_pods']:.0f} |"
            )
        control = _select(runs, CONTROL, load, config.restart_s)
        if control:
            lines += [
                "",
                "Paired difference to FGD, mean [95 % CI]:",
                "",
                "| variant | GPU alloc pp | useful alloc pp | wait p95 s | stranded 8-GPU | "
                "seeds won / lost (alloc) |",
                "|---|---|---|---|---|---|",
            ]
            for v in config.variants:
                p = (
                    None
                    if v == CONTROL
                    else paired_to_control(runs, v, load, config.restart_s, "gpu_alloc_pct")
                )
                if p is None:  # FGD itself, or a variant not run with FGD at this load
                    continue
                cells = [
                    _paired_cell(runs, v, load, config.restart_s, m, d)
                    for m, d in (
                        ("gpu_alloc_pct", 2),
                        ("goodput_pct", 2),
                        ("wait_p95_s", 0),
                        ("stranded_8gpu", 1),
                    )
                ]
                lines.append(f"| {v} | {' | '.join(cells)} | {p.wins} / {p.losses} |")
        lines += _plan_outcome_lines(runs, config, load)
        lines.append("")
    lines += _sweep_lines(runs, config)
    lines += acceptance1b.markdown_lines(runs, config)
    lines += noise_floor_lines(runs, config)
    lines += defrag_power_lines(runs, config)
    lines += [
        "![allocation](suite1b.png)",
        "",
        "Each point below is one seed: allocation gained over FGD against p95 wait added; the "
        "shaded box is where the defragmentation check asks a variant's mean to land "
        f"(load {config.acceptance.defrag_load:.1f}).",
        "",
        f"![trade-off]({TRADEOFF_PNG})",
        "",
    ]
    for load in config.loads:
        fit = tradeoff_slope(runs, config, load)
        if fit is not None:
            lines.append(
                f"- Load {load:.1f}: over every variant and seed, each +1 pp of allocation over FGD came "
                f"with {fit[0]:+.0f} s of p95 wait (least squares, R² {fit[1]:.2f}, {fit[2]} points)."
            )
    lines.append("")
    return "\n".join(lines)


def write_report(
    runs: list[Run1b], config: Suite1bConfig, folder: Path, wall_s: float, title: str
) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [
        write_csv(runs, folder / "results.csv"),
        write_chart(runs, config, folder / "suite1b.png"),
        write_tradeoff_chart(runs, config, folder / TRADEOFF_PNG),
    ]
    md = folder / "report.md"
    with atomic_write(md) as fh:
        fh.write(markdown(runs, config, wall_s, title))
    return paths + [md, write_settings(config, wall_s, folder)]
