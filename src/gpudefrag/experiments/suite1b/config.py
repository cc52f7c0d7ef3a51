"""Every setting of suite 1b, as data: the variants, the defragmenter's and solver's settings,
and the thresholds its runs are checked against (:class:`Acceptance1b`).

How each setting was chosen, and the figures behind the choice: ``docs/tuning-suite1b.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from annotated_types import Interval

from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.checks import PercentPoints
from gpudefrag.experiments.common.inputs import DEFAULT_WORKLOAD
from gpudefrag.model.migration import MigrationModel
from gpudefrag.profiles.schema import DefragmentSettings, shipped
from gpudefrag.settings import Fraction, Seconds

VARIANTS = ("fgd", "bestfit", "solver", "fgd+defrag", "solver+defrag")
DEFRAG_VARIANTS = tuple(v for v in VARIANTS if v.endswith("+defrag"))
"""The variants with the defragmenter: the only ones the restart-time sweep can run."""
NUDGED_VARIANT = "fgd-nudged"
"""FGD with one decision changed where the metrics window starts
(:mod:`gpudefrag.experiments.suite1b.nudge`): its paired difference to FGD is the noise floor.  Run on
request (``--variants``), not by default."""
KNOWN_VARIANTS = VARIANTS + (NUDGED_VARIANT,)
"""Every variant suite 1b and ``gpudefrag sim`` can run."""
SOLVER_BATCH_PODS = 16
"""Pods per solver batch; only a session's first batch is solved, later ones take FGD's plan."""
RUNTIME_ESTIMATES = ("oracle", "history")
MAX_LOAD = 100.0
"""The largest offered load a run accepts: a guard against runaway input (arrivals, and so
memory and time, grow with the load), far above any load worth simulating."""
MAX_HORIZON_H = 24.0 * 14
"""The longest simulated horizon a run accepts, in hours."""

SEED_SETS: dict[str, tuple[int, ...]] = {
    "tuning": tuple(range(42, 47)),
    "old-report": tuple(range(47, 57)),
    "confirmation": tuple(range(1001, 1021)),
    "confirmation-2": tuple(range(2001, 2021)),
    "confirmation-3": tuple(range(3001, 3021)),
    "confirmation-4": tuple(range(4001, 4021)),
    "confirmation-5": tuple(range(5001, 5021)),
    "confirmation-6": tuple(range(6001, 6021)),
    "confirmation-7": tuple(range(7001, 7021)),
    "confirmation-8": tuple(range(8001, 8021)),
}
"""The suite's seed sets.  ``tuning``: settings are chosen here.  ``old-report``: the report set
of the earlier issues, spent.  ``confirmation`` ... ``confirmation-8``: 20 seeds each, picked
one after another, each run once, at the end, with the suite's own settings (its figures are
the ones reported) and spent from then on; which ran when, at which commit and with which
settings: docs/suite1b.md, "Seed sets"."""
RUN_ONCE_SEED_SETS = tuple(name for name in SEED_SETS if name.startswith("confirmation"))
"""The confirmation sets, in the order they were picked: each runs once, with the suite's own
settings."""


def check_variants(variants: tuple[str, ...] | list[str], label: str) -> None:
    """A :class:`ConfigError` naming ``label`` and the unknown names unless every one of
    ``variants`` is in :data:`KNOWN_VARIANTS`."""
    unknown = sorted(set(variants) - set(KNOWN_VARIANTS))
    if unknown:
        raise ConfigError(f"{label}: unknown {', '.join(unknown)} (known: {', '.join(KNOWN_VARIANTS)})")


def seed_set_name(seeds: tuple[int, ...] | list[int]) -> str | None:
    """The name of the seed set ``seeds`` are exactly (in any order), or ``None``."""
    wanted = sorted(seeds)
    return next((name for name, members in SEED_SETS.items() if sorted(members) == wanted), None)


@dataclass(frozen=True)
class Acceptance1b:
    """The thresholds suite 1b's runs are checked against (pp: percentage points of GPU
    allocation; differences are paired to FGD and averaged over the seeds)."""

    # the offered load the defragmentation check looks at
    defrag_load: Annotated[float, Interval(gt=0, le=MAX_LOAD)] = 1.0
    defrag_min_gain_pp: PercentPoints = 1.0  # least mean allocation gain of a defrag variant over FGD
    # most mean p95 wait it may add over FGD
    defrag_max_p95_wait_added_s: Annotated[float, Interval(ge=-86_400, le=86_400)] = 60.0
    defrag_min_net_gain_pp: PercentPoints = 0.8  # least mean gain net of migration waste (goodput_pct)
    # least share of its executed plans that were fulfilled
    min_fulfilled_plan_share: Annotated[float, Interval(ge=0, le=1)] = 0.70
    sweep_min_net_gain_pp: PercentPoints = 0.0  # least mean net gain of each sweep variant at each restart
    solver_min_mean_gain_pp: PercentPoints = 0.0  # least mean allocation gain of the solver at every load
    solver_min_ci_low_pp: PercentPoints = -0.1  # least lower end of the solver's paired 95 % CI at every load


_PROFILE = shipped("suite1b")
"""The suite's tuned solver and defragmenter settings (``profiles/suite1b.toml``, where each is
documented): the defaults below."""
_DEFRAG = _PROFILE.defragment


@dataclass(frozen=True)
class Suite1bConfig:
    """Every setting of suite 1b.

    A field comment ``doc: "<section>"`` names the section of ``docs/tuning-suite1b.md`` that
    records how the setting was chosen and the figures behind the choice.
    """

    workload: str = DEFAULT_WORKLOAD  # openb pod list the pods are resampled from
    seeds: tuple[Annotated[int, Interval(ge=0, le=2**32 - 1)], ...] = tuple(
        range(47, 57)
    )  # the old report set (SEED_SETS names them all)
    loads: tuple[Annotated[float, Interval(gt=0, le=MAX_LOAD)], ...] = (
        0.9,
        1.0,
        1.1,
    )  # offered GPU loads
    variants: tuple[str, ...] = VARIANTS  # see VARIANTS above
    n_nodes: Annotated[int, Interval(ge=1, le=100_000)] = 150  # openb GPU nodes sampled per seed
    # simulated hours per run, the first quarter warm-up
    horizon_h: Annotated[float, Interval(gt=0, le=MAX_HORIZON_H)] = 8.0
    restart_s: Seconds = 60.0  # a moved pod's restart time in the main runs
    eviction_grace_s: Seconds = 30.0  # a moved pod keeps running on its source this long
    # a pod whose room is being freed waits for it; doc: "Where executed plans end"
    hold_reserved_pods: bool = True
    # plans only for pods that waited this long; doc: "Where executed plans end"
    min_wait_before_plan_s: Seconds = _DEFRAG.min_wait_s
    sweep_restart_s: tuple[Seconds, ...] = (60.0, 300.0, 900.0, 1800.0, 3600.0)  # restart times of the sweep
    # offered load of the restart-time sweep
    sweep_load: Annotated[float, Interval(gt=0, le=MAX_LOAD)] = 1.0
    sweep_variants: tuple[str, ...] = ("fgd+defrag", "solver+defrag")  # variants of the restart-time sweep
    # defrag plan search; doc: "Defragmenter budget", "Where executed plans end" and, for
    # max_moves=12, the eleventh part of "Small-pod margin"
    planner: PlannerConfig = field(default_factory=lambda: _DEFRAG.planner)
    tick_interval_s: Seconds = (
        _DEFRAG.tick_interval_s
    )  # seconds between defrag ticks; doc: "Defragmenter budget"
    replan_after_s: Seconds = (
        _DEFRAG.replan_after_s
    )  # a blocked pod's next plan after this; doc: "Defragmenter budget"
    # plans executed per tick; doc: "Defragmenter budget"
    plans_per_tick: Annotated[int, Interval(ge=1, le=10_000)] = _DEFRAG.plans_per_tick
    # blocked pods tried per tick; doc: "Defragmenter budget"
    blocked_pods_per_tick: Annotated[int, Interval(ge=1, le=10_000)] = _DEFRAG.blocked_pods_per_tick
    # pods of <= 1 GPU tried per tick; doc: "Small-pod margin"
    small_pods_per_tick: Annotated[int, Interval(ge=0, le=10_000)] = _DEFRAG.small_pods_per_tick
    # plans for pods of <= 1 GPU per tick; doc: "Small-pod margin"
    small_plans_per_tick: Annotated[int, Interval(ge=1, le=10_000)] = _DEFRAG.small_plans_per_tick
    # hysteresis margin of plans for pods of <= 1 GPU (None: planner.margin); doc: "Small-pod margin"
    small_margin: Annotated[float, Interval(gt=-1, le=1000)] | None = _DEFRAG.small_margin
    # GPUs that must stay free for a 2+ GPU plan; doc: "Headroom gate", "Solver: whole-GPU sharing pods"
    headroom_fraction: Fraction = _DEFRAG.headroom_fraction
    solver: SolverConfig = field(default_factory=lambda: _PROFILE.allocate.solver)  # the batch placer
    # the solver's age_max_gpus next to the defragmenter (None: solver.age_max_gpus, every pod
    # ages; 1 was the default from 4ea030b to the eleventh part); doc: "Solver: aging"
    defrag_age_max_gpus: Annotated[int, Interval(ge=0, le=8)] | None = None
    # simulated seconds per scheduling decision
    decision_latency_s: Annotated[float, Interval(ge=0, le=3600)] = 0.05
    # what the defragmenter and the solver know of run times; doc: "Run-time estimates"
    runtime_estimates: Literal["oracle", "history"] = "history"
    acceptance: Acceptance1b = field(default_factory=Acceptance1b)  # thresholds; doc: "Acceptance checks"

    def defragment_settings(self) -> DefragmentSettings:
        """The defragmenter's settings these fields make (:mod:`gpudefrag.profiles.schema`)."""
        return DefragmentSettings.model_construct(
            planner=self.planner,
            tick_interval_s=self.tick_interval_s,
            replan_after_s=self.replan_after_s,
            plans_per_tick=self.plans_per_tick,
            blocked_pods_per_tick=self.blocked_pods_per_tick,
            small_pods_per_tick=self.small_pods_per_tick,
            small_plans_per_tick=self.small_plans_per_tick,
            small_margin=self.small_margin,
            headroom_fraction=self.headroom_fraction,
            min_wait_s=self.min_wait_before_plan_s,
        )

    def __post_init__(self) -> None:
        if self.runtime_estimates not in RUNTIME_ESTIMATES:
            raise ConfigError(
                f"runtime_estimates={self.runtime_estimates!r}: expected one of "
                f"{', '.join(RUNTIME_ESTIMATES)}"
            )
        if self.planner.migration != MigrationModel():
            raise ConfigError(
                "planner.migration is the run's migration model: set restart_s and eviction_grace_s instead"
            )
        self._check_ranges()

    def _check_ranges(self) -> None:
        """What one field's range cannot say (each range is declared on its field and checked
        at the edges, :mod:`gpudefrag.settings`): the variants exist, the sweep's are defrag
        variants."""
        check_variants(self.variants, "variants")
        unknown = [v for v in self.sweep_variants if v not in DEFRAG_VARIANTS]
        if unknown:
            raise ConfigError(
                f"sweep_variants={self.sweep_variants}: {', '.join(unknown)} not among the defrag "
                f"variants ({', '.join(DEFRAG_VARIANTS)})"
            )
