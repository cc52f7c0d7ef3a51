"""``gpudefrag suite 1a``, ``suite 1b`` and ``sim``: batch placement on FGD's protocol, and the
time-driven simulation with departures and defragmentation (one scenario with ``sim``).
The seed sets and their history: docs/suite1b.md."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import LOAD, SEED, name_list, number_list, refuse, seed_list, workload_name
from gpudefrag.cli_fgd import DEFAULT_OUT, add_executor_options
from gpudefrag.errors import ConfigError
from gpudefrag.settings import flag, value

__all__ = ["add_sim_command", "add_suite_commands", "seed_set_folder"]

SUITE1B = "gpudefrag.experiments.suite1b.config:Suite1bConfig"
SOLVER = "gpudefrag.batch.solver_config:SolverConfig"
KNOWN_VARIANTS = ("fgd", "bestfit", "solver", "fgd+defrag", "solver+defrag", "fgd-nudged")
"""Suite 1b's variants (:data:`gpudefrag.experiments.suite1b.config.KNOWN_VARIANTS`, which a test keeps
equal), named here so that the parser does not load the suite."""
SUITE1B_HOURS = 8.0
"""``--hours`` default: Suite1bConfig.horizon_h (a test keeps them equal)."""
SUITE1B_NODES = 150
"""``--nodes`` default: Suite1bConfig.n_nodes (a test keeps them equal)."""


# ----------------------------------------------------------------------------- commands
def cmd_suite_1a(args: argparse.Namespace) -> int:
    from gpudefrag.batch.solver_config import SolverConfig
    from gpudefrag.experiments.common.executor import RunExecutor
    from gpudefrag.experiments.suite1a.report import diagnose, write_report
    from gpudefrag.experiments.suite1a.suite import Suite1aConfig, run_suite

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
    folder = args.out or DEFAULT_OUT / "suite1a"
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


class SeedsOrSet:
    """A seed set's name (a key of :data:`gpudefrag.experiments.suite1b.config.SEED_SETS`) or seeds as
    :func:`~gpudefrag.cli_args.seed_list` takes them."""

    def __init__(self) -> None:
        self.seeds = seed_list()
        self.item = self.seeds.item
        self.__name__ = "a seed set or seeds"

    def __call__(self, text: str) -> list[int]:
        from gpudefrag.experiments.suite1b.config import SEED_SETS

        if text.strip() in SEED_SETS:
            return list(SEED_SETS[text.strip()])
        return self.seeds(text)


def cmd_pooled_1b(args: argparse.Namespace) -> int:
    """``suite 1b --from DIR [DIR ...]``: the report of the pooled runs of results folders."""
    from gpudefrag.experiments.suite1b.pool import pool_folders
    from gpudefrag.experiments.suite1b.report import write_report

    refuse(
        args,
        {
            "set": "--set",
            "loads": "--loads",
            "variants": "--variants",
            "no_sweep": "--no-sweep",
            "jobs": "--jobs",
            "dask": "--dask",
        },
        "not with --from (it reports runs that exist)",
    )
    changed = {
        "--seeds": list(args.seeds) != list(range(47, 57)),
        "--hours": args.hours != SUITE1B_HOURS,
        "--nodes": args.nodes != SUITE1B_NODES,
        "--workload": args.workload != "openb_pod_list_default",
    }
    given = [flag for flag, yes in changed.items() if yes]
    if given:
        raise ConfigError(f"{', '.join(given)}: not with --from (the folders' settings.json say what ran)")
    folder = args.out or DEFAULT_OUT / "suite1b-pooled"
    if any(folder.resolve() == f.resolve() for f in args.from_folders):
        raise ConfigError(f"--out {folder}: one of the --from folders (its results would be overwritten)")
    pooled = pool_folders(list(args.from_folders))
    paths = write_report(pooled.runs, pooled.config, folder, pooled.wall_s, pooled.title)
    print((folder / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_suite_1b(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.common.executor import RunExecutor
    from gpudefrag.experiments.suite1b.config import RUN_ONCE_SEED_SETS, seed_set_name
    from gpudefrag.experiments.suite1b.report import write_report
    from gpudefrag.experiments.suite1b.suite import build_config, run_suite

    if args.from_folders is not None:
        return cmd_pooled_1b(args)
    seeds = tuple(args.seeds)
    set_name = seed_set_name(seeds)
    if set_name in RUN_ONCE_SEED_SETS and args.set:
        raise ConfigError(
            f"--seeds {set_name} runs the suite's own settings only, once, at the end: "
            "choose settings with --seeds tuning and --set, without this set"
        )
    fields: dict[str, Any] = {"seeds": seeds}
    if args.loads:
        fields["loads"] = tuple(args.loads)
    if args.variants:
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
    folder = args.out or DEFAULT_OUT / seed_set_folder(set_name)
    paths = write_report(runs, config, folder, wall, title)
    print((folder / "report.md").read_text())
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.suite1b.sim import format_json, format_table, run_sim
    from gpudefrag.experiments.suite1b.suite import build_config

    config = build_config(args.workload, args.hours, args.nodes, args.set or [])
    restart_s = config.restart_s if args.restart_s is None else args.restart_s
    summary = run_sim(
        config, args.variant, args.load, args.seed, restart_s, args.set or [], args.events, args.plans
    )
    print(format_json(summary) if args.json else format_table(summary))
    return 0


# ----------------------------------------------------------------------------- parsers
def _add_shared_suite_options(
    parser: argparse.ArgumentParser, seeds: list[int], seeds_help: str, parse: Any
) -> None:
    """Options both suites take: workload, seeds (read by ``parse``), worker processes or a Dask
    scheduler, output folder, progress bar."""
    parser.add_argument(
        "--workload",
        type=workload_name,
        default="openb_pod_list_default",
        help="openb pod list (default %(default)s)",
    )
    parser.add_argument("--seeds", type=parse, default=seeds, help=seeds_help)
    add_executor_options(parser)
    parser.add_argument(
        "--out", type=Path, default=None, help="folder the report goes to (default: under ./runs)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_settings_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change a setting of suite 1b, e.g. planner.harm_weight=3, plans_per_tick=1, "
        "solver.deterministic_time=0.01, runtime_estimates=oracle (the defragmenter then knows "
        "every pod's true run time), acceptance.defrag_min_gain_pp=1.5 (repeatable; each checked "
        "against its range)",
    )


def _add_scale_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hours",
        type=flag(SUITE1B, "horizon_h"),
        default=SUITE1B_HOURS,
        help="simulated hours per run (default 8)",
    )
    parser.add_argument(
        "--nodes",
        type=flag(SUITE1B, "n_nodes"),
        default=SUITE1B_NODES,
        help="nodes sampled per seed (default 150)",
    )


def add_suite_commands(sub: Any) -> None:
    """``gpudefrag suite 1a|1b|2|3``, each with only its own options."""
    suite = sub.add_parser(
        "suite",
        help="experiment suites (1a: batch placement; 1b: time-driven + defrag; 2: gangs on a topology; "
        "3: failures, spares, preemption, elastic nodes)",
        description="Run an experiment suite; each writes a Markdown report, PNG charts and CSV "
        "tables.  See `gpudefrag suite 1a --help` and the others.",
    )
    suites = suite.add_subparsers(dest="suite", metavar="{1a,1b,2,3}", required=True)

    s1a = suites.add_parser(
        "1a",
        help="FGD's arrival-only protocol with arrivals placed in batches by CP-SAT",
        description="FGD's protocol with arrivals decided in batches of B by the CP-SAT batch "
        "placer, against FGD and BestFit (runs/suite1a/).",
    )
    _add_shared_suite_options(s1a, list(range(42, 52)), "seeds (default 42-51)", seed_list())
    s1a.add_argument(
        "--batch-sizes",
        type=number_list(value(Annotated[int, Interval(ge=1, le=4096)]), "1,16,64"),
        default=[1, 16, 64],
        help="solver batch sizes (default 1,16,64)",
    )
    s1a.add_argument(
        "--deterministic-time",
        type=flag(SOLVER, "deterministic_time"),
        default=0.01,
        help="CP-SAT deterministic work limit per batch (default 0.01)",
    )
    s1a.add_argument(
        "--time-limit",
        type=flag(SOLVER, "time_limit_s"),
        default=0.5,
        help="wall-clock budget per batch in seconds (default 0.5)",
    )
    s1a.add_argument(
        "--wall-clock",
        action="store_true",
        help="stop on the wall-clock budget only (faster machines do more; not reproducible)",
    )
    s1a.add_argument(
        "--candidates",
        type=flag(SOLVER, "candidates_per_pod"),
        default=8,
        help="FGD-top nodes per pod (default 8)",
    )
    s1a.set_defaults(func=cmd_suite_1a)

    s1b = suites.add_parser(
        "1b",
        help="time-driven simulation with departures, queueing and defragmentation",
        description="Time-driven simulation with departures, queueing and checkpoint-aware "
        "defragmentation at loads 0.9/1.0/1.1, plus a restart-time sweep, checked against the "
        "suite's acceptance checks.  Choose settings on the tuning seeds (--seeds tuning, with "
        "--set); a confirmation set runs the suite's own settings only, once, at the end.  The "
        "seed sets, where each writes and which are spent: docs/suite1b.md.",
    )
    _add_shared_suite_options(
        s1b,
        list(range(47, 57)),
        "seeds, or a seed set: tuning, old-report, confirmation, confirmation-2 ... confirmation-8 "
        "(default: old-report, 47-56)",
        SeedsOrSet(),
    )
    _add_scale_options(s1b)
    s1b.add_argument(
        "--loads", type=number_list(LOAD, "0.9,1.0"), default=None, help="offered loads (default 0.9,1.0,1.1)"
    )
    s1b.add_argument(
        "--variants",
        type=name_list(KNOWN_VARIANTS, "variant"),
        default=None,
        help="variants (default fgd,bestfit,solver,fgd+defrag,solver+defrag); add fgd-nudged "
        "(FGD with one decision changed) for the noise floor of the paired differences",
    )
    s1b.add_argument("--no-sweep", action="store_true", help="skip the restart-time sweep")
    s1b.add_argument(
        "--from",
        dest="from_folders",
        type=Path,
        nargs="+",
        metavar="DIR",
        default=None,
        help="instead of running: the report of these results folders pooled (identical settings, "
        "seeds apart; no tuning seeds), e.g. runs/suite1b-confirmation runs/suite1b-confirmation-2; "
        "writes runs/suite1b-pooled unless --out",
    )
    _add_settings_option(s1b)
    s1b.set_defaults(func=cmd_suite_1b)

    from gpudefrag.cli_suite2 import add_suite2_command
    from gpudefrag.cli_suite3 import add_suite3_command

    add_suite2_command(suites)
    add_suite3_command(suites)


def add_sim_command(sub: Any) -> None:
    """``gpudefrag sim``: one time-driven scenario of suite 1b."""
    sim = sub.add_parser(
        "sim",
        help="one time-driven scenario of suite 1b: summary and event hash",
        description="Run one (workload, seed, load, variant) of suite 1b with its settings and "
        "print a summary and the event-log hash; the hash equals the one suite 1b reports for "
        "the same scenario, restart time and --set settings.",
    )
    sim.add_argument(
        "--workload",
        type=workload_name,
        default="openb_pod_list_default",
        help="openb pod list (default %(default)s)",
    )
    sim.add_argument("--seed", type=SEED, default=42, help="seed (default 42)")
    sim.add_argument("--load", type=LOAD, default=1.0, help="offered GPU load (default 1.0)")
    sim.add_argument("--variant", choices=KNOWN_VARIANTS, default="fgd", help="the variant (default fgd)")
    _add_scale_options(sim)
    sim.add_argument(
        "--restart-s",
        type=flag(SUITE1B, "restart_s"),
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
