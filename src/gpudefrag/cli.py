"""The ``gpudefrag`` command line.  Each command parses its options and calls one function.

Exit codes: 0 success; 1 a gate or check failed; 2 bad input or usage (one clear line on
stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from gpudefrag import __version__
from gpudefrag.errors import ConfigError, GpudefragError

DEFAULT_OUT = Path("runs")


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43,50`` (or a mix) -> a list of ints."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                lo, hi = part.split("-", 1) if not part.startswith("-") else (part, "")
                seeds.extend(range(int(lo), int(hi) + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seeds {text!r} (use e.g. 42-51 or 42,43)") from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seeds given")
    return seeds


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


# ----------------------------------------------------------------------------- commands
def cmd_calib(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.calib import format_table, run_calibration, summarise, write_results
    from gpudefrag.policies.registry import POLICY_NAMES
    from gpudefrag.workloads.openb import PUBLISHED_WORKLOADS

    workloads = list(PUBLISHED_WORKLOADS) if args.all else (args.workload or ["openb_pod_list_default"])
    policies = args.policy or list(POLICY_NAMES)
    for p in policies:
        if p not in POLICY_NAMES:
            raise ConfigError(f"unknown policy {p!r}; known: {', '.join(POLICY_NAMES)}")
    started = time.perf_counter()
    checks = run_calibration(workloads, policies, args.seeds, args.jobs, progress=not args.no_progress)
    wall = time.perf_counter() - started
    summaries = summarise(checks)
    paths = write_results(checks, summaries, args.out / "calib")
    print(format_table(summaries))
    passed = all(s.passed for s in summaries)
    exact = sum(c.exact for c in checks)
    print(
        f"\n{len(checks)} runs in {wall:.1f} s; {exact}/{len(checks)} runs exact; "
        f"gate {'PASSED' if passed else 'FAILED'}"
    )
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0 if passed else 1


def cmd_run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gpudefrag.experiments.run import run_experiment, write_run

    bar = tqdm(
        desc=f"{args.policy} seed {args.seed}", unit="pod", disable=None if not args.no_progress else True
    )
    started = time.perf_counter()
    out = run_experiment(
        args.workload, args.policy, args.seed, args.tune_ratio, with_frag=True, on_progress=bar.update
    )
    bar.close()
    wall = time.perf_counter() - started
    folder = args.out / f"{out.workload}-{args.policy}-seed{args.seed}"
    paths = write_run(out, folder)
    n = len(out.prepared.arrivals)
    print(
        f"{out.workload} / {args.policy} / seed {args.seed}: {n} pods arrived, "
        f"{out.result.failed} dropped, {out.prepared.clones} tuned clones"
    )
    for x in (50, 80, 100, 110, 120, 130):
        print(
            f"  allocation at {x:3d}% arrived: {out.curve[x]:6.2f}%   fragmentation: {out.frag_curve[x]:6.2f}%"
        )
    print(f"wall {wall:.2f} s (placement loop {out.result.wall_s:.2f} s)")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.bench import bench_policy
    from gpudefrag.policies.registry import POLICY_NAMES

    policies = args.policy or list(POLICY_NAMES)
    print(f"workload {args.workload}, seed {args.seed}: one decision = filter + score all nodes + pick")
    print(
        f"{'policy':<14} {'pods':>6} {'nodes':>6} {'p50 µs':>8} {'p99 µs':>8} {'max µs':>9} {'pods/s':>9} {'run s':>6}"
    )
    for name in policies:
        r = bench_policy(name, args.workload, args.seed)
        print(
            f"{name:<14} {r.pods:>6} {r.nodes:>6} {r.p50_us:>8.1f} {r.p99_us:>8.1f} "
            f"{r.decision_us.max():>9.1f} {r.pods_per_s:>9.0f} {r.run_wall_s:>6.2f}"
        )
    return 0


def parse_int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid list {text!r} (use e.g. 1,16,64)") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"need positive integers: {text!r}")
    return values


def parse_float_list(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid list {text!r} (use e.g. 0.9,1.0)") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"need positive numbers: {text!r}")
    return values


def cmd_suite(args: argparse.Namespace) -> int:
    if args.suite == "1b":
        return _suite_1b(args)
    only_1b = [
        flag
        for flag, given in (
            ("--loads", args.loads),
            ("--variants", args.variants),
            ("--no-sweep", args.no_sweep),
            ("--set", args.set),
        )
        if given
    ]
    if only_1b:
        raise ConfigError(f"{', '.join(only_1b)}: only for suite 1b")
    from gpudefrag.batch.placer import SolverConfig
    from gpudefrag.experiments.report1a import diagnose, write_report
    from gpudefrag.experiments.suite1a import Suite1aConfig, run_suite

    solver = SolverConfig(
        time_limit_s=args.time_limit,
        deterministic_time=args.deterministic_time,
        candidates_per_pod=args.candidates,
        deterministic=not args.wall_clock,
    )
    config = Suite1aConfig(
        workload=args.workload,
        seeds=tuple(args.seeds or range(42, 52)),
        batch_sizes=tuple(args.batch_sizes),
        solver=solver,
    )
    started = time.perf_counter()
    runs = run_suite(config, args.jobs, progress=not args.no_progress)
    wall = time.perf_counter() - started
    folder = args.out / "suite1a"
    paths = write_report(runs, config, folder, wall, diagnose(runs))
    print((folder / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def _suite_1b(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.overrides import apply_overrides
    from gpudefrag.experiments.report1b import write_report
    from gpudefrag.experiments.suite1b import VARIANTS, Suite1bConfig, run_suite

    seeds = tuple(args.seeds) if args.seeds_given else tuple(range(47, 57))
    config = Suite1bConfig(workload=args.workload, seeds=seeds, horizon_h=args.hours, n_nodes=args.nodes)
    if args.loads:
        config = replace(config, loads=tuple(args.loads))
    if args.variants:
        unknown = sorted(set(args.variants) - set(VARIANTS))
        if unknown:
            raise ConfigError(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
        config = replace(config, variants=tuple(args.variants))
    if args.no_sweep:
        config = replace(config, sweep_restart_s=())
    config = apply_overrides(config, args.set or [])
    held_out = all(s >= 47 for s in seeds)
    title = ("held-out seeds" if held_out else "tuning seeds") + " (time-driven, departures, defragmentation)"
    if args.set:
        title += "; settings changed: " + ", ".join(args.set)
    started = time.perf_counter()
    runs = run_suite(config, args.jobs, progress=not args.no_progress)
    wall = time.perf_counter() - started
    folder = args.out / ("suite1b" if held_out else "suite1b-tuning")
    paths = write_report(runs, config, folder, wall, title)
    print((folder / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


# ----------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from gpudefrag.cli_data import add_data_commands

    parser = argparse.ArgumentParser(
        prog="gpudefrag",
        description="GPU-cluster placement and defragmentation: exact FGD reproduction and beyond.",
    )
    parser.add_argument("--version", action="version", version=f"gpudefrag {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    calib = sub.add_parser(
        "calib",
        help="reproduce FGD's published runs and check the calibration gate",
        description="Run policies x seeds x workloads in parallel and compare every run "
        "with FGD's published curve.  Exit 1 if the gate fails.",
    )
    calib.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help="openb pod list (repeatable; default openb_pod_list_default)",
    )
    calib.add_argument("--all", action="store_true", help="all 17 published workloads (1,020 runs)")
    calib.add_argument(
        "--policy", action="append", metavar="NAME", help="policy (repeatable; default all six)"
    )
    calib.add_argument("--seeds", type=parse_seeds, default=list(range(42, 52)), help="seeds (default 42-51)")
    calib.add_argument(
        "--jobs", type=positive_int, default=None, help="worker processes (default: all cores)"
    )
    calib.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default ./runs)")
    calib.add_argument("--no-progress", action="store_true", help="no progress bar")
    calib.set_defaults(func=cmd_calib)

    run = sub.add_parser(
        "run",
        help="one experiment of FGD's arrival-only protocol",
        description="Replay one seeded workload with one policy; write the curve and the "
        "per-pod decisions as CSV.",
    )
    run.add_argument("--workload", default="openb_pod_list_default", help="openb pod list")
    run.add_argument(
        "--policy", default="fgd", help="fgd, bestfit, gpupacking, gpuclustering, dotprod, random"
    )
    run.add_argument("--seed", type=int, default=42)
    run.add_argument(
        "--tune-ratio",
        type=positive_float,
        default=1.3,
        help="inflate (or trim) the workload to this multiple of GPU capacity (default 1.3)",
    )
    run.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default ./runs)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.set_defaults(func=cmd_run)

    bench = sub.add_parser("bench", help="placement-decision latency (p50/p99 µs) and pods per second")
    bench.add_argument(
        "--policy", action="append", metavar="NAME", help="policy (repeatable; default all six)"
    )
    bench.add_argument("--workload", default="openb_pod_list_default")
    bench.add_argument("--seed", type=int, default=42)
    bench.set_defaults(func=cmd_bench)

    suite = sub.add_parser(
        "suite",
        help="experiment suites (1a: batch placement; 1b: time-driven + defrag)",
        description="Suite 1a: FGD's protocol with arrivals decided in batches of B by the "
        "CP-SAT batch placer, against FGD and BestFit.  Suite 1b: time-driven "
        "simulation with departures, queueing and defragmentation at loads "
        "0.9/1.0/1.1 plus a restart-time sweep.  Both write a Markdown report, "
        "PNG charts and CSV tables.",
    )
    suite.add_argument(
        "suite", choices=["1a", "1b"], help="which suite (1b: time-driven with defragmentation)"
    )
    suite.add_argument("--workload", default="openb_pod_list_default")
    suite.add_argument(
        "--seeds",
        type=parse_seeds,
        default=None,
        help="seeds (default: 1a 42-51; 1b the held-out 47-56, tune with 42-46)",
    )
    suite.add_argument("--hours", type=positive_float, default=8.0, help="1b: simulated hours per run")
    suite.add_argument("--nodes", type=positive_int, default=150, help="1b: nodes sampled per seed")
    suite.add_argument(
        "--loads", type=parse_float_list, default=None, help="1b: offered loads (default 0.9,1.0,1.1)"
    )
    suite.add_argument(
        "--variants",
        type=lambda t: [v.strip() for v in t.split(",") if v.strip()],
        default=None,
        help="1b: variants (default fgd,bestfit,solver,fgd+defrag,solver+defrag)",
    )
    suite.add_argument("--no-sweep", action="store_true", help="1b: skip the restart-time sweep")
    suite.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="1b: change a setting, e.g. planner.harm_weight=3, plans_per_tick=1, "
        "solver.deterministic_time=0.01, runtime_estimates=oracle (the "
        "defragmenter then knows every pod's true run time) (repeatable)",
    )
    suite.add_argument(
        "--batch-sizes", type=parse_int_list, default=[1, 16, 64], help="solver batch sizes (default 1,16,64)"
    )
    suite.add_argument(
        "--deterministic-time",
        type=positive_float,
        default=0.01,
        help="CP-SAT deterministic work limit per batch (default 0.01)",
    )
    suite.add_argument(
        "--time-limit",
        type=positive_float,
        default=0.5,
        help="wall-clock budget per batch in seconds (default 0.5)",
    )
    suite.add_argument(
        "--wall-clock",
        action="store_true",
        help="stop on the wall-clock budget only (faster machines do more; not reproducible)",
    )
    suite.add_argument("--candidates", type=positive_int, default=8, help="FGD-top nodes per pod (default 8)")
    suite.add_argument(
        "--jobs", type=positive_int, default=None, help="worker processes (default: all cores)"
    )
    suite.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default ./runs)")
    suite.add_argument("--no-progress", action="store_true", help="no progress bar")
    suite.set_defaults(func=cmd_suite)

    add_data_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "suite":
        args.seeds_given = args.seeds is not None
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except GpudefragError as exc:
        print(f"gpudefrag: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpudefrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
