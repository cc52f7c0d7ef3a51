"""The power of the solver check (gpudefrag.experiments.common.stats), the report's noise-floor table and
its table of what the defragmentation check needs (gpudefrag.experiments.suite1b.noise), on figures
worked out by hand and on made-up runs."""

from __future__ import annotations

import math

import pytest

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.stats import check_pass_probability, mean_to_pass
from gpudefrag.experiments.suite1b.config import Acceptance1b
from gpudefrag.experiments.suite1b.noise import defrag_power_lines, needed_to_pass, noise_floor_lines
from gpudefrag.experiments.suite1b.suite import METRICS, Run1b, Suite1bConfig


def test_a_no_effect_change_meets_the_check_when_its_mean_clears_the_interval_bar() -> None:
    # sd 0.33 pp, 20 seeds: standard error 0.33 / sqrt(20) = 0.07379; t(0.975, 19) = 2.0930, so
    # the lower end clears -0.1 once the mean reaches -0.1 + 2.0930 * 0.07379 = 0.05444.  A true
    # mean of 0 gets there with chance 1 - Phi(0.05444 / 0.07379) = 1 - Phi(0.7378) = 0.2303.
    assert check_pass_probability(0.0, 0.33, 20, 0.0, -0.1) == pytest.approx(0.2303, abs=1e-4)
    # 80 % of the time: the bar plus z(0.8) = 0.8416 standard errors, 0.05444 + 0.06210.
    assert mean_to_pass(0.33, 20, 0.0, -0.1) == pytest.approx(0.1165, abs=1e-4)
    assert check_pass_probability(mean_to_pass(0.33, 20, 0.0, -0.1), 0.33, 20, 0.0, -0.1) == pytest.approx(
        0.8
    )


def test_with_a_narrow_spread_the_mean_bar_binds() -> None:
    # sd 0.05, 20 seeds: -0.1 + 2.0930 * 0.01118 = -0.0766 < 0, so the mean >= 0 bar decides:
    # a true mean of 0 meets it half the time, and 80 % needs 0.8416 * 0.01118 = 0.00941.
    assert check_pass_probability(0.0, 0.05, 20, 0.0, -0.1) == pytest.approx(0.5)
    assert mean_to_pass(0.05, 20, 0.0, -0.1) == pytest.approx(0.00941, abs=1e-5)


def test_more_seeds_make_the_check_pass_a_no_effect_change_more_often_up_to_half() -> None:
    # Past about 70 seeds (0.33 * 2.0 / sqrt(n) < 0.1) the mean >= 0 bar binds: a coin flip.
    chances = [check_pass_probability(0.0, 0.33, n, 0.0, -0.1) for n in (10, 20, 40, 80)]
    assert chances == sorted(chances)
    assert chances[0] < 0.1 and chances[2] < 0.5
    assert chances[-1] == pytest.approx(0.5)


@pytest.mark.parametrize("sd, n", [(0.0, 20), (0.3, 1), (math.nan, 20)])
def test_power_needs_a_spread_and_two_seeds(sd: float, n: int) -> None:
    with pytest.raises(ValueError, match="n >= 2 and sd > 0"):
        check_pass_probability(0.0, sd, n, 0.0, -0.1)
    with pytest.raises(ValueError, match="n >= 2 and sd > 0"):
        mean_to_pass(sd, n, 0.0, -0.1)


def _run(variant: str, load: float, seed: int, alloc: float) -> Run1b:
    metrics = {m: 0.0 for m in METRICS}
    metrics.update(gpu_alloc_pct=alloc, goodput_pct=alloc)
    return Run1b(variant, load, seed, 60.0, metrics, "hash", 0.0)


CONFIG = Suite1bConfig(seeds=(1, 2, 3, 4), loads=(1.0,), variants=("fgd", "solver", "fgd-nudged"))


