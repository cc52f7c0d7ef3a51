"""``gpudefrag compare``: every scheduler of suite 2 on your own job trace, side by side.

The trace (``--trace``, a job-trace CSV: ``gpudefrag import`` makes one from Slurm or Kubernetes
history) is cut into windows of ``--window-hours`` after as long a warm-up; every window is
replayed at each ``--growth`` by every variant on your cluster (``--nodes`` of a preset, or a
``--topology-file``; by default sized for the trace).  The report (Markdown, ``runs.csv``,
charts) starts with a verdict: what switching from the best of the baselines to ours would
change in allocation, waits and GPU-hours lost, with 95 % CIs across windows (docs/compare.md).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import LOAD, name_list, number_list, refuse
from gpudefrag.cli_fgd import add_executor_options
from gpudefrag.cli_gangsim import add_cluster_options, constraint_or_keep
from gpudefrag.settings import value

__all__ = ["add_compare_command"]


def _variants() -> tuple[str, ...]:
    from gpudefrag.experiments.suite2.config import VARIANTS

    return VARIANTS


def cmd_compare(args: argparse.Namespace) -> int:
    from gpudefrag.cli_gangsim import gang_constraint_of
    from gpudefrag.cli_suite2 import note_executor
    from gpudefrag.experiments.common.executor import RunExecutor
    from gpudefrag.experiments.compare.plan import DEFAULT_VARIANTS, ComparePlan, cluster_nodes, trace_windows
    from gpudefrag.experiments.compare.report import verdict_lines, write_compare_report
    from gpudefrag.experiments.compare.run import run_compare
    from gpudefrag.experiments.suite2.config import Suite2Config
    from gpudefrag.model.topology import Topology, load_topology
    from gpudefrag.workloads.jobtrace import load_job_trace

    if args.topology_file is not None:
        refuse(
            args,
            {"nodes": "--nodes", "topology": "--topology"},
            "not with --topology-file (it lists the nodes)",
        )
    topology = args.topology or "superpod"
    jobs = load_job_trace(args.trace)
    hours = args.window_hours
    windows, warmup_s = trace_windows(jobs, hours * 3600.0, hours * 3600.0, max(args.growth))
    gpn = (
        load_topology(args.topology_file).max_gpus_per_node
        if args.topology_file
        else (8 if topology == "superpod" else 4)
    )
    nodes = args.nodes or (0 if args.topology_file else cluster_nodes(jobs, gpn))
    topo: Topology = (
        load_topology(args.topology_file) if args.topology_file else ComparePlan.preset(topology, nodes, 32)
    )
    constraint = gang_constraint_of(args.trace, args.constraint)
    if constraint == "preferred:leaf" and args.constraint is None and "leaf" not in topo.levels:
        constraint = f"preferred:{topo.levels[0]}"  # the lowest level above the node
    check_levels(jobs, constraint, topo)
    suite = Suite2Config(
        windows=tuple(w.name for w in windows),
        set_name="trace",
        loads=tuple(args.growth),
        variants=tuple(args.variants or DEFAULT_VARIANTS),
        topology=topology,
        gang_constraint=constraint if constraint != "keep" else "none",
    )
    plan = ComparePlan(args.trace, tuple(windows), warmup_s, suite, nodes, args.topology_file, constraint)
    runs_n = len(windows) * len(suite.loads) * len(suite.variants)
    print(
        f"{len(jobs):,} jobs, {len(windows)} windows of {hours:g} h, "
        + (f"{nodes} nodes" if not args.topology_file else f"topology file {args.topology_file}")
        + f", growth {', '.join(f'{g:g}x' for g in suite.loads)}, {len(suite.variants)} variants: {runs_n} runs"
    )
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        runs = run_compare(plan, executor, progress=not args.no_progress)
        where = executor.describe()
    wall = time.perf_counter() - started
    folder = args.out or Path("runs") / f"compare-{args.trace.stem}"
    paths = write_compare_report(runs, plan, len(jobs), wall, folder)
    note_executor(paths[0], where)
    print("\n".join(verdict_lines(runs, plan)))
    print("wrote " + ", ".join(str(p) for p in paths[:2]) + f" and {len(paths) - 2} charts")
    return 0


def check_levels(jobs: list[Any], constraint: str, topo: Any) -> None:
    """Every constraint the runs will carry names a level of ``topo`` (else a ConfigError naming
    the levels), before any run starts."""
    from gpudefrag.model.jobs import parse_constraint

    if constraint != "keep":
        parsed = parse_constraint(constraint)
        if parsed is not None:
            topo.level_index(parsed.level)
        return
    for j in jobs:
        if j.constraint is not None:
            topo.level_index(j.constraint.level)


def add_compare_command(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="every scheduler on your own job trace, with a verdict (docs/compare.md)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trace", type=Path, required=True, help="job-trace CSV (docs/job-trace-format.md)")
    add_cluster_options(p, "nodes of the preset (default: sized for the trace's GPU time)")
    p.add_argument(
        "--constraint",
        type=constraint_or_keep,
        default=None,
        help="multi-node gangs' topology constraint: required:LEVEL, preferred:LEVEL, none or keep "
        "(default: the trace's own topology column, else preferred at the lowest level, leaf on superpod)",
    )
    p.add_argument(
        "--growth",
        type=number_list(LOAD, "1,1.25,1.5"),
        default=[1.0, 1.25, 1.5],
        help="arrivals this many times as fast, durations kept (default 1,1.25,1.5)",
    )
    p.add_argument(
        "--variants",
        type=name_list(_variants, "variant"),
        default=None,
        help="variants (default: every baseline, ours and ours+defrag; ours-batch when named)",
    )
    p.add_argument(
        "--window-hours",
        type=value(Annotated[float, Interval(ge=1, le=31 * 24)]),
        default=24.0,
        help="length of a window, and of the warm-up before the first (default 24)",
    )
    add_executor_options(p)
    p.add_argument("--out", type=Path, default=None, help="report folder (default runs/compare-TRACE)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_compare)
