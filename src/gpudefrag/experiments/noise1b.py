"""Suite 1b's noise floor: how far paired differences to FGD spread when little or nothing
changes, and what that leaves of the solver check's power.

Per load, from the runs (never from hand-copied figures):

* the per-seed standard deviation of ``solver - FGD`` (GPU allocation);
* with that spread and the seeds run, the chance that a change with no true effect meets the
  solver check, and the true gain that meets it 80 % of the time
  (:func:`~gpudefrag.experiments.stats.check_pass_probability`,
  :func:`~gpudefrag.experiments.stats.mean_to_pass`);
* when ``fgd-nudged`` ran (FGD with one decision changed where the metrics window starts,
  :mod:`gpudefrag.experiments.nudge`), its paired difference to FGD and that difference's
  per-seed spread: what one changed decision alone does.
"""

from __future__ import annotations

import numpy as np

from gpudefrag.experiments.acceptance1b import SOLVER, per_seed_differences
from gpudefrag.experiments.config1b import NUDGED_VARIANT, Suite1bConfig
from gpudefrag.experiments.runs1b import Run1b
from gpudefrag.experiments.stats import check_pass_probability, mean_ci, mean_to_pass

METRIC = "gpu_alloc_pct"
POWER = 0.8
"""The chance of meeting the check that :func:`noise_floor_lines` asks the true gain for."""


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
