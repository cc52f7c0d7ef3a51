"""The ``gpudefrag`` command line.  Each command parses its options and calls one function.

Exit codes: 0 success; 1 a gate or check failed; 2 bad input or usage (one clear line on
stderr, no traceback).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from gpudefrag import __version__
from gpudefrag.errors import EXIT_USAGE, ConfigError, GpudefragError

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


def _number(text: str, kind: type[int] | type[float], what: str) -> float:
    """``text`` read as ``kind``, or a usage error naming what was expected."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _require(ok: bool, rule: str, text: str) -> None:
    if not ok:
        raise argparse.ArgumentTypeError(f"must be {rule}: {text!r}")


def positive_float(text: str) -> float:
    value = _number(text, float, "a number")
    _require(value > 0 and math.isfinite(value), "a finite number > 0", text)
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float, "a number")
    _require(value >= 0 and math.isfinite(value), "a finite number >= 0", text)
    return value


def non_negative_int(text: str) -> int:
    value = int(_number(text, int, "an integer"))
    _require(value >= 0, ">= 0", text)
    return value


def positive_int(text: str) -> int:
    value = int(_number(text, int, "an integer"))
    _require(value >= 1, ">= 1", text)
    return value


# ----------------------------------------------------------------------------- commands
def cmd_calib(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.calib import format_table, run_calibration, summarise, write_results
    from gpudefrag.experiments.executor import RunExecutor
    from gpudefrag.policies.registry import POLICY_NAMES
    from gpudefrag.workloads.openb import PUBLISHED_WORKLOADS

    workloads = list(PUBLISHED_WORKLOADS) if args.all else (args.workload or ["openb_pod_list_default"])
    policies = args.policy or list(POLICY_NAMES)
    for p in policies:
        if p not in POLICY_NAMES:
            raise ConfigError(f"unknown policy {p!r}; known: {', '.join(POLICY_NAMES)}")
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        checks = run_calibration(
            workloads, policies, args.seeds, progress=not args.no_progress, executor=executor
        )
        where = executor.describe()
    wall = time.perf_counter() - started
    summaries = summarise(checks)
    paths = write_results(checks, summaries, args.out / "calib", where)
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

    from gpudefrag.experiments.run import run_experiment, write_run

    bar = tqdm(
        desc=f"{args.policy} seed {args.seed}", unit="pod", disable=None if not args.no_progress else True
    )
    started = time.perf_counter()
    if args.gpus is not None and args.gpus < 1:
        raise ConfigError("--gpus must be at least 1")
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
    folder = args.out / f"{out.workload}-{args.policy}-seed{args.seed}{size}"
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


def _check_scale_options(args: argparse.Namespace) -> None:
    """The options ``bench --gpus`` and ``bench --sweep`` share."""
    if args.decisions < 1 or args.gang_decisions < 0:
        raise ConfigError("--decisions must be at least 1 and --gang-decisions at least 0")
    if args.leaf_nodes is not None and (args.leaf_nodes < 1 or args.topology != "superpod"):
        raise ConfigError("--leaf-nodes must be at least 1 and needs --topology superpod")


def cmd_scale_bench(args: argparse.Namespace) -> int:
    import numpy as np

    from gpudefrag.experiments.inputs import workload_inputs
    from gpudefrag.experiments.scale_bench import bench_scale
    from gpudefrag.workloads.itp import load_itp

    if args.gpus < 8:
        raise ConfigError("--gpus must be at least 8")
    _check_scale_options(args)
    inputs = workload_inputs(args.workload)
    itp_jobs = load_itp("itp_cluster04")
    policies = args.policy or ["fgd", "bestfit"]
    how = "full scan of every node" if args.scan else "incremental index (same decisions as the full scan)"
    print(
        f"{args.topology} cluster of {args.gpus} GPUs, 60 % filled (80 % of it ITP cluster04 jobs, 20 % "
        f"{args.workload} pods; seed {args.seed}); {how}; {args.decisions} decisions per pod shape, each bound"
    )
    print(f"{'policy':<10} {'shape':<8} {'nodes':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name in policies:
        r = bench_scale(
            args.gpus,
            args.topology,
            inputs.pods,
            inputs.typical,
            name,
            args.decisions,
            args.seed,
            itp_jobs=itp_jobs,
            scan=args.scan,
        )
        for shape, ms in r.latency_ms.items():
            print(
                f"{name:<10} {shape:<8} {r.nodes:>8} {np.percentile(ms, 50):>8.3f} "
                f"{np.percentile(ms, 99):>8.3f} {ms.max():>8.3f}"
            )
        print(
            f"{name:<10} cluster built in {r.build_s:.1f} s; index built in {r.index_build_s:.2f} s; "
            f"peak RSS {r.max_rss_mib:.0f} MiB"
        )
    sizes = tuple(g for g in (64, 512, 1024, 8192) if g <= args.gpus // 2)
    if args.gang_decisions and sizes:
        from gpudefrag.experiments.gang_scale_bench import bench_gangs, format_result

        print(
            f"\ngangs (suite 2's gang-aware objective on its per-domain counts): {args.gang_decisions} "
            "placements per size, each at the lowest level that can hold it, required"
        )
        res = bench_gangs(
            args.gpus, args.topology, args.seed, args.gang_decisions, sizes, leaf_nodes=args.leaf_nodes
        )
        print(format_result(res))
    return 0


def cmd_scale_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gpudefrag.experiments import scale_sweep
    from gpudefrag.experiments.inputs import workload_inputs
    from gpudefrag.workloads.itp import load_itp

    _check_scale_options(args)
    inputs = workload_inputs(args.workload)
    policies = args.policy or ["fgd", "bestfit"]
    modes = ["index", "scan"]
    print(
        f"decision latency against cluster size: {args.topology}, sizes {args.sweep} GPUs, 60 % filled "
        f"(ITP cluster04 + {args.workload}, seed {args.seed}); {args.decisions} decisions per pod shape"
    )
    gang_sizes = (64, 512, 1024, 8192) if args.gang_decisions else ()
    steps = len(args.sweep) * (len(policies) * len(modes) + (1 if gang_sizes else 0))
    with tqdm(total=steps, unit="run", disable=True if args.no_progress else None) as bar:
        rows = scale_sweep.sweep(
            args.sweep,
            args.topology,
            inputs.pods,
            inputs.typical,
            policies,
            modes,
            args.decisions,
            args.seed,
            load_itp("itp_cluster04"),
            on_step=lambda _: bar.update(1),
            gang_sizes=gang_sizes,
            gang_decisions=args.gang_decisions,
            leaf_nodes=args.leaf_nodes,
        )
    print(f"{'GPUs':>9} {'nodes':>8} {'policy':<8} {'mode':<6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    pooled: dict[tuple[int, str, str], list[scale_sweep.SweepRow]] = {}
    for r in rows:
        pooled.setdefault((r.gpus, r.policy, r.mode), []).append(r)
    import numpy as np

    for (gpus, policy, mode), group in pooled.items():
        if mode == scale_sweep.GANG_MODE:
            continue
        ms = np.concatenate([r.latency_ms for r in group])
        print(
            f"{gpus:>9} {group[0].nodes:>8} {policy:<8} {mode:<6} {np.percentile(ms, 50):>8.3f} "
            f"{np.percentile(ms, 99):>8.3f} {ms.max():>8.3f}"
        )
    gang_rows = [r for r in rows if r.mode == scale_sweep.GANG_MODE]
    if gang_rows:
        print(f"\ngangs (ours, required at the lowest level that holds them): {args.gang_decisions} per size")
        print(f"{'GPUs':>9} {'nodes':>8} {'gang':<10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for r in gang_rows:
            print(
                f"{r.gpus:>9} {r.nodes:>8} {r.shape:<10} {r.percentile(50):>8.3f} {r.percentile(99):>8.3f} "
                f"{r.latency_ms.max():>8.3f}"
            )
    for policy in policies:
        for mode in modes:
            g = scale_sweep.growth_ratio(rows, policy, mode)
            if g is not None:
                print(f"growth {policy} {mode}: p99 at {g[1]} GPUs = {g[2]:.2f} x p99 at {g[0]} GPUs")
    out = args.out
    paths = [
        scale_sweep.write_csv(rows, out / "scale_latency.csv"),
        scale_sweep.write_chart(rows, out / "scale_latency.png"),
    ]
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.bench import bench_policy
    from gpudefrag.policies.registry import POLICY_NAMES

    if args.sweep is not None:
        return cmd_scale_sweep(args)
    if args.gpus is not None:
        return cmd_scale_bench(args)

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


def cmd_suite_1a(args: argparse.Namespace) -> int:
    from gpudefrag.batch.placer import SolverConfig
    from gpudefrag.experiments.executor import RunExecutor
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
        seeds=tuple(args.seeds),
        batch_sizes=tuple(args.batch_sizes),
        solver=solver,
    )
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        runs = run_suite(config, progress=not args.no_progress, executor=executor)
    wall = time.perf_counter() - started
    folder = args.out / "suite1a"
    paths = write_report(runs, config, folder, wall, diagnose(runs))
    print((folder / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def seed_set_folder(set_name: str | None) -> str:
    """Where ``suite 1b`` writes for a seed set: ``suite1b`` for ``old-report`` (the report set
    of the earlier issues), ``suite1b-<name>`` for the other sets, ``suite1b-other-seeds`` for
    seeds that are no named set."""
    if set_name is None:
        return "suite1b-other-seeds"
    return "suite1b" if set_name == "old-report" else f"suite1b-{set_name}"


def parse_seeds_or_set(text: str) -> list[int]:
    """A seed set's name (a key of :data:`gpudefrag.experiments.config1b.SEED_SETS`) or seeds as
    :func:`parse_seeds` takes them."""
    from gpudefrag.experiments.config1b import SEED_SETS

    if text in SEED_SETS:
        return list(SEED_SETS[text])
    return parse_seeds(text)


def cmd_suite_1b(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.config1b import RUN_ONCE_SEED_SETS, check_variants, seed_set_name
    from gpudefrag.experiments.executor import RunExecutor
    from gpudefrag.experiments.report1b import write_report
    from gpudefrag.experiments.suite1b import build_config, run_suite

    seeds = tuple(args.seeds)
    set_name = seed_set_name(seeds)
    if set_name in RUN_ONCE_SEED_SETS and args.set:
        raise ConfigError(
            f"--seeds {set_name} runs the suite's own settings only, once, at the end: "
            "choose settings with --seeds tuning and --set, without this set"
        )
    fields: dict = {"seeds": seeds}
    if args.loads:
        fields["loads"] = tuple(args.loads)
    if args.variants:
        check_variants(args.variants, "--variants")
        fields["variants"] = tuple(args.variants)
    if args.no_sweep:
        fields["sweep_restart_s"] = ()
    config = build_config(args.workload, args.hours, args.nodes, args.set or [], **fields)
    label = f"seed set '{set_name}'" if set_name else "seeds outside the named sets"
    title = f"{label} (time-driven, departures, defragmentation)"
    if args.set:
        title += "; settings changed: " + ", ".join(args.set)
    started = time.perf_counter()
    with RunExecutor(args.jobs, args.dask) as executor:
        runs = run_suite(config, progress=not args.no_progress, executor=executor)
    wall = time.perf_counter() - started
    folder = args.out / seed_set_folder(set_name)
    paths = write_report(runs, config, folder, wall, title)
    print((folder / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.sim1b import check_variant, format_json, format_table, run_sim
    from gpudefrag.experiments.suite1b import build_config

    check_variant(args.variant)
    config = build_config(args.workload, args.hours, args.nodes, args.set or [])
    restart_s = config.restart_s if args.restart_s is None else args.restart_s
    summary = run_sim(
        config, args.variant, args.load, args.seed, restart_s, args.set or [], args.events, args.plans
    )
    print(format_json(summary) if args.json else format_table(summary))
    return 0


# ----------------------------------------------------------------------------- parser
class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr, ``<prog>: error: <message>``,
    with exit code 2 (no usage block).  Unrecognized arguments are reported by the (sub)command
    that did not recognize them: ``gpudefrag suite 1b: error: unrecognized arguments: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())}\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, _EXTRAS_PROG):  # the innermost parser sets it first
            setattr(namespace, _EXTRAS_PROG, self.prog)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            prog = getattr(namespace, _EXTRAS_PROG, self.prog)
            self.exit(EXIT_USAGE, f"{prog}: error: unrecognized arguments: {' '.join(extras)}\n")
        return namespace


_EXTRAS_PROG = "_unrecognized_by"


def _add_shared_suite_options(
    parser: argparse.ArgumentParser,
    seeds: list[int],
    seeds_help: str,
    parse: Callable[[str], list[int]] = parse_seeds,
) -> None:
    """Options both suites take: workload, seeds (read by ``parse``), worker processes or a Dask
    scheduler, output folder, progress bar."""
    parser.add_argument(
        "--workload", default="openb_pod_list_default", help="openb pod list (default %(default)s)"
    )
    parser.add_argument("--seeds", type=parse, default=seeds, help=seeds_help)
    add_executor_options(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default ./runs)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


DASK_HELP = (
    "run on the existing Dask scheduler at ADDRESS (e.g. tcp://127.0.0.1:8786) instead of local "
    "processes; needs gpudefrag[dask], and the workers must see the data (GPUDEFRAG_MIRROR)"
)


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Where a sweep's runs go: ``--jobs N`` local worker processes or ``--dask ADDRESS`` (one
    or the other: ``--jobs`` sizes the local pool, which ``--dask`` replaces)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--jobs", type=positive_int, default=None, help="worker processes (default: all cores)"
    )
    where.add_argument("--dask", metavar="ADDRESS", default=None, help=DASK_HELP)


def _add_settings_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change a setting of suite 1b, e.g. planner.harm_weight=3, plans_per_tick=1, "
        "solver.deterministic_time=0.01, runtime_estimates=oracle (the defragmenter then knows "
        "every pod's true run time), acceptance.defrag_min_gain_pp=1.5 (repeatable)",
    )


SUITE1B_HOURS = 8.0
"""``--hours`` default: Suite1bConfig.horizon_h (a test keeps them equal)."""
SUITE1B_NODES = 150
"""``--nodes`` default: Suite1bConfig.n_nodes (a test keeps them equal)."""


def _add_scale_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hours", type=positive_float, default=SUITE1B_HOURS, help="simulated hours per run (default 8)"
    )
    parser.add_argument(
        "--nodes", type=positive_int, default=SUITE1B_NODES, help="nodes sampled per seed (default 150)"
    )


def add_suite_commands(sub) -> None:
    """``gpudefrag suite 1a`` and ``gpudefrag suite 1b``, each with only its own options."""
    suite = sub.add_parser(
        "suite",
        help="experiment suites (1a: batch placement; 1b: time-driven + defrag; 2: gangs on a topology; "
        "3: failures, spares, preemption, elastic nodes)",
        description="Run an experiment suite; each writes a Markdown report, PNG charts and CSV "
        "tables.  See `gpudefrag suite 1a --help` and `gpudefrag suite 1b --help`.",
    )
    suites = suite.add_subparsers(dest="suite", metavar="{1a,1b,2,3}", required=True)

    s1a = suites.add_parser(
        "1a",
        help="FGD's arrival-only protocol with arrivals placed in batches by CP-SAT",
        description="FGD's protocol with arrivals decided in batches of B by the CP-SAT batch "
        "placer, against FGD and BestFit (runs/suite1a/).",
    )
    _add_shared_suite_options(s1a, list(range(42, 52)), "seeds (default 42-51)")
    s1a.add_argument(
        "--batch-sizes", type=parse_int_list, default=[1, 16, 64], help="solver batch sizes (default 1,16,64)"
    )
    s1a.add_argument(
        "--deterministic-time",
        type=positive_float,
        default=0.01,
        help="CP-SAT deterministic work limit per batch (default 0.01)",
    )
    s1a.add_argument(
        "--time-limit",
        type=positive_float,
        default=0.5,
        help="wall-clock budget per batch in seconds (default 0.5)",
    )
    s1a.add_argument(
        "--wall-clock",
        action="store_true",
        help="stop on the wall-clock budget only (faster machines do more; not reproducible)",
    )
    s1a.add_argument("--candidates", type=positive_int, default=8, help="FGD-top nodes per pod (default 8)")
    s1a.set_defaults(func=cmd_suite_1a)

    s1b = suites.add_parser(
        "1b",
        help="time-driven simulation with departures, queueing and defragmentation",
        description="Time-driven simulation with departures, queueing and checkpoint-aware "
        "defragmentation at loads 0.9/1.0/1.1, plus a restart-time sweep, checked against the "
        "suite's acceptance checks.  The report names the seed set it ran on: tuning (42-46, "
        "runs/suite1b-tuning/), old-report (47-56, runs/suite1b/), confirmation (1001-1020, "
        "runs/suite1b-confirmation/, spent on 2026-12-01), confirmation-2 (2001-2020, "
        "runs/suite1b-confirmation-2/, spent on 2026-12-03), confirmation-3 (3001-3020, "
        "runs/suite1b-confirmation-3/, spent on 2026-12-05), confirmation-4 (4001-4020, "
        "runs/suite1b-confirmation-4/, spent on 2026-12-05), confirmation-5 (5001-5020, "
        "runs/suite1b-confirmation-5/, spent on 2026-12-05), confirmation-6 (6001-6020, "
        "runs/suite1b-confirmation-6/, spent on 2026-12-05), confirmation-7 (7001-7020, "
        "runs/suite1b-confirmation-7/, spent on 2026-12-06) or confirmation-8 (8001-8020, "
        "runs/suite1b-confirmation-8/): a confirmation set runs the suite's own settings only, "
        "once, at the end.",
    )
    _add_shared_suite_options(
        s1b,
        list(range(47, 57)),
        "seeds, or a seed set: tuning, old-report, confirmation, confirmation-2, confirmation-3, "
        "confirmation-4, confirmation-5, confirmation-6, confirmation-7, confirmation-8 (default: "
        "old-report, 47-56)",
        parse_seeds_or_set,
    )
    _add_scale_options(s1b)
    s1b.add_argument(
        "--loads", type=parse_float_list, default=None, help="offered loads (default 0.9,1.0,1.1)"
    )
    s1b.add_argument(
        "--variants",
        type=lambda t: [v.strip() for v in t.split(",") if v.strip()],
        default=None,
        help="variants (default fgd,bestfit,solver,fgd+defrag,solver+defrag); add fgd-nudged "
        "(FGD with one decision changed) for the noise floor of the paired differences",
    )
    s1b.add_argument("--no-sweep", action="store_true", help="skip the restart-time sweep")
    _add_settings_option(s1b)
    s1b.set_defaults(func=cmd_suite_1b)

    from gpudefrag.cli_suite2 import add_suite2_command

    add_suite2_command(suites)

    from gpudefrag.cli_suite3 import add_suite3_command

    add_suite3_command(suites)


def add_sim_command(sub) -> None:
    """``gpudefrag sim``: one time-driven scenario of suite 1b."""
    sim = sub.add_parser(
        "sim",
        help="one time-driven scenario of suite 1b: summary and event hash",
        description="Run one (workload, seed, load, variant) of suite 1b with its settings and "
        "print a summary and the event-log hash; the hash equals the one suite 1b reports for "
        "the same scenario, restart time and --set settings.",
    )
    sim.add_argument(
        "--workload", default="openb_pod_list_default", help="openb pod list (default %(default)s)"
    )
    sim.add_argument("--seed", type=non_negative_int, default=42, help="seed (default 42)")
    sim.add_argument("--load", type=positive_float, default=1.0, help="offered GPU load (default 1.0)")
    sim.add_argument(
        "--variant",
        default="fgd",
        help="fgd, bestfit, solver, fgd+defrag, solver+defrag or fgd-nudged (default fgd)",
    )
    _add_scale_options(sim)
    sim.add_argument(
        "--restart-s",
        type=non_negative_float,
        default=None,
        help="seconds a moved pod takes to restart (default: the suite's restart_s, 60)",
    )
    _add_settings_option(sim)
    sim.add_argument(
        "--events",
        type=Path,
        default=None,
        metavar="FILE",
        help='write every processed event as a JSON line {"t_s", "event", "payload"} '
        "(written whole or not at all)",
    )
    sim.add_argument(
        "--plans",
        type=Path,
        default=None,
        metavar="FILE",
        help="write every executed plan as a CSV row: when it was made, the node it freed, its pod, "
        "how its reservation ended (fulfilled, bound_elsewhere, expired, released, open) and when, "
        "where and when the pod bound (written whole or not at all)",
    )
    sim.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    sim.set_defaults(func=cmd_sim)


def build_parser() -> argparse.ArgumentParser:
    from gpudefrag.cli_data import add_data_commands

    parser = OneLineParser(
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
    add_executor_options(calib)
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
        "--gpus",
        type=int,
        default=None,
        help="repeat the node list to at least this many GPUs (e.g. 1000000) and prepare the workload "
        "for that capacity",
    )
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
    bench.add_argument(
        "--gpus", type=int, default=None, help="instead: a fragmented cluster of N GPUs (e.g. 1000000)"
    )
    bench.add_argument("--topology", choices=("superpod", "nvl72"), default="superpod", help="with --gpus")
    bench.add_argument("--decisions", type=int, default=200, help="with --gpus: decisions per pod shape")
    bench.add_argument(
        "--leaf-nodes",
        type=int,
        default=None,
        help="with --gpus or --sweep and superpod: nodes per leaf group of the gang bench (default 32)",
    )
    bench.add_argument(
        "--gang-decisions",
        type=int,
        default=50,
        help="with --gpus or --sweep: gang placements per gang size (64, 512, 1024, 8192 GPUs; 0 = none)",
    )
    bench.add_argument(
        "--scan", action="store_true", help="with --gpus: scan every node per decision instead of the index"
    )
    bench.add_argument(
        "--sweep",
        type=parse_int_list,
        default=None,
        metavar="GPUS,GPUS,...",
        help="latency against cluster size (index and full scan) at these sizes, e.g. "
        "1000,10000,100000,1000000; writes OUT/scale_latency.csv and .png",
    )
    bench.add_argument("--out", type=Path, default=Path("runs/bench"), help="with --sweep: output folder")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(func=cmd_bench)

    add_suite_commands(sub)
    add_sim_command(sub)
    add_data_commands(sub)
    from gpudefrag.cli_gangsim import add_gangsim_command

    add_gangsim_command(sub)
    from gpudefrag.cli_k8s import add_k8s_commands

    add_k8s_commands(sub)
    from gpudefrag.cli_plan import add_plan_command

    add_plan_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