def _runs(solver: list[float], nudged: list[float] | None) -> list[Run1b]:
    """FGD at 90 % on seeds 1-4, the solver and the nudged FGD ``solver[k]`` / ``nudged[k]`` pp
    above it on seed k + 1."""
    runs = []
    for k, seed in enumerate(CONFIG.seeds):
        runs += [_run("fgd", 1.0, seed, 90.0), _run("solver", 1.0, seed, 90.0 + solver[k])]
        if nudged is not None:
            runs.append(_run("fgd-nudged", 1.0, seed, 90.0 + nudged[k]))
    return runs


def _row(lines: list[str]) -> list[str]:
    (row,) = [line for line in lines if line.startswith("| 1.0 |")]
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_the_table_gives_the_solvers_spread_and_what_it_leaves_of_the_check() -> None:
    # Solver differences +0.1, -0.1, +0.3, -0.3: sd = sqrt((0.01 + 0.01 + 0.09 + 0.09) / 3) = 0.2582.
    row = _row(noise_floor_lines(_runs([0.1, -0.1, 0.3, -0.3], None), CONFIG))
    assert row[1] == "0.26"
    assert row[2] == f"{100 * check_pass_probability(0.0, 0.2582, 4, 0.0, -0.1):.0f} %"
    assert row[3] == f"{mean_to_pass(0.2582, 4, 0.0, -0.1):+.2f}"
    assert row[4:] == ["not run", "not run"]


def test_the_table_gives_the_nudged_fgds_difference_and_spread() -> None:
    # Nudged differences +0.02, -0.02, +0.04, 0.0: mean +0.01, sd sqrt((1 + 9 + 9 + 1) / 3) / 100 = 0.0258.
    row = _row(noise_floor_lines(_runs([0.1, -0.1, 0.3, -0.3], [0.02, -0.02, 0.04, 0.0]), CONFIG))
    assert row[4].startswith("+0.01 [")
    assert row[5] == "0.03"


def test_identical_runs_leave_the_power_undefined_and_no_runs_leave_no_table() -> None:
    row = _row(noise_floor_lines(_runs([0.0] * 4, None), CONFIG))
    assert row[1:4] == ["0.00", "n/a", "n/a"]
    fgd_only = [r for r in _runs([0.0] * 4, None) if r.variant == "fgd"]
    assert noise_floor_lines(fgd_only, CONFIG) == []


def test_an_unknown_variant_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r"fgd-nudge .*known: .*fgd-nudged"):
        Suite1bConfig(variants=("fgd", "fgd-nudge"))


