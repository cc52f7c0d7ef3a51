"""``gpudefrag sim``: one time-driven scenario of suite 1b, run on its own.

The run goes through :func:`~gpudefrag.experiments.suite1b.scenario.run_scenario`, as suite 1b's
:func:`~gpudefrag.experiments.suite1b.suite.run_one` does, on the configuration
:func:`~gpudefrag.experiments.suite1b.suite.build_config` gives both; so one (workload, seed, load,
variant, restart time, settings) has one event hash, here and in suite 1b's results.
The summary is a flat dict (field names carry their units) printed as a table or as JSON.
With a plans file, every executed plan is a CSV row (:data:`PLAN_COLUMNS`): when it was made,
the node it freed, its pod, how its reservation ended and when, where the pod bound and when.
"""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path
from typing import Any

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.eventlog import EventLogFile, check_output_file
from gpudefrag.experiments.suite1b.config import KNOWN_VARIANTS, MAX_LOAD, Suite1bConfig
from gpudefrag.experiments.suite1b.scenario import run_scenario
from gpudefrag.sim.results import TimedResult
from gpudefrag.workloads.synthetic import SyntheticWorkload

PLAN_COLUMNS = (
    "made_s",
    "node_freed",
    "pod_id",
    "pod_num_gpu",
    "pod_gpu_milli",
    "outcome",
    "ended_s",
    "bound_node",
    "pod_bound_s",
    "pod_wait_after_plan_s",
)
"""The plans file's columns.  ``outcome``: fulfilled, bound_elsewhere, expired, released, or
open at the horizon; ``bound_node`` is -1 and ``ended_s`` empty while it holds.  ``pod_bound_s``
is when the pod first bound (empty if it never did), wherever and whenever that was."""


def check_variant(variant: str) -> str:
    """``variant`` if it is one of suite 1b's variants, else a :class:`ConfigError`."""
    if variant not in KNOWN_VARIANTS:
        raise ConfigError(f"--variant {variant}: unknown (known: {', '.join(KNOWN_VARIANTS)})")
    return variant


def run_sim(
    config: Suite1bConfig,
    variant: str,
    load: float,
    seed: int,
    restart_s: float,
    settings: list[str] | tuple[str, ...] = (),
    events_path: Path | None = None,
    plans_path: Path | None = None,
) -> dict[str, Any]:
    """Run one scenario (writing its events to ``events_path`` and its executed plans to
    ``plans_path`` if given); its summary."""
    check_variant(variant)
    if not 0 < load <= MAX_LOAD:
        raise ConfigError(f"--load {load:g}: must be > 0 and at most {MAX_LOAD:g}")
    if plans_path is not None:
        check_output_file(plans_path, "--plans")
    started = time.perf_counter()
    if events_path is None:
        result, workload = run_scenario(config, variant, load, seed, restart_s)
        events_written = None
    else:
        with EventLogFile(events_path) as log:
            result, workload = run_scenario(config, variant, load, seed, restart_s, hook=log)
        events_written = log.count
    if plans_path is not None:
        write_plans(plans_path, result, workload)
    return {
        "workload": config.workload,
        "seed": seed,
        "load": load,
        "variant": variant,
        "horizon_h": config.horizon_h,
        "n_nodes": config.n_nodes,
        "restart_s": restart_s,
        "settings": list(settings),
        "gpu_alloc_pct": result.gpu_alloc_pct,
        "goodput_pct": result.goodput_pct,
        "wait_p50_s": result.wait_p50_s,
        "wait_p95_s": result.wait_p95_s,
        "pods_arrived": result.arrived,
        "pods_completed": result.completed,
        "pods_pending_at_end": result.pending_at_end,
        "migrations_executed": result.migrations_executed,
        "migrations_aborted": result.migrations_aborted,
        "reservations_made": result.reservations_made,
        "reservations_fulfilled": result.reservations_fulfilled,
        "events_processed": result.events_processed,
        "events_file": None if events_path is None else str(events_path),
        "events_written": events_written,
        "plans_file": None if plans_path is None else str(plans_path),
        "sim_wall_s": result.wall_s,
        "wall_s": time.perf_counter() - started,
        "event_hash": result.event_hash,
    }


def write_plans(path: Path, result: TimedResult, workload: SyntheticWorkload) -> None:
    """Every executed plan of ``result`` as a CSV row (:data:`PLAN_COLUMNS`), written whole or
    not at all."""

    def num(x: float) -> str:
        return "" if math.isnan(x) else repr(float(x))

    bound_s = result.first_bind_s
    try:
        with atomic_write(path) as fh:
            out = csv.writer(fh)
            out.writerow(PLAN_COLUMNS)
            for r in result.plans:
                pod_bound = math.nan if bound_s is None else float(bound_s[r.pod])
                out.writerow([
                    num(r.made_s), r.node, r.pod, int(workload.pods.num_gpu[r.pod]),
                    int(workload.pods.gpu_milli[r.pod]), r.outcome, num(r.ended_s), r.bound_node,
                    num(pod_bound), num(pod_bound - r.made_s),
                ])  # fmt: skip
    except OSError as exc:
        raise ConfigError(f"--plans {path}: cannot write ({exc.strerror or exc})") from None


def format_json(summary: dict[str, Any]) -> str:
    """The summary as one JSON object on one line."""
    return json.dumps(summary)


def format_table(summary: dict[str, Any]) -> str:
    """The summary as a two-column table, ending with the ``event_hash`` line."""
    s = summary
    rows = [
        (
            "scenario",
            f"{s['workload']}, seed {s['seed']}, load {s['load']:g}, {s['variant']}, "
            f"{s['horizon_h']:g} h on {s['n_nodes']} nodes, restart {s['restart_s']:g} s",
        ),
        ("settings", ", ".join(s["settings"]) or "suite 1b's"),
        ("GPU allocation %", f"{s['gpu_alloc_pct']:.2f}"),
        ("goodput %", f"{s['goodput_pct']:.2f}"),
        ("wait p50 / p95 s", f"{s['wait_p50_s']:.2f} / {s['wait_p95_s']:.2f}"),
        ("pods arrived", str(s["pods_arrived"])),
        ("pods completed", str(s["pods_completed"])),
        ("pods pending at end", str(s["pods_pending_at_end"])),
        ("migrations", f"{s['migrations_executed']} executed, {s['migrations_aborted']} aborted"),
        ("reservations", f"{s['reservations_made']} made, {s['reservations_fulfilled']} fulfilled"),
        ("events processed", str(s["events_processed"])),
    ]
    if s["events_file"] is not None:
        rows.append(("events file", f"{s['events_file']} ({s['events_written']} lines)"))
    if s["plans_file"] is not None:
        rows.append(("plans file", f"{s['plans_file']} ({s['reservations_made']} plans)"))
    rows += [
        ("wall s", f"{s['wall_s']:.2f} (simulation {s['sim_wall_s']:.2f})"),
        ("event_hash", s["event_hash"]),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
