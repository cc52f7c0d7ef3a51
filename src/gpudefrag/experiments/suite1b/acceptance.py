"""Suite 1b's acceptance checks, evaluated on the runs (never on hand-copied figures).

The thresholds are data of the suite (:class:`Acceptance1b`, held by ``Suite1bConfig.acceptance``
and settable with ``--set acceptance.<field>=<value>``).  Differences are paired to FGD over the
seeds; "net" is GPU allocation net of the GPU time migrations waste (``goodput_pct``).

* **Solver placement** is not worse than FGD at any load: at every load run, the mean paired
  difference in GPU allocation (solver - FGD) is >= ``solver_min_mean_gain_pp`` and its 95 %
  CI's lower end is >= ``solver_min_ci_low_pp``.
* **Defragmentation** at load ``defrag_load``: some defrag variant, at once, beats FGD by
  >= ``defrag_min_gain_pp`` allocation and by >= ``defrag_min_net_gain_pp`` net, both with the
  paired 95 % CI's lower end above zero; adds at most ``defrag_max_p95_wait_added_s`` of mean
  p95 wait; and had >= ``min_fulfilled_plan_share`` of its executed plans fulfilled (the
  blocked pod bound on the room the plan freed: ``reservations_fulfilled`` over
  ``reservations_made``, summed over the seeds; a variant that executed no plan misses this).
* **Restart-time sweep**: every sweep variant, at every sweep restart time, gains a mean
  >= ``sweep_min_net_gain_pp`` net over FGD (FGD at the main restart time, as FGD never moves).
  A sweep point not run leaves the check not run, unless a point that ran already misses.

A check whose variants or load were not run is reported as not run (``met`` is ``None``).
"""

from __future__ import annotations

from gpudefrag.experiments.common.checks import Check, checks_table
from gpudefrag.experiments.common.stats import Paired, paired
from gpudefrag.experiments.suite1b.config import DEFRAG_VARIANTS, Suite1bConfig
from gpudefrag.experiments.suite1b.runs import Run1b, select_runs

CONTROL = "fgd"
SOLVER = "solver"


def _matched(
    runs: list[Run1b],
    variant: str,
    load: float,
    restart_s: float,
    metric: str,
    control_restart_s: float | None,
) -> tuple[list[int], list[float], list[float]]:
    """Seeds both ``variant`` and FGD ran, with ``metric`` of each (FGD at ``control_restart_s``,
    default ``restart_s``)."""
    ctl_restart = restart_s if control_restart_s is None else control_restart_s
    treat = {r.seed: r.metrics[metric] for r in select_runs(runs, variant, load, restart_s)}
    control = {r.seed: r.metrics[metric] for r in select_runs(runs, CONTROL, load, ctl_restart)}
    seeds = sorted(treat.keys() & control.keys())
    return seeds, [treat[s] for s in seeds], [control[s] for s in seeds]


def paired_to_control(
    runs: list[Run1b],
    variant: str,
    load: float,
    restart_s: float,
    metric: str,
    control_restart_s: float | None = None,
) -> Paired | None:
    """Paired ``variant - FGD`` on ``metric`` over the seeds both ran (``None`` if none)."""
    seeds, treat, control = _matched(runs, variant, load, restart_s, metric, control_restart_s)
    return paired(treat, control) if seeds else None


def per_seed_differences(
    runs: list[Run1b], variant: str, load: float, restart_s: float, metric: str
) -> dict[int, float]:
    """``variant - FGD`` on ``metric`` for each seed both ran."""
    seeds, treat, control = _matched(runs, variant, load, restart_s, metric, None)
    return {s: a - b for s, a, b in zip(seeds, treat, control)}


def plans_and_fulfilled_share(
    runs: list[Run1b], variant: str, load: float, restart_s: float
) -> tuple[float, float | None]:
    """``variant``'s executed plans per run (one reservation each) at (``load``, ``restart_s``),
    and the share of them whose reservation was fulfilled, summed over the seeds (``None``
    without a plan)."""
    rs = select_runs(runs, variant, load, restart_s)
    made = sum(r.metrics["reservations_made"] for r in rs)
    fulfilled = sum(r.metrics["reservations_fulfilled"] for r in rs)
    per_run = made / len(rs) if rs else 0.0
    return per_run, (fulfilled / made if made > 0 else None)


def _ci(p: Paired, digits: int = 2) -> str:
    return f"{p.diff.mean:+.{digits}f} pp [{p.diff.low:+.{digits}f}, {p.diff.high:+.{digits}f}]"


