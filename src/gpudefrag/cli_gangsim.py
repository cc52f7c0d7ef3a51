"""``gpudefrag gang-sim``: one job-level scenario of suite 2 on your trace or a suite window.

Jobs come from a job-trace CSV (``--trace FILE``, see docs/job-trace-format.md) or from a suite
window (``--window itp04-w2 --load 1.25``); the topology from a preset sized by ``--nodes``
(``superpod`` or ``nvl72``) or from a TOML/YAML file (``--topology-file``).  It prints the
figures suite 2 reports for one run (``--json``: one JSON object).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from gpudefrag.errors import ConfigError

__all__ = ["add_gangsim_command", "cmd_gangsim"]

SHOWN = (
    "alloc_pct",
    "useful_pct",
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


def _jobs_and_window(args: argparse.Namespace, gpn: int):
    from gpudefrag.workloads.jobtrace import load_job_trace
    from gpudefrag.workloads.windows import suite_run

    if args.trace is not None:
        if args.window is not None:
            raise ConfigError("give --trace or --window, not both")
        jobs = load_job_trace(args.trace)
        end = max(j.submit_s for j in jobs) + 1.0
        return jobs, (0.0, args.until_s or end), args.nodes
    if args.window is None:
        raise ConfigError("give --trace FILE or --window NAME")
    run = suite_run(args.window, args.load, gpn)
    return run.jobs, run.measure, args.nodes or run.nodes


def cmd_gangsim(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.config2 import Suite2Config, make_variant
    from gpudefrag.experiments.suite2 import build_topology
    from gpudefrag.experiments.summary2 import summarise
    from gpudefrag.gangs.simulator import GangSimConfig, simulate
    from gpudefrag.model.jobs import parse_constraint
    from gpudefrag.model.topology import load_topology

    topo_file = load_topology(args.topology_file) if args.topology_file else None
    gpn = topo_file.max_gpus_per_node if topo_file else (8 if args.topology == "superpod" else 4)
    jobs, measure, nodes = _jobs_and_window(args, gpn)
    cfg = Suite2Config(
        windows=(), set_name="gang-sim", topology=args.topology, gang_constraint=args.constraint
    )
    if args.constraint != "keep":
        constraint = parse_constraint(args.constraint)
        jobs = [replace(j, constraint=constraint) if j.gpus > gpn else j for j in jobs]
    if topo_file is not None:
        topo = topo_file
    else:
        if not nodes:
            raise ConfigError("--nodes is needed with --trace and a preset topology")
        topo = build_topology(cfg, nodes)
    for j in jobs:
        if j.constraint is not None:
            topo.level_index(j.constraint.level)  # unknown level -> ConfigError naming the levels
    policy, defrag = make_variant(args.variant, jobs, gpn, cfg)
    sim_cfg = GangSimConfig(measure[0], measure[1], restart_s=cfg.restart_s, check_every_event=args.check)
    try:
        result = simulate(topo, jobs, policy, sim_cfg, defrag)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    m = summarise(result, topo)
    out = {"variant": args.variant, "nodes": topo.num_nodes, "event_hash": result.event_hash}
    # NaN (no job of a size class) is not JSON: reported as null
    out.update({k: (None if m[k] != m[k] else m[k]) for k in SHOWN})
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:18s} {v:,.3f}" if isinstance(v, float) else f"{k:18s} {'–' if v is None else v}")
    return 0


def add_gangsim_command(sub) -> None:
    p = sub.add_parser(
        "gang-sim",
        help="one job-level scenario of suite 2 (gangs on a topology) on a trace or a suite window",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trace", type=Path, default=None, help="job-trace CSV (docs/job-trace-format.md)")
    p.add_argument(
        "--until-s", type=float, default=None, help="with --trace: end of the run (default: last submit)"
    )
    p.add_argument("--window", default=None, help="a suite window instead, e.g. itp04-w2")
    p.add_argument("--load", type=float, default=1.0, help="with --window: load 1.0, 1.25, 1.5 (default 1.0)")
    p.add_argument(
        "--variant",
        default="ours",
        help="volcano, kueue, kai, kai+consolidate, slurm, fgd, ours, ours+defrag",
    )
    p.add_argument("--topology", choices=("superpod", "nvl72"), default="superpod")
    p.add_argument(
        "--topology-file", type=Path, default=None, help="a TOML/YAML topology instead of a preset"
    )
    p.add_argument("--nodes", type=int, default=None, help="nodes of the preset (default: the window's size)")
    p.add_argument(
        "--constraint", default="preferred:leaf", help="multi-node gangs' constraint, or 'keep' the trace's"
    )
    p.add_argument("--check", action="store_true", help="check every invariant after every event")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_gangsim)
