"""``gpudefrag suite 2``: gangs on a multi-level topology, replayed from the ITP and Philly
traces (see :mod:`gpudefrag.experiments.suite2.suite`).

``--windows tuning`` (the default) runs the tuning windows into ``runs/suite2-tuning/``;
``--windows report`` runs the held-out report windows into ``runs/suite2/`` and
``--windows confirmation`` the next held-out set into ``runs/suite2-confirmation/``; both were
run once on 2026-12-01 and are spent (a new set should come from the traces' other busy weeks).  Names may also be listed
(``--windows itp04-w2,philly-w2``) into ``runs/suite2-other/``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import LOAD, name_list, number_list
from gpudefrag.cli_fgd import add_executor_options
from gpudefrag.errors import ConfigError
from gpudefrag.settings import value

__all__ = ["add_suite2_command", "cmd_suite_2"]


def results_folder(suite: str, set_name: str) -> str:
    """Where ``suite`` writes for a window set: ``suite<N>`` for the report set, else
    ``suite<N>-<set name>`` (``-other`` for listed window names)."""
    return f"suite{suite}" if set_name == "report" else f"suite{suite}-{set_name}"


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def resolve_windows(spec: str) -> tuple[str, tuple[str, ...]]:
    """A window set's name (a key of ``SPLITS``) or comma-separated names -> (set name, names);
    listed names give the set name ``other``."""
    from gpudefrag.workloads.suite_windows import SPLITS, window

    if spec in SPLITS:
        return spec, SPLITS[spec]
    names = tuple(_csv(spec))
    for n in names:
        window(n)  # ConfigError listing the known names
    if not names:
        raise ConfigError("--windows: give tuning, report or window names")
    return "other", names


def cmd_suite_2(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.common.executor import RunExecutor
    from gpudefrag.experiments.suite2.config import VARIANTS, Suite2Config
    from gpudefrag.experiments.suite2.report import write_report
    from gpudefrag.experiments.suite2.suite import run_suite

    set_name, names = resolve_windows(args.windows)
    variants = tuple(args.variants or VARIANTS)
    cfg = Suite2Config(
        windows=names,
        set_name=set_name,
        loads=tuple(args.loads),
        variants=variants,
        topology=args.topology,
        leaf_nodes=args.leaf_nodes,
        gang_constraint=args.constraint,
    )
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        runs = run_suite(cfg, progress=not args.no_progress, executor=executor)
        where = executor.describe()
    wall = time.perf_counter() - started
    folder = args.out or Path("runs") / results_folder("2", set_name)
    paths = write_report(runs, cfg, wall, folder)
    note_executor(paths[0], where)
    print(paths[0].read_text())
    print("wrote " + ", ".join(str(p) for p in paths[:2]) + f" and {len(paths) - 2} charts")
    return 0


def note_executor(report: Path, description: str) -> None:
    """Append the executor the runs ran on to the Markdown ``report`` (rewritten whole)."""
    from gpudefrag.experiments.common.atomic import atomic_write

    text = report.read_text()
    with atomic_write(report) as fh:
        fh.write(text + f"\nExecutor: {description}.\n")


def windows_arg(text: str) -> str:
    """``--windows``: a window set's name or window names (checked now: a usage error lists the
    known ones)."""
    try:
        resolve_windows(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def constraint_arg(text: str) -> str:
    """``--constraint``: ``required:LEVEL``, ``preferred:LEVEL`` or ``none``."""
    from gpudefrag.model.jobs import parse_constraint

    try:
        parse_constraint(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def _variants2() -> tuple[str, ...]:
    from gpudefrag.experiments.suite2.config import VARIANTS

    return VARIANTS


LEAF_NODES = value(Annotated[int, Interval(ge=1, le=100_000)])


def add_suite2_command(suites: Any) -> None:
    """Register ``suite 2`` on the ``suite`` sub-parsers."""
    s2 = suites.add_parser(
        "2",
        help="gangs on a multi-level topology from real traces (ITP, Philly)",
        description="Replay busiest-week windows of the ITP and Philly traces at loads 1.0/1.25/1.5 "
        "with the baselines (Volcano, Kueue TAS, KAI, KAI+Consolidate, Slurm tree, FGD) and ours "
        "(gang-aware placement, CP-SAT batches, checkpoint-aware defragmentation).  Tune on the "
        "tuning windows (runs/suite2-tuning/); run the report windows once, at the end (runs/suite2/).",
    )
    s2.add_argument(
        "--windows",
        type=windows_arg,
        default="tuning",
        help="tuning (default), report, confirmation ... confirmation-4, or window names "
        "(which sets are spent: docs/suite2-windows.md)",
    )
    s2.add_argument(
        "--loads",
        type=number_list(LOAD, "1.0,1.25"),
        default=[1.0, 1.25, 1.5],
        help="loads (default 1.0,1.25,1.5)",
    )
    s2.add_argument(
        "--variants", type=name_list(_variants2, "variant"), default=None, help="variants (default: all)"
    )
    s2.add_argument("--topology", choices=("superpod", "nvl72"), default="superpod")
    s2.add_argument(
        "--leaf-nodes", type=LEAF_NODES, default=32, help="nodes per leaf group (superpod; default 32)"
    )
    s2.add_argument(
        "--constraint",
        type=constraint_arg,
        default="preferred:leaf",
        help="multi-node gangs' topology constraint (default preferred:leaf)",
    )
    add_executor_options(s2)
    s2.add_argument(
        "--out", type=Path, default=None, help="folder the report goes to (default runs/suite2-SET)"
    )
    s2.add_argument("--no-progress", action="store_true", help="no progress bar")
    s2.set_defaults(func=cmd_suite_2)