def solver_check(runs: list[Run1b], config: Suite1bConfig) -> Check:
    """At every load, the solver's mean allocation difference to FGD and its CI's lower end
    are at least their thresholds."""
    limits = config.acceptance
    floor_pp, ci_floor_pp = limits.solver_min_mean_gain_pp, limits.solver_min_ci_low_pp
    check = (
        f"solver placement: mean allocation difference to FGD >= {floor_pp:g}, "
        f"95 % CI lower end >= {ci_floor_pp:g}, at every load"
    )
    parts, met = [], True
    for load in config.loads:
        p = paired_to_control(runs, SOLVER, load, config.restart_s, "gpu_alloc_pct")
        if p is None:
            return Check(check, None, f"solver or FGD not run at load {load:.1f}")
        parts.append(f"load {load:.1f}: {_ci(p, 3)}")
        met = met and p.diff.mean >= floor_pp and p.diff.low >= ci_floor_pp
    return Check(check, met, "; ".join(parts))


def defrag_check(runs: list[Run1b], config: Suite1bConfig) -> Check:
    """Some defrag variant gains enough allocation over FGD, and enough net of migration waste,
    surely (CIs above zero), without adding more p95 wait than allowed, and most of its
    executed plans were fulfilled."""
    limits = config.acceptance
    load = limits.defrag_load
    check = (
        f"a defrag variant at load {load:.1f}: >= +{limits.defrag_min_gain_pp:g} pp allocation and "
        f">= +{limits.defrag_min_net_gain_pp:g} pp net of migration waste over FGD, 95 % CIs above "
        f"zero, p95 wait at most +{limits.defrag_max_p95_wait_added_s:g} s, "
        f">= {100 * limits.min_fulfilled_plan_share:g} % of executed plans fulfilled"
    )
    parts, met = [], False
    for v in DEFRAG_VARIANTS:
        alloc = paired_to_control(runs, v, load, config.restart_s, "gpu_alloc_pct")
        useful = paired_to_control(runs, v, load, config.restart_s, "goodput_pct")
        wait = paired_to_control(runs, v, load, config.restart_s, "wait_p95_s")
        if alloc is None or useful is None or wait is None:
            continue
        plans, share = plans_and_fulfilled_share(runs, v, load, config.restart_s)
        short = [
            name
            for name, ok in (
                ("allocation", alloc.diff.mean >= limits.defrag_min_gain_pp and alloc.diff.low > 0.0),
                ("net", useful.diff.mean >= limits.defrag_min_net_gain_pp and useful.diff.low > 0.0),
                ("p95 wait", wait.diff.mean <= limits.defrag_max_p95_wait_added_s),
                ("fulfilled plans", share is not None and share >= limits.min_fulfilled_plan_share),
            )
            if not ok
        ]
        met = met or not short
        fulfilled = (
            "no plan executed"
            if share is None
            else f"{100 * share:.0f} % of {plans:.1f} plans per run fulfilled"
        )
        verdict = "" if not short else f" (short on {', '.join(short)})"
        parts.append(
            f"{v}: allocation {_ci(alloc)}, net {_ci(useful)}, p95 {wait.diff.mean:+.0f} s, "
            f"{fulfilled}{verdict}"
        )
    if not parts:
        return Check(check, None, f"no defrag variant run with FGD at load {load:.1f}")
    return Check(check, met, "; ".join(parts))


def sweep_check(runs: list[Run1b], config: Suite1bConfig) -> Check:
    """Every sweep variant gains at least the threshold net of migration waste over FGD at
    every restart time of the sweep (FGD at the main restart time)."""
    floor_pp = config.acceptance.sweep_min_net_gain_pp
    load = config.sweep_load
    check = (
        f"restart-time sweep at load {load:.1f}: every sweep variant >= {floor_pp:+g} pp net of "
        f"migration waste over FGD at every restart time"
    )
    restarts = list(dict.fromkeys(config.sweep_restart_s))
    parts, missing, met = [], [], True
    for v in dict.fromkeys(config.sweep_variants):
        cells = []
        for r in restarts:
            p = paired_to_control(runs, v, load, r, "goodput_pct", control_restart_s=config.restart_s)
            if p is None:
                missing.append(f"{v} at {r:g} s")
                continue
            cells.append(f"{r:g} s {p.diff.mean:+.2f}")
            met = met and p.diff.mean >= floor_pp
        if cells:
            parts.append(f"{v}: {', '.join(cells)} pp")
    if not parts:
        return Check(check, None, f"sweep not run (with FGD at load {load:.1f})")
    if missing:  # a point below the floor is a miss; otherwise the missing points leave it open
        return Check(check, None if met else False, "; ".join(parts + [f"not run: {', '.join(missing)}"]))
    return Check(check, met, "; ".join(parts))


def acceptance_checks(runs: list[Run1b], config: Suite1bConfig) -> list[Check]:
    """Every acceptance check of suite 1b: solver, defragmentation, restart-time sweep."""
    return [solver_check(runs, config), defrag_check(runs, config), sweep_check(runs, config)]


def markdown_lines(runs: list[Run1b], config: Suite1bConfig) -> list[str]:
    """The acceptance checks as a Markdown table (a verdict on the held-out seeds only)."""
    return checks_table(acceptance_checks(runs, config), measured="measured (paired difference to FGD)")
