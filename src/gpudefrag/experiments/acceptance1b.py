"""Suite 1b's acceptance checks, evaluated on the runs (never on hand-copied figures).

The thresholds are data of the suite (:class:`Acceptance1b`, held by ``Suite1bConfig.acceptance``
and settable with ``--set acceptance.<field>=<value>``):

* **Solver placement** is not worse than FGD at any load: the mean paired difference in GPU
  allocation (solver - FGD, over the seeds) is >= ``solver_min_mean_gain_pp`` at every load run.
* **Defragmentation** at load ``defrag_load``: some defrag variant beats FGD by
  >= ``defrag_min_gain_pp`` GPU allocation, with the paired 95 % CI's lower end above zero,
  while its mean paired p95 wait difference is at most ``defrag_max_p95_wait_added_s``.

A check whose variants or load were not run is reported as not run (``met`` is ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.experiments.config1b import Suite1bConfig
from gpudefrag.experiments.runs1b import Run1b, select_runs
from gpudefrag.experiments.stats import Paired, paired

CONTROL = "fgd"
SOLVER = "solver"
DEFRAG_VARIANTS = ("fgd+defrag", "solver+defrag")


@dataclass(frozen=True)
class Check:
    """One acceptance check: what it asks, whether the runs meet it (``None``: not run), and
    the figures measured."""

    check: str
    met: bool | None
    measured: str


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


def solver_check(runs: list[Run1b], config: Suite1bConfig) -> Check:
    """The solver's mean allocation difference to FGD is at least the threshold at every load."""
    floor_pp = config.acceptance.solver_min_mean_gain_pp
    check = f"solver placement: mean allocation difference to FGD >= {floor_pp:g} at every load"
    parts, met = [], True
    for load in config.loads:
        p = paired_to_control(runs, SOLVER, load, config.restart_s, "gpu_alloc_pct")
        if p is None:
            return Check(check, None, f"solver or FGD not run at load {load:.1f}")
        parts.append(f"load {load:.1f}: {p.diff.mean:+.3f} pp")
        met = met and p.diff.mean >= floor_pp
    return Check(check, met, "; ".join(parts))


def defrag_check(runs: list[Run1b], config: Suite1bConfig) -> Check:
    """Some defrag variant gains enough allocation over FGD, surely (CI above zero), without
    adding more p95 wait than allowed."""
    limits = config.acceptance
    load = limits.defrag_load
    check = (
        f"a defrag variant at load {load:.1f}: >= +{limits.defrag_min_gain_pp:g} pp allocation over FGD, "
        f"95 % CI above zero, p95 wait at most +{limits.defrag_max_p95_wait_added_s:g} s"
    )
    parts, met = [], False
    for v in DEFRAG_VARIANTS:
        alloc = paired_to_control(runs, v, load, config.restart_s, "gpu_alloc_pct")
        wait = paired_to_control(runs, v, load, config.restart_s, "wait_p95_s")
        if alloc is None or wait is None:
            continue
        ok = (
            alloc.diff.mean >= limits.defrag_min_gain_pp
            and alloc.diff.low > 0.0
            and wait.diff.mean <= limits.defrag_max_p95_wait_added_s
        )
        met = met or ok
        useful = paired_to_control(runs, v, load, config.restart_s, "gpu_useful_pct")
        net = "" if useful is None else f" (net of the GPU time migrations waste: {useful.diff.mean:+.2f} pp)"
        parts.append(
            f"{v}: {alloc.diff.mean:+.2f} pp [{alloc.diff.low:+.2f}, {alloc.diff.high:+.2f}], "
            f"p95 {wait.diff.mean:+.0f} s{net}"
        )
    if not parts:
        return Check(check, None, f"no defrag variant run with FGD at load {load:.1f}")
    return Check(check, met, "; ".join(parts))


def acceptance_checks(runs: list[Run1b], config: Suite1bConfig) -> list[Check]:
    """Every acceptance check of suite 1b, solver first."""
    return [solver_check(runs, config), defrag_check(runs, config)]


def markdown_lines(runs: list[Run1b], config: Suite1bConfig) -> list[str]:
    """The acceptance checks as a Markdown table (a verdict on the held-out seeds only)."""
    label = {True: "met", False: "**missed**", None: "not run"}
    lines = [
        "## Acceptance checks",
        "",
        "| check | verdict | measured (paired difference to FGD) |",
        "|---|---|---|",
    ]
    lines += [f"| {c.check} | {label[c.met]} | {c.measured} |" for c in acceptance_checks(runs, config)]
    return lines + [""]