def test_suite_1b_reports_the_noise_floor_when_asked_for_the_nudged_fgd(mirror, tmp_path) -> None:
    from gpudefrag.cli import main

    argv = ["suite", "1b", "--seeds", "42,43", "--hours", "0.25", "--nodes", "8", "--loads", "6.0"]
    argv += ["--variants", "fgd,solver,fgd-nudged", "--no-sweep", "--jobs", "1", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "## Noise floor" in report
    (row,) = [line for line in report.splitlines() if line.startswith("| 6.0 |")]
    assert "not run" not in row  # both the solver's and the nudged FGD's columns are filled


def _defrag_runs(alloc: list[float], net: list[float], p95: list[float]) -> list[Run1b]:
    """FGD (90 % allocation and net, p95 wait 100 s) and solver+defrag ``alloc[k]`` / ``net[k]``
    pp and ``p95[k]`` s above it, on seeds 1-4 at load 1.0."""
    runs = []
    for k, seed in enumerate((1, 2, 3, 4)):
        for variant, a, u, w in (("fgd", 0.0, 0.0, 0.0), ("solver+defrag", alloc[k], net[k], p95[k])):
            metrics = {m: 0.0 for m in METRICS}
            metrics.update(gpu_alloc_pct=90.0 + a, goodput_pct=90.0 + u, wait_p95_s=100.0 + w)
            runs.append(Run1b(variant, 1.0, seed, 60.0, metrics, "hash", 0.0))
    return runs


DEFRAG_CONFIG = Suite1bConfig(seeds=(1, 2, 3, 4), loads=(1.0,), variants=("fgd", "solver+defrag"))


def _defrag_rows(lines: list[str]) -> dict[str, list[str]]:
    rows = [line for line in lines if line.startswith("| solver+defrag |")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    return {c[1]: c[2:] for c in cells}


def test_the_defrag_table_gives_the_true_value_each_part_needs_by_hand() -> None:
    # Allocation +1.0, +1.2, +0.8, +1.4: mean +1.1, sd sqrt(0.2 / 3) = 0.2582, standard error on 4
    # seeds 0.1291.  The CI part needs a mean of t(0.975, 3) * 0.1291 = 3.1824 * 0.1291 = 0.411,
    # below the bar of 1.0, so the bar binds: 1.0 + z(0.8) * 0.1291 = 1.0 + 0.8416 * 0.1291 = 1.109;
    # on 8 seeds 1.0 + 0.8416 * 0.0913 = 1.077.  Net is 0.3 lower each seed: bar 0.8, so +0.909
    # and +0.877.  p95 +0, +40, +20, +60 s: mean +30, sd sqrt(2000 / 3) = 25.82; at most +60 s 80 %
    # of the time needs 60 - 0.8416 * 12.91 = 49.1 s (8 seeds: 60 - 0.8416 * 9.129 = 52.3 s).
    alloc = [1.0, 1.2, 0.8, 1.4]
    rows = _defrag_rows(
        defrag_power_lines(_defrag_runs(alloc, [a - 0.3 for a in alloc], [0, 40, 20, 60]), DEFRAG_CONFIG)
    )
    assert rows["allocation (pp)"] == [">= +1", "+1.10", "0.26", "+1.11", "+1.08"]
    assert rows["net of migration waste (pp)"] == [">= +0.8", "+0.80", "0.26", "+0.91", "+0.88"]
    assert rows["p95 wait (s)"] == ["<= +60", "+30", "26", "+49", "+52"]


def test_with_a_wide_spread_the_interval_above_zero_binds() -> None:
    # Allocation +0, +2, -1, +3: sd sqrt((1 + 1 + 4 + 4) / 3) = 1.826, standard error 0.9129; the
    # CI's lower end is above zero once the mean reaches 3.1824 * 0.9129 = 2.905, past the bar, so
    # 80 % needs 2.905 + 0.8416 * 0.9129 = 3.674.
    alloc = [0.0, 2.0, -1.0, 3.0]
    rows = _defrag_rows(defrag_power_lines(_defrag_runs(alloc, alloc, [0, 0, 0, 0]), DEFRAG_CONFIG))
    assert rows["allocation (pp)"][3] == "+3.67"
    assert needed_to_pass("gpu_alloc_pct", 1.826, 4, DEFRAG_CONFIG.acceptance) == pytest.approx(
        3.674, abs=2e-3
    )
    assert rows["p95 wait (s)"][2:] == ["0", "n/a", "n/a"]  # identical waits: no spread, no power
    with pytest.raises(ValueError, match="wait_p50_s"):
        needed_to_pass("wait_p50_s", 1.0, 4, DEFRAG_CONFIG.acceptance)


def test_the_defrag_table_is_left_out_without_a_defrag_variant_and_follows_the_bars() -> None:
    no_defrag = [r for r in _defrag_runs([1.0] * 4, [1.0] * 4, [0] * 4) if r.variant == "fgd"]
    assert defrag_power_lines(no_defrag, DEFRAG_CONFIG) == []
    stricter = Suite1bConfig(
        seeds=(1, 2, 3, 4),
        loads=(1.0,),
        variants=("fgd", "solver+defrag"),
        acceptance=Acceptance1b(defrag_min_net_gain_pp=1.0),
    )
    alloc = [1.0, 1.2, 0.8, 1.4]
    rows = _defrag_rows(defrag_power_lines(_defrag_runs(alloc, alloc, [0, 40, 20, 60]), stricter))
    assert rows["net of migration waste (pp)"][:1] == [">= +1"]
    assert rows["net of migration waste (pp)"][3] == rows["allocation (pp)"][3] == "+1.11"
