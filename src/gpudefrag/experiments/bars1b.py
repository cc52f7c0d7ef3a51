"""Issue 4's bars for suite 1b, checked on the runs (never on hand-copied figures).

* **Solver placement** is not worse than FGD at any load: the mean paired difference in GPU
  allocation (solver - FGD, over the seeds) is >= 0 at every load run.
* **Defragmentation** at load 1.0: some defrag variant beats FGD by >= +1.0 pp GPU
  allocation, with the paired 95 % CI's lower end above zero, while its mean paired p95 wait
  difference is at most +60 s.

A bar whose variants or load were not run is reported as not checked (``met`` is ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.experiments.stats import Paired, paired
from gpudefrag.experiments.suite1b import Run1b, Suite1bConfig, select_runs

CONTROL = "fgd"
SOLVER = "solver"
DEFRAG_VARIANTS = ("fgd+defrag", "solver+defrag")
DEFRAG_LOAD = 1.0
DEFRAG_MIN_GAIN_PP = 1.0
DEFRAG_MAX_P95_WAIT_S = 60.0


@dataclass(frozen=True)
class BarCheck:
    """One bar: what it asks, whether the runs meet it (``None``: not run), and the figures."""

    bar: str
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


def solver_bar(runs: list[Run1b], config: Suite1bConfig) -> BarCheck:
    bar = "solver placement: mean allocation difference to FGD >= 0 at every load"
    parts, met = [], True
    for load in config.loads:
        p = paired_to_control(runs, SOLVER, load, config.restart_s, "gpu_alloc_pct")
        if p is None:
            return BarCheck(bar, None, f"solver or FGD not run at load {load:.1f}")
        parts.append(f"load {load:.1f}: {p.diff.mean:+.3f} pp")
        met = met and p.diff.mean >= 0.0
    return BarCheck(bar, met, "; ".join(parts))


def defrag_bar(runs: list[Run1b], config: Suite1bConfig) -> BarCheck:
    bar = (
        f"a defrag variant at load {DEFRAG_LOAD:.1f}: >= +{DEFRAG_MIN_GAIN_PP:g} pp allocation over FGD, "
        f"95 % CI above zero, p95 wait at most +{DEFRAG_MAX_P95_WAIT_S:g} s"
    )
    parts, met = [], False
    for v in DEFRAG_VARIANTS:
        alloc = paired_to_control(runs, v, DEFRAG_LOAD, config.restart_s, "gpu_alloc_pct")
        wait = paired_to_control(runs, v, DEFRAG_LOAD, config.restart_s, "wait_p95_s")
        if alloc is None or wait is None:
            continue
        ok = (
            alloc.diff.mean >= DEFRAG_MIN_GAIN_PP
            and alloc.diff.low > 0.0
            and wait.diff.mean <= DEFRAG_MAX_P95_WAIT_S
        )
        met = met or ok
        useful = paired_to_control(runs, v, DEFRAG_LOAD, config.restart_s, "gpu_useful_pct")
        net = "" if useful is None else f" (net of the GPU time migrations waste: {useful.diff.mean:+.2f} pp)"
        parts.append(
            f"{v}: {alloc.diff.mean:+.2f} pp [{alloc.diff.low:+.2f}, {alloc.diff.high:+.2f}], "
            f"p95 {wait.diff.mean:+.0f} s{net}"
        )
    if not parts:
        return BarCheck(bar, None, f"no defrag variant run with FGD at load {DEFRAG_LOAD:.1f}")
    return BarCheck(bar, met, "; ".join(parts))


def bar_checks(runs: list[Run1b], config: Suite1bConfig) -> list[BarCheck]:
    return [solver_bar(runs, config), defrag_bar(runs, config)]


def markdown_lines(runs: list[Run1b], config: Suite1bConfig) -> list[str]:
    """The bars as a Markdown table (meaningful as issue 4's verdict on the held-out seeds only)."""
    label = {True: "met", False: "**missed**", None: "not run"}
    lines = [
        "## Bars (issue 4)",
        "",
        "| bar | verdict | measured (paired difference to FGD) |",
        "|---|---|---|",
    ]
    lines += [f"| {c.bar} | {label[c.met]} | {c.measured} |" for c in bar_checks(runs, config)]
    return lines + [""]
