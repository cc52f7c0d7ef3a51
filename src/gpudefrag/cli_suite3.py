"""``gpudefrag suite 3``: failures, spare capacity, checkpoint-aware preemption and elastic nodes
on suite 2's trace windows (see :mod:`gpudefrag.experiments.suite3.suite`).

``--windows tuning`` (the default) runs suite 2's tuning windows into ``runs/suite3-tuning/``;
``--windows report`` the held-out report windows into ``runs/suite3/`` (run once, at the end);
names may be listed too (``runs/suite3-other/``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import name_list, seed_list
from gpudefrag.cli_fgd import add_executor_options
from gpudefrag.cli_suite2 import note_executor, resolve_windows, results_folder, windows_arg
from gpudefrag.settings import Seconds, value

__all__ = ["add_suite3_command", "cmd_suite_3"]


def cmd_suite_3(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from gpudefrag.experiments.common.executor import RunExecutor
    from gpudefrag.experiments.suite3.config import VARIANTS, Suite3Config
    from gpudefrag.experiments.suite3.report import write_report
    from gpudefrag.experiments.suite3.suite import run_suite

    set_name, names = resolve_windows(args.windows)
    variants = tuple(args.variants or VARIANTS)
    cfg = Suite3Config(windows=names, set_name=set_name, seeds=tuple(args.seeds), variants=variants)
    wait_s = cfg.checkpoint_wait_s if args.checkpoint_wait is None else args.checkpoint_wait
    cfg = replace(cfg, stress_scale=args.stress, checkpoint_wait_s=wait_s)
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        runs = run_suite(cfg, progress=not args.no_progress, executor=executor)
        where = executor.describe()
    wall = time.perf_counter() - started
    folder = args.out or Path("runs") / results_folder("3", set_name)
    paths = write_report(runs, cfg, wall, folder)
    note_executor(paths[0], where)
    print(paths[0].read_text())
    print("wrote " + ", ".join(str(p) for p in paths[:2]) + f" and {len(paths) - 2} charts")
    return 0


def add_suite3_command(suites: Any) -> None:  # the argparse sub-parsers of ``suite``
    """Register ``suite 3`` on the ``suite`` sub-parsers."""
    s3 = suites.add_parser(
        "3",
        help="failures, spare capacity, checkpoint-aware preemption, elastic nodes",
        description="Replay suite 2's windows with node failures (Llama 3 rate), priority classes and "
        "preemption (kube default, KAI, ours), spare-capacity policies (dedicated vs pooled with "
        "best-effort backfill) and elastic nodes; paired by (window, seed).  Tune on the tuning "
        "windows (runs/suite3-tuning/); run the report windows once, at the end (runs/suite3/).",
    )
    s3.add_argument(
        "--windows",
        type=windows_arg,
        default="tuning",
        help="tuning (default), report, confirmation ... confirmation-4, or window names "
        "(which sets are spent: docs/suite3.md)",
    )
    s3.add_argument("--seeds", type=seed_list(), default=[1, 2], help="failure and class seeds (default 1,2)")
    s3.add_argument(
        "--variants", type=name_list(_variants3, "variant"), default=None, help="variants (default: all)"
    )
    s3.add_argument(
        "--stress",
        type=value(Annotated[float, Interval(gt=0, le=1000)]),
        default=10.0,
        help="failure-rate multiplier of the spare study (default 10)",
    )
    s3.add_argument(
        "--checkpoint-wait",
        type=value(Seconds),
        default=None,
        metavar="SECONDS",
        help="how long a blocked research job may wait for its victims' checkpoints under ours "
        "(default 600; 0: never; below the 1,800 s checkpoint interval)",
    )
    add_executor_options(s3)
    s3.add_argument(
        "--out", type=Path, default=None, help="folder the report goes to (default runs/suite3-SET)"
    )
    s3.add_argument("--no-progress", action="store_true", help="no progress bar")
    s3.set_defaults(func=cmd_suite_3)


def _variants3() -> tuple[str, ...]:
    from gpudefrag.experiments.suite3.config import VARIANTS

    return VARIANTS
