"""Suite 1b's noise floor: how far paired differences to FGD spread when little or nothing
changes, and what that leaves of the power of the solver and defragmentation checks.

Per load, from the runs (never from hand-copied figures):

* the per-seed standard deviation of ``solver - FGD`` (GPU allocation);
* with that spread and the seeds run, the chance that a change with no true effect meets the
  solver check, and the true gain that meets it 80 % of the time
  (:func:`~gpudefrag.experiments.common.stats.check_pass_probability`,
  :func:`~gpudefrag.experiments.common.stats.mean_to_pass`);
* when ``fgd-nudged`` ran (FGD with one decision changed where the metrics window starts,
  :mod:`gpudefrag.experiments.suite1b.nudge`), its paired difference to FGD and that difference's
  per-seed spread: what one changed decision alone does.

And, for every defrag variant at the defragmentation check's load, each part of that check
(allocation, net of migration waste, p95 wait): this run's mean difference to FGD, its per-seed
standard deviation, and the true difference that meets the part 80 % of the time on the seeds
run and on twice as many (:func:`defrag_power_lines`).  A part whose needed value lies close to
the mean measured is met or missed by the draw of seeds.
"""

from __future__ import annotations

import math

import numpy as np

from gpudefrag.experiments.common.stats import check_pass_probability, mean_ci, mean_to_pass
from gpudefrag.experiments.suite1b.acceptance import SOLVER, per_seed_differences
from gpudefrag.experiments.suite1b.config import DEFRAG_VARIANTS, NUDGED_VARIANT, Acceptance1b, Suite1bConfig
from gpudefrag.experiments.suite1b.runs import Run1b

METRIC = "gpu_alloc_pct"
POWER = 0.8
"""The chance of meeting a check that both tables ask the true difference for."""


def _spread(diffs: dict[int, float]) -> float | None:
    """Per-seed standard deviation of ``diffs`` (``None`` below two seeds)."""
    return float(np.std(list(diffs.values()), ddof=1)) if len(diffs) >= 2 else None


def noise_floor_lines(runs: list[Run1b], config: Suite1bConfig) -> list[str]:
    """The noise-floor table of the report (module docstring); empty when neither the solver
    nor ``fgd-nudged`` ran with FGD."""
    limits = config.acceptance
    rows = []
    for load in config.loads:
        solver = per_seed_differences(runs, SOLVER, load, config.restart_s, METRIC)
        nudged = per_seed_differences(runs, NUDGED_VARIANT, load, config.restart_s, METRIC)
        sd = _spread(solver)
        if sd is None and len(nudged) < 2:
            continue
        cells = ["n/a"] * 3
        if sd is not None:
            cells[0] = f"{sd:.2f}"
        if sd:  # identical runs (sd 0) leave the power undefined
            args = (sd, len(solver), limits.solver_min_mean_gain_pp, limits.solver_min_ci_low_pp)
            cells[1] = f"{100 * check_pass_probability(0.0, *args):.0f} %"
            cells[2] = f"{mean_to_pass(*args, probability=POWER):+.2f}"
        if len(nudged) >= 2:
            ci = mean_ci(list(nudged.values()))
            cells += [f"{ci.mean:+.2f} [{ci.low:+.2f}, {ci.high:+.2f}]", f"{_spread(nudged):.2f}"]
        else:
            cells += ["not run", "not run"]
        rows.append(f"| {load:.1f} | {' | '.join(cells)} |")
    if not rows:
        return []
    return [
        "## Noise floor",
        "",
        "How far paired differences to FGD spread per seed (GPU allocation, pp).  With the solver's "
        "spread and these seeds, a change with no true effect meets the solver check with the "
        f"chance shown, and a change needs the true gain shown to meet it {100 * POWER:.0f} % of the "
        f"time.  `{NUDGED_VARIANT}` is FGD with one decision changed where the metrics window "
        "starts (run it with `--variants`): a variant whose difference spreads about as much is not "
        "told apart from one changed decision by these seeds.",
        "",
        "| load | solver - FGD: per-seed SD | a no-effect change meets the solver check | "
        f"true gain to meet it {100 * POWER:.0f} % of the time | {NUDGED_VARIANT} - FGD | "
        f"{NUDGED_VARIANT} - FGD: per-seed SD |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


DEFRAG_PARTS = (
    ("allocation", "gpu_alloc_pct", "pp"),
    ("net of migration waste", "goodput_pct", "pp"),
    ("p95 wait", "wait_p95_s", "s"),
)
"""The parts of the defragmentation check: (name, metric, unit)."""


def _bar(metric: str, limits: Acceptance1b) -> tuple[float, bool]:
    """``metric``'s bar in the defragmentation check, and whether it is a ceiling (p95 wait)
    rather than a floor (allocation, net)."""
    bars = {
        "gpu_alloc_pct": (limits.defrag_min_gain_pp, False),
        "goodput_pct": (limits.defrag_min_net_gain_pp, False),
        "wait_p95_s": (limits.defrag_max_p95_wait_added_s, True),
    }
    if metric not in bars:
        raise ValueError(f"{metric!r} is no part of the defragmentation check")
    return bars[metric]


def needed_to_pass(metric: str, sd: float, n: int, limits: Acceptance1b) -> float:
    """The true mean difference to FGD on ``metric`` that meets its part of the defragmentation
    check :data:`POWER` of the time on ``n`` seeds of per-seed deviation ``sd``.

    Allocation and net ask a mean >= their bar and a 95 % CI's lower end above zero (taken as
    >= 0 here); the p95 wait asks a mean <= its bar, so the answer is the bar less
    ``z(POWER)`` standard errors."""
    bar, ceiling = _bar(metric, limits)
    if ceiling:
        return -mean_to_pass(sd, n, -bar, -math.inf, probability=POWER)
    return mean_to_pass(sd, n, bar, 0.0, probability=POWER)


def defrag_power_lines(runs: list[Run1b], config: Suite1bConfig) -> list[str]:
    """The report's table of what each part of the defragmentation check needs (module
    docstring); empty when no defrag variant ran with FGD on two or more seeds at its load."""
    limits = config.acceptance
    load = limits.defrag_load
    rows = []
    for variant in DEFRAG_VARIANTS:
        for name, metric, unit in DEFRAG_PARTS:
            diffs = per_seed_differences(runs, variant, load, config.restart_s, metric)
            sd = _spread(diffs)
            if sd is None:
                continue
            digits = 0 if unit == "s" else 2
            n = len(diffs)
            mean = float(np.mean(list(diffs.values())))
            needed = (
                [f"{needed_to_pass(metric, sd, k, limits):+.{digits}f}" for k in (n, 2 * n)]
                if sd > 0
                else ["n/a", "n/a"]
            )
            bar, ceiling = _bar(metric, limits)
            rows.append(
                f"| {variant} | {name} ({unit}) | {'<=' if ceiling else '>='} {bar:+g} | {mean:+.{digits}f} | "
                f"{sd:.{digits}f} | {' | '.join(needed)} |"
            )
    if not rows:
        return []
    return [
        "## What the defragmentation check needs",
        "",
        f"At load {load:.1f}, paired to FGD.  The last two columns give the true difference that "
        f"meets each part of the check {100 * POWER:.0f} % of the time, on the seeds run and on "
        "twice as many, with this run's per-seed spread: a part whose mean measured lies near that "
        "value is met or missed by the draw of seeds.",
        "",
        f"| variant | part | bar | mean | per-seed SD | true value for {100 * POWER:.0f} %, these seeds | "
        f"... twice as many seeds |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
