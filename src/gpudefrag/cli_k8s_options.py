"""Options that ``gpudefrag scheduler``, ``defrag`` and ``plan`` share, each declared once, so that
``plan`` plans with exactly the settings the controller runs with and places with the
scheduler's: the controller's budgets (fields of :class:`~gpudefrag.k8s.defrag.DefragConfig`),
the scheduler's placement (policy, topology levels, the solver's rules: fields of
:class:`~gpudefrag.batch.placer.SolverConfig`), and a snapshot read from files with the time it
is evaluated at.  Every range comes from the dataclass field (:mod:`gpudefrag.settings`).
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudefrag.cli_args import POLICY_NAMES_CLI
from gpudefrag.errors import InputError
from gpudefrag.settings import flag

if TYPE_CHECKING:
    from gpudefrag.batch.solver_config import SolverConfig
    from gpudefrag.k8s.snapshot import SnapshotObjects
    from gpudefrag.profiles.schema import Profile

__all__ = [
    "SNAPSHOT_MAX_AGE_S",
    "add_controller_options",
    "add_now_option",
    "add_placement_options",
    "add_profile_option",
    "controller_settings",
    "placement_core",
    "placer",
    "profile",
    "read_snapshot",
    "snapshot_now",
]

SNAPSHOT_MAX_AGE_S = 3600.0
"""A snapshot whose newest time is older than this is not evaluated at the clock's time unless
``--now`` says when to evaluate it: lost work would be priced over the whole gap."""

POLICIES = (*POLICY_NAMES_CLI, "solver")
PLANNER = "gpudefrag.defrag.planner_config:PlannerConfig"
DEFRAGMENT = "gpudefrag.profiles.schema:DefragmentSettings"
SOLVER = "gpudefrag.batch.solver_config:SolverConfig"
"""The scheduler's policies: a per-pod policy, or ``solver`` (CP-SAT batches warm-started from FGD)."""


def add_profile_option(p: argparse.ArgumentParser) -> None:
    """``--config PROFILE``: the actions and their settings (``scheduler``, ``defrag``, ``plan``)."""
    p.add_argument(
        "--config",
        type=profile_arg,
        default=None,
        metavar="PROFILE",
        help="a profile: a shipped one by name (kubernetes, suite1b) or a TOML/YAML file "
        "(docs/profiles.md); default kubernetes; the flags below override its settings",
    )


def profile(args: argparse.Namespace) -> Profile:
    from gpudefrag.profiles.schema import shipped

    return args.config if args.config is not None else shipped("kubernetes")


def add_controller_options(p: argparse.ArgumentParser) -> None:
    """The controller's budgets and cost model (``defrag`` and ``plan``)."""
    from gpudefrag.k8s.defrag_config import DefragConfig

    d = DefragConfig()
    p.add_argument(
        "--max-moves",
        type=flag(PLANNER, "max_moves"),
        default=None,
        help="moves per plan at most (default: the profile's; kubernetes: 8)",
    )
    p.add_argument(
        "--headroom",
        type=flag(DEFRAGMENT, "headroom_fraction"),
        default=None,
        help="share of the GPUs that must stay free for a 2+ GPU pod's plan (default: the profile's; kubernetes: 0.05)",
    )
    p.add_argument(
        "--restart-s",
        type=flag(DefragConfig, "restart_s"),
        default=d.restart_s,
        help=f"seconds a moved pod takes to restart, in the cost model (default {d.restart_s:g})",
    )
    p.add_argument(
        "--reservation-s",
        type=flag(DefragConfig, "reservation_s"),
        default=d.reservation_s,
        help=f"how long a freed node stays reserved for its pod (default {d.reservation_s:g})",
    )


