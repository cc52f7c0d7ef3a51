"""``gpudefrag gang-sim``: one job-level scenario of suite 2 on your trace or a suite window.

Jobs come from a job-trace CSV (``--trace FILE``, see docs/job-trace-format.md) or from a suite
window (``--window itp04-w2 --load 1.25``); the topology from a preset sized by ``--nodes``
(``superpod`` or ``nvl72``) or from a TOML/YAML file (``--topology-file``).  What runs is one of
suite 2's variants (``--variant``) or a profile (``--config``: a shipped one's name or a TOML/YAML
file naming ``allocate.gangs`` and, optionally, ``defragment`` or ``consolidate``; docs/profiles.md).
It prints the figures suite 2 reports for one run (``--json``: one JSON object).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import LOAD, refuse
from gpudefrag.cli_suite2 import constraint_arg
from gpudefrag.errors import ConfigError
from gpudefrag.settings import value

__all__ = [
    "add_cluster_options",
    "add_gangsim_command",
    "cmd_gangsim",
    "constraint_or_keep",
    "gang_constraint_of",
]

SHOWN = (
    "alloc_pct",
    "goodput_pct",
    "jobs",
    "pending_at_end",
    "wait_p50_s",
    "wait_p95_s",
    "wait_p95_s_32p",
    "gang_one_leaf_pct",
    "migrations",
    "gang_moves",
    "gpu_hours_lost",
    "decision_p99_ms",
    "wall_s",
)


COUNTS = ("jobs", "pending_at_end", "migrations", "gang_moves")
"""Figures that are counts: printed as integers."""


def _jobs_and_window(args: argparse.Namespace, gpn: int) -> tuple[list, tuple[float, float], int | None]:
    from gpudefrag.workloads.jobtrace import load_job_trace
    from gpudefrag.workloads.suite_windows import suite_run

    if args.trace is not None:
        jobs = load_job_trace(args.trace)
        end = max(j.submit_s for j in jobs) + 1.0
        return jobs, (0.0, args.until_s or end), args.nodes
    run = suite_run(args.window, args.load, gpn)
    return run.jobs, run.measure, args.nodes or run.nodes


def gang_constraint_of(trace: Path | None, constraint: str | None) -> str:
    """The multi-node gangs' constraint: ``constraint`` when given; else the trace's own
    ``topology`` column when it has one (``keep``), else suite 2's ``preferred:leaf``."""
    if constraint is not None:
        return str(constraint)
    if trace is not None:
        from gpudefrag.workloads.jobtrace import job_trace_columns

        if "topology" in job_trace_columns(trace):
            return "keep"
    return "preferred:leaf"


def _check_modes(args: argparse.Namespace) -> None:
    if args.trace is not None:
        refuse(args, {"load": "--load"}, "only with --window (a trace's jobs arrive as listed)")
    else:
        refuse(args, {"until_s": "--until-s"}, "only with --trace (a window has its own measure)")
        args.load = 1.0 if args.load is None else args.load
    if args.topology_file is not None:
        refuse(
            args,
            {"nodes": "--nodes", "topology": "--topology"},
            "not with --topology-file (it lists the nodes)",
        )
    args.topology = args.topology or "superpod"


def cmd_gangsim(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.suite2.config import Suite2Config, make_variant
    from gpudefrag.experiments.suite2.suite import build_topology
    from gpudefrag.experiments.suite2.summary import summarise
    from gpudefrag.model.jobs import parse_constraint
    from gpudefrag.model.topology import load_topology
    from gpudefrag.profiles.jobs import job_actions
    from gpudefrag.sim.gang_sim import GangSimConfig, simulate

    _check_modes(args)
    topo_file = load_topology(args.topology_file) if args.topology_file else None
    gpn = topo_file.max_gpus_per_node if topo_file else (8 if args.topology == "superpod" else 4)
    jobs, measure, nodes = _jobs_and_window(args, gpn)
    gang_constraint = gang_constraint_of(args.trace, args.constraint)
    cfg = Suite2Config(
        windows=(),
        set_name="gang-sim",
        topology=args.topology,
        gang_constraint=gang_constraint if gang_constraint != "keep" else "none",
    )
    if gang_constraint != "keep":
        constraint = parse_constraint(gang_constraint)
        jobs = [replace(j, constraint=constraint) if j.gpus > gpn else j for j in jobs]
    if topo_file is not None:
        topo = topo_file
    else:
        if not nodes:
            raise ConfigError(
                "--nodes: needed with --trace and a preset topology (how many nodes the cluster has)"
            )
        topo = build_topology(cfg, nodes)
    for j in jobs:
        if j.constraint is not None:
            topo.level_index(j.constraint.level)  # unknown level -> ConfigError naming the levels
    if args.config is not None:
        policy, defrag = job_actions(args.config, jobs, cfg.restart_s)
    else:
        policy, defrag = make_variant(args.variant, jobs, gpn, cfg)
    sim_cfg = GangSimConfig(measure[0], measure[1], restart_s=cfg.restart_s, check_every_event=args.check)
    try:
        result = simulate(topo, jobs, policy, sim_cfg, defrag)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    m = summarise(result, topo)
    ran = f"profile {args.config.name}" if args.config is not None else args.variant
    out: dict[str, Any] = {"variant": ran, "nodes": topo.num_nodes, "constraint": gang_constraint}
    out["event_hash"] = result.event_hash
    # NaN (no job of a size class) is not JSON: reported as null
    out.update({k: (None if m[k] != m[k] else (int(m[k]) if k in COUNTS else m[k])) for k in SHOWN})
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:18s} {v:,.3f}" if isinstance(v, float) else f"{k:18s} {'–' if v is None else v}")
    return 0


