"""``gpudefrag calib`` and ``run``: FGD's protocol reproduced (the calibration gate) and one run of
it (docs/reproduction.md)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import (
    GPUS,
    JOBS,
    POLICY_NAMES_CLI,
    SEED,
    seed_list,
    workload_name,
)
from gpudefrag.settings import value

__all__ = ["DEFAULT_OUT", "add_executor_options", "add_fgd_commands"]

DEFAULT_OUT = Path("runs")


def cmd_calib(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.calib.gate import format_table, run_calibration, summarise, write_results
    from gpudefrag.experiments.common.executor import RunExecutor
    from gpudefrag.policies.registry import POLICY_NAMES
    from gpudefrag.workloads.openb import PUBLISHED_WORKLOADS

    workloads = list(PUBLISHED_WORKLOADS) if args.all else (args.workload or ["openb_pod_list_default"])
    policies = args.policy or list(POLICY_NAMES)
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        checks = run_calibration(
            workloads, policies, args.seeds, progress=not args.no_progress, executor=executor
        )
        where = executor.describe()
    wall = time.perf_counter() - started
    summaries = summarise(checks)
    paths = write_results(checks, summaries, args.out or DEFAULT_OUT / "calib", where)
    print(format_table(summaries))
    passed = all(s.passed for s in summaries)
    exact = sum(c.exact for c in checks)
    print(
        f"\n{len(checks)} runs in {wall:.1f} s ({where}); {exact}/{len(checks)} runs exact; "
        f"gate {'PASSED' if passed else 'FAILED'}"
    )
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if passed else 1


def cmd_run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gpudefrag.experiments.calib.run import run_experiment, write_run

    bar = tqdm(
        desc=f"{args.policy} seed {args.seed}", unit="pod", disable=None if not args.no_progress else True
    )
    started = time.perf_counter()
    out = run_experiment(
        args.workload,
        args.policy,
        args.seed,
        args.tune_ratio,
        with_frag=True,
        on_progress=bar.update,
        min_gpus=args.gpus,
    )
    bar.close()
    wall = time.perf_counter() - started
    assert out.frag_curve is not None  # with_frag=True: the run tracks fragmentation, so it has the curve
    size = "" if args.gpus is None else f"-{len(out.node_names)}nodes"
    folder = args.out or DEFAULT_OUT / f"{out.workload}-{args.policy}-seed{args.seed}{size}"
    paths = write_run(out, folder)
    n = len(out.prepared.arrivals)
    print(
        f"{out.workload} / {args.policy} / seed {args.seed}: {n} pods arrived on {len(out.node_names)} nodes, "
        f"{out.result.failed} dropped, {out.prepared.clones} tuned clones"
    )
    for x in (50, 80, 100, 110, 120, 130):
        print(
            f"  allocation at {x:3d}% arrived: {out.curve[x]:6.2f}%   fragmentation: {out.frag_curve[x]:6.2f}%"
        )
    print(
        f"wall {wall:.2f} s (placement loop {out.result.wall_s:.2f} s): {n / wall:,.0f} pods/s end to end, "
        f"{n / out.result.wall_s:,.0f} pods/s in the placement loop"
    )
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


# ----------------------------------------------------------------------------- parsers
DASK_HELP = (
    "run on the existing Dask scheduler at ADDRESS (e.g. tcp://127.0.0.1:8786) instead of local "
    "processes; needs gpudefrag[dask], and the workers must see the data (GPUDEFRAG_MIRROR)"
)


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Where a sweep's runs go: ``--jobs N`` local worker processes or ``--dask ADDRESS`` (one
    or the other: ``--jobs`` sizes the local pool, which ``--dask`` replaces)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--jobs", type=JOBS, default=None, help="worker processes (default: all cores)")
    where.add_argument("--dask", metavar="ADDRESS", type=dask_address, default=None, help=DASK_HELP)


def dask_address(text: str) -> str:
    """``tcp://HOST:PORT`` (or ``tls://``, ``inproc://``): what a Dask client connects to."""
    scheme, sep, rest = text.strip().partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or scheme not in ("tcp", "tls", "inproc") or not (colon and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected tcp://HOST:PORT, got {text!r}")
    return text.strip()


def add_fgd_commands(sub: Any) -> None:
    """``calib`` and ``run``."""
    calib = sub.add_parser(
        "calib",
        help="reproduce FGD's published runs and check the calibration gate",
        description="Run policies x seeds x workloads in parallel and compare every run "
        "with FGD's published curve.  Exit 1 if the gate fails.",
    )
    calib.add_argument(
        "--workload",
        action="append",
        type=workload_name,
        metavar="NAME",
        help="openb pod list (repeatable; default openb_pod_list_default)",
    )
    calib.add_argument("--all", action="store_true", help="all 17 published workloads (1,020 runs)")
    calib.add_argument(
        "--policy",
        action="append",
        choices=POLICY_NAMES_CLI,
        metavar="NAME",
        help=f"policy (repeatable: {', '.join(POLICY_NAMES_CLI)}; default all six)",
    )
    calib.add_argument("--seeds", type=seed_list(), default=list(range(42, 52)), help="seeds (default 42-51)")
    add_executor_options(calib)
    calib.add_argument("--out", type=Path, default=None, help="folder the results go to (default runs/calib)")
    calib.add_argument("--no-progress", action="store_true", help="no progress bar")
    calib.set_defaults(func=cmd_calib)

    run = sub.add_parser(
        "run",
        help="one experiment of FGD's arrival-only protocol",
        description="Replay one seeded workload with one policy; write the curve and the "
        "per-pod decisions as CSV.",
    )
    run.add_argument(
        "--workload", type=workload_name, default="openb_pod_list_default", help="openb pod list"
    )
    run.add_argument(
        "--policy", choices=POLICY_NAMES_CLI, default="fgd", help="placement policy (default fgd)"
    )
    run.add_argument("--seed", type=SEED, default=42, help="seed (default 42)")
    run.add_argument(
        "--gpus",
        type=GPUS,
        default=None,
        help="repeat the node list to at least this many GPUs (e.g. 1000000) and prepare the workload "
        "for that capacity",
    )
    run.add_argument(
        "--tune-ratio",
        type=value(Annotated[float, Interval(gt=0, le=100)]),
        default=1.3,
        help="inflate (or trim) the workload to this multiple of GPU capacity (default 1.3)",
    )
    run.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder the run goes to (default runs/WORKLOAD-POLICY-seedSEED)",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.set_defaults(func=cmd_run)
