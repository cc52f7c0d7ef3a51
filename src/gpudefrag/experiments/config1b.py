"""Every setting of suite 1b, as data: the variants, the defragmenter's and solver's settings,
and the thresholds its runs are checked against (:class:`Acceptance1b`).

How each setting was chosen, and the figures behind the choice: ``docs/tuning-suite1b.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpudefrag.batch.placer import SolverConfig
from gpudefrag.defrag.planner import PlannerConfig
from gpudefrag.errors import ConfigError
from gpudefrag.experiments.inputs import DEFAULT_WORKLOAD
from gpudefrag.model.migration import MigrationModel

VARIANTS = ("fgd", "bestfit", "solver", "fgd+defrag", "solver+defrag")
DEFRAG_VARIANTS = tuple(v for v in VARIANTS if v.endswith("+defrag"))
"""The variants with the defragmenter: the only ones the restart-time sweep can run."""
NUDGED_VARIANT = "fgd-nudged"
"""FGD with one decision changed where the metrics window starts
(:mod:`gpudefrag.experiments.nudge`): its paired difference to FGD is the noise floor.  Run on
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
of the earlier issues, run many times while settings were chosen, so spent for reporting.
``confirmation``: 20 seeds picked on 2026-11-30 that no run had used; run once, on 2026-12-01
at commit 44eea55 (issue 15), so now spent.  ``confirmation-2``: 20 seeds picked on 2026-12-01
after that run; run once, on 2026-12-03 at commit e93b22a, so now spent.  ``confirmation-3``: 20
seeds picked on 2026-12-03 after that run; run once, on 2026-12-05 at commit db69fb7, so now
spent.  ``confirmation-4``: 20 seeds picked on 2026-12-05 after that run; run once, on 2026-12-05
at commit 874d3d6, so now spent.  ``confirmation-5``: 20 seeds picked on 2026-12-05 after that
run; run once, on 2026-12-05 at commit 4ea030b, so now spent.  ``confirmation-6``: 20 seeds
picked on 2026-12-05 after that run; run once, started on 2026-12-05 at commit 673730e, so now
spent.  ``confirmation-7``: 20 seeds picked on 2026-12-05 with that run; run once, on
2026-12-06 at commit 60a61e8 (the settings of 673730e, unchanged), so now spent.
``confirmation-8``: 20 seeds picked on 2026-12-06 after that run, never run yet: the next
confirmation.  A confirmation set runs once, at the end, with the suite's own settings, and its
figures are the ones reported."""
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

    defrag_load: float = 1.0  # the offered load the defragmentation check looks at
    defrag_min_gain_pp: float = 1.0  # least mean allocation gain of a defrag variant over FGD
    defrag_max_p95_wait_added_s: float = 60.0  # most mean p95 wait it may add over FGD
    defrag_min_net_gain_pp: float = 0.8  # least mean gain net of migration waste (gpu_useful_pct)
    min_fulfilled_plan_share: float = 0.70  # least share of its executed plans that were fulfilled
    sweep_min_net_gain_pp: float = 0.0  # least mean net gain of each sweep variant at each restart
    solver_min_mean_gain_pp: float = 0.0  # least mean allocation gain of the solver at every load
    solver_min_ci_low_pp: float = -0.1  # least lower end of the solver's paired 95 % CI at every load


@dataclass(frozen=True)
class Suite1bConfig:
    """Every setting of suite 1b.

    A field comment ``doc: "<section>"`` names the section of ``docs/tuning-suite1b.md`` that
    records how the setting was chosen and the figures behind the choice.
    """

    workload: str = DEFAULT_WORKLOAD  # openb pod list the pods are resampled from
    seeds: tuple[int, ...] = tuple(range(47, 57))  # the old report set (SEED_SETS names them all)
    loads: tuple[float, ...] = (0.9, 1.0, 1.1)  # offered GPU loads
    variants: tuple[str, ...] = VARIANTS  # see VARIANTS above
    n_nodes: int = 150  # openb GPU nodes sampled per seed
    horizon_h: float = 8.0  # simulated hours per run, the first quarter warm-up
    restart_s: float = 60.0  # a moved pod's restart time in the main runs
    eviction_grace_s: float = 30.0  # a moved pod keeps running on its source this long
    # a pod whose room is being freed waits for it; doc: "Where executed plans end"
    hold_reserved_pods: bool = True
    min_wait_before_plan_s: float = (
        0.0  # plans only for pods that waited this long; doc: "Where executed plans end"
    )
    sweep_restart_s: tuple[float, ...] = (60.0, 300.0, 900.0, 1800.0, 3600.0)  # restart times of the sweep
    sweep_load: float = 1.0  # offered load of the restart-time sweep
    sweep_variants: tuple[str, ...] = ("fgd+defrag", "solver+defrag")  # variants of the restart-time sweep
    # defrag plan search; doc: "Defragmenter budget", "Where executed plans end" and, for
    # max_moves=12, the eleventh part of "Small-pod margin"
    planner: PlannerConfig = field(
        default_factory=lambda: PlannerConfig(max_moves=12, margin=0.2, harm_weight=1.0, wait_draws=32)
    )
    tick_interval_s: float = 30.0  # seconds between defrag ticks; doc: "Defragmenter budget"
    replan_after_s: float = 120.0  # a blocked pod's next plan after this; doc: "Defragmenter budget"
    plans_per_tick: int = 2  # plans executed per tick; doc: "Defragmenter budget"
    blocked_pods_per_tick: int = 4  # blocked pods tried per tick; doc: "Defragmenter budget"
    small_pods_per_tick: int = 12  # pods of <= 1 GPU tried per tick; doc: "Small-pod margin"
    small_plans_per_tick: int = 4  # plans for pods of <= 1 GPU per tick; doc: "Small-pod margin"
    # hysteresis margin of plans for pods of <= 1 GPU (None: planner.margin); doc: "Small-pod margin"
    small_margin: float | None = -0.5
    # GPUs that must stay free for a 2+ GPU plan; doc: "Headroom gate", "Solver: whole-GPU sharing pods"
    headroom_fraction: float = 0.035
    solver: SolverConfig = field(  # batch placer; doc: the "Solver: ..." sections
        default_factory=lambda: SolverConfig(
            min_solver_batch=2,
            deterministic_time=0.005,
            candidates_per_pod=6,
            max_patterns_per_node=24,
            protect_blocked=8,
            lifetime_ties=True,  # FGD-tied nodes: the one that drains last; doc: "Solver: lifetime ties"
            age_weight_milli_per_s=1.0,  # waiting pods gain 1 milli per second; doc: "Solver: aging"
            # sharing pods above 700 milli count as 1,000; doc: "Solver: whole-GPU sharing pods"
            whole_gpu_above_milli=700,
        )
    )
    # the solver's age_max_gpus next to the defragmenter (None: solver.age_max_gpus, every pod
    # ages; 1 was the default from 4ea030b to the eleventh part); doc: "Solver: aging"
    defrag_age_max_gpus: int | None = None
    decision_latency_s: float = 0.05  # simulated seconds per scheduling decision
    # what the defragmenter and the solver know of run times; doc: "Run-time estimates"
    runtime_estimates: str = "history"
    acceptance: Acceptance1b = field(default_factory=Acceptance1b)  # thresholds; doc: "Acceptance checks"

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
        """Settings out of range are a :class:`ConfigError` naming the setting (never a failure
        in the middle of a run)."""
        times = {"restart_s": self.restart_s, "eviction_grace_s": self.eviction_grace_s,
                 "decision_latency_s": self.decision_latency_s, "tick_interval_s": self.tick_interval_s,
                 "replan_after_s": self.replan_after_s, "min_wait_before_plan_s": self.min_wait_before_plan_s}  # fmt: skip
        for name, value in times.items():
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name}={value}: must be a finite number >= 0")
        if not 0.0 <= self.headroom_fraction < 1.0:
            raise ConfigError(f"headroom_fraction={self.headroom_fraction}: must be in [0, 1)")
        if self.small_margin is not None and not (
            math.isfinite(self.small_margin) and self.small_margin > -1.0
        ):
            raise ConfigError(f"small_margin={self.small_margin}: must be a finite number above -1 (or none)")
        if self.defrag_age_max_gpus is not None and self.defrag_age_max_gpus < 0:
            raise ConfigError(f"defrag_age_max_gpus={self.defrag_age_max_gpus}: must be >= 0 (or none)")
        if not (math.isfinite(self.horizon_h) and 0 < self.horizon_h <= MAX_HORIZON_H):
            raise ConfigError(f"horizon_h={self.horizon_h}: must be > 0 and at most {MAX_HORIZON_H:g}")
        if not all(math.isfinite(x) and 0 < x <= MAX_LOAD for x in self.loads):
            raise ConfigError(f"loads={self.loads}: each must be > 0 and at most {MAX_LOAD:g}")
        if any(s < 0 for s in self.seeds):
            raise ConfigError(f"seeds: must be >= 0, got {min(self.seeds)}")
        if not all(math.isfinite(x) and x >= 0 for x in self.sweep_restart_s):
            raise ConfigError(f"sweep_restart_s={self.sweep_restart_s}: each must be a finite number >= 0")
        check_variants(self.variants, "variants")
        unknown = [v for v in self.sweep_variants if v not in DEFRAG_VARIANTS]
        if unknown:
            raise ConfigError(
                f"sweep_variants={self.sweep_variants}: {', '.join(unknown)} not among the defrag "
                f"variants ({', '.join(DEFRAG_VARIANTS)})"
            )