def add_cluster_options(p: argparse.ArgumentParser, nodes_help: str) -> None:
    """``--topology`` (a preset), ``--topology-file`` (your nodes instead) and ``--nodes``."""
    p.add_argument(
        "--topology", choices=("superpod", "nvl72"), default=None, help="a preset (default superpod)"
    )
    p.add_argument(
        "--topology-file", type=Path, default=None, help="a TOML/YAML topology instead of a preset"
    )
    p.add_argument(
        "--nodes", type=value(Annotated[int, Interval(ge=1, le=1_000_000)]), default=None, help=nodes_help
    )


def constraint_or_keep(text: str) -> str:
    """``--constraint``: as suite 2 takes it, or ``keep`` (the trace's own)."""
    return "keep" if text.strip() == "keep" else constraint_arg(text)


def _window_name(text: str) -> str:
    from gpudefrag.workloads.suite_windows import window

    try:
        window(text.strip())
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def _variant_name(text: str) -> str:
    from gpudefrag.experiments.suite2.config import VARIANTS

    if text not in VARIANTS:
        raise argparse.ArgumentTypeError(f"unknown variant {text!r} (known: {', '.join(VARIANTS)})")
    return text


def _profile(text: str) -> Any:
    """``--config``: a profile the job simulator can run (allocate.gangs, at most one of
    defragment and consolidate); a bad one is a one-line usage error naming the file and field."""
    from gpudefrag.errors import InputError
    from gpudefrag.profiles.schema import profile_arg

    try:
        got = profile_arg(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if got.allocate.gangs is None:
        raise argparse.ArgumentTypeError(
            f"{text}: allocate.gangs: needed (a gang placer: volcano, ..., ours)"
        )
    beyond = [a for a in got.actions if a in ("preempt", "elastic")]
    if beyond:
        raise argparse.ArgumentTypeError(f"{text}: {', '.join(beyond)} run in suite 3, not in gang-sim")
    if got.runs("defragment") and got.runs("consolidate"):
        raise argparse.ArgumentTypeError(f"{text}: one of defragment and consolidate, not both")
    return got


def add_gangsim_command(sub: Any) -> None:
    p = sub.add_parser(
        "gang-sim",
        help="one job-level scenario of suite 2 (gangs on a topology) on a trace or a suite window",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", type=Path, default=None, help="job-trace CSV (docs/job-trace-format.md)")
    src.add_argument(
        "--window", type=_window_name, default=None, help="a suite window instead, e.g. itp04-w2"
    )
    p.add_argument(
        "--until-s",
        type=value(Annotated[float, Interval(gt=0, le=10 * 366 * 86_400)]),
        default=None,
        help="with --trace: end of the run in seconds of the trace (default: its last submit)",
    )
    p.add_argument("--load", type=LOAD, default=None, help="with --window: load 1.0, 1.25, 1.5 (default 1.0)")
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--variant",
        type=_variant_name,
        default="ours",
        help="volcano, kueue, kai, kai+consolidate, slurm, fgd, ours, ours-batch, ours+defrag (default ours)",
    )
    what.add_argument(
        "--config",
        type=_profile,
        default=None,
        metavar="PROFILE",
        help="a profile instead: a shipped one's name (suite2) or a TOML/YAML file (docs/profiles.md)",
    )
    add_cluster_options(p, "nodes of the preset (default: the window's size; needed with --trace)")
    p.add_argument(
        "--constraint",
        type=constraint_or_keep,
        default=None,
        help="multi-node gangs' constraint, e.g. required:leaf, or 'keep' the trace's (default: the "
        "trace's topology column when it has one, else preferred:leaf)",
    )
    p.add_argument("--check", action="store_true", help="check every invariant after every event")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_gangsim)