def controller_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`DefragConfig` fields the profile and ``add_controller_options`` set."""
    return {
        "defragment": profile(args).defragment,
        "max_moves": args.max_moves,
        "headroom_fraction": args.headroom,
        "restart_s": args.restart_s,
        "reservation_s": args.reservation_s,
    }


def add_placement_options(p: argparse.ArgumentParser) -> None:
    """The scheduler's placement: policy, topology levels and the solver's rules (over the
    profile's ``[allocate]``)."""
    p.add_argument(
        "--policy",
        choices=POLICIES,
        default=None,
        help="fgd, bestfit, gpupacking, gpuclustering, dotprod, random, or solver (CP-SAT batches) "
        "(default: the profile's placer; kubernetes: fgd)",
    )
    p.add_argument(
        "--topology-levels",
        type=Path,
        default=None,
        metavar="FILE",
        help="Kueue Topology (YAML/TOML, levels[].nodeLabel) for gangs' topology",
    )
    p.add_argument(
        "--age-weight",
        type=flag(SOLVER, "age_weight_milli_per_s"),
        default=None,
        metavar="MILLI_PER_S",
        help="solver: milli-GPU a pod's wait adds per second to its worth (default: the profile's; suite1b: 1)",
    )
    p.add_argument(
        "--age-max-gpus",
        type=flag(SOLVER, "age_max_gpus"),
        default=None,
        help="solver: only pods of at most this many GPUs earn the age bonus, 0 every pod (default: the profile's)",
    )
    p.add_argument(
        "--whole-gpu-above",
        type=flag(SOLVER, "whole_gpu_above_milli"),
        default=None,
        metavar="MILLI",
        help="solver: a sharing pod asking more milli-GPU than this counts as a whole GPU, 0 off "
        "(default: the profile's; suite1b: 700)",
    )


def placer(args: argparse.Namespace) -> str:
    """The placement policy: ``--policy``, else the profile's placer."""
    return str(args.policy) if args.policy is not None else profile(args).allocate.placer


def solver_config(args: argparse.Namespace) -> SolverConfig:
    """The batch placer's settings: the profile's, the solver flags over them."""
    from dataclasses import replace

    flags = {
        "age_weight_milli_per_s": args.age_weight,
        "age_max_gpus": args.age_max_gpus,
        "whole_gpu_above_milli": args.whole_gpu_above,
    }
    return replace(profile(args).allocate.solver, **{k: v for k, v in flags.items() if v is not None})


def profile_arg(text: str) -> Profile:
    """``--config``: a shipped profile's name or a file; a bad one, or one asking for what the
    Kubernetes driver does not run yet, is a one-line usage error naming the file and field."""
    from gpudefrag.errors import InputError
    from gpudefrag.profiles.schema import profile_arg as read

    try:
        got = read(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    beyond = got.beyond_pods()
    if beyond is not None:
        raise argparse.ArgumentTypeError(
            f"{text}: {beyond}; the Kubernetes driver runs allocate and defragment for pods"
        )
    return got


def topology_levels(args: argparse.Namespace) -> list[str]:
    if args.topology_levels is None:
        return []
    from gpudefrag.k8s.topology_config import load_topology_levels

    return load_topology_levels(args.topology_levels)


def placement_core(args: argparse.Namespace) -> Any:
    """The scheduler's :class:`~gpudefrag.k8s.policy.DecisionCore` for the profile and flags."""
    from gpudefrag.k8s.policy import DecisionCore

    return DecisionCore(placer(args), topology_levels(args), solver=solver_config(args))


# ----------------------------------------------------------------------------- snapshots
def _now(text: str) -> float | str:
    """``--now``: ``snapshot``, epoch seconds or an RFC 3339 time."""
    if text.strip() == "snapshot":
        return "snapshot"
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is not None:
        if not 0 <= value < 1e11:
            raise argparse.ArgumentTypeError(f"epoch seconds out of range: {text!r}")
        return value
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not 'snapshot', an RFC 3339 time or epoch seconds: {text!r}"
        ) from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def add_now_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--now",
        type=_now,
        default=None,
        metavar="TIME",
        help="evaluate the snapshot at TIME: RFC 3339, epoch seconds, or 'snapshot' (its newest "
        "timestamp); default the clock, refused for a snapshot older than an hour",
    )


def read_snapshot(paths: list[Path]) -> SnapshotObjects:
    """The objects of one snapshot in one or more files (errors name the file and object)."""
    from gpudefrag.k8s.snapshot import read_objects, snapshot_objects

    return snapshot_objects(read_objects(paths), ", ".join(str(p) for p in paths))


def snapshot_now(snap: SnapshotObjects, now: float | str | None, clock: float | None = None) -> float:
    """The time to evaluate ``snap`` at: ``--now`` when given (``snapshot``: its newest time);
    else the clock, unless the snapshot is older than :data:`SNAPSHOT_MAX_AGE_S` (an
    :class:`InputError` giving its age and the ``--now`` to pass)."""
    from gpudefrag.k8s.snapshot import snapshot_time_s
    from gpudefrag.k8s.timefmt import to_rfc3339

    taken = snapshot_time_s([*snap.nodes, *snap.pods])
    if now == "snapshot":
        if taken is None:
            raise InputError(snap.source, "--now snapshot: the snapshot carries no timestamp")
        return taken
    if isinstance(now, float):
        return now
    clock_s = time.time() if clock is None else clock
    if taken is not None and clock_s - taken > SNAPSHOT_MAX_AGE_S:
        raise InputError(
            snap.source,
            f"its newest timestamp is {to_rfc3339(taken, micros=False)}, {_age(clock_s - taken)} ago: "
            "work lost since each pod's checkpoint would be priced up to now; pass --now snapshot "
            "to evaluate it as it was, or --now TIME",
        )
    return clock_s


def _age(s: float) -> str:
    for unit, size in (("days", 86_400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if s >= 2 * size:
            return f"{s / size:,.1f} {unit}"
    return f"{s:,.0f} s"
