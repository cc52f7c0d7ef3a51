"""Behaviour kept through the decision-core refactor: runs give the hashes recorded before it, at
commit 876d304 -- suite 1b's event-log hashes (``fixtures/suite1b_seeds42-46_event_hashes.csv``,
all 75 runs of ``gpudefrag suite 1b --seeds 42-46 --no-sweep``) and suite 1a's decision hashes
(``fixtures/suite1a_seeds42-46_decisions_sha256.csv``, all 25 runs of ``gpudefrag suite 1a
--seeds 42-46``).

A few run here (a per-pod policy; the solver with the defragmenter, which exercises every
component of the simulator, the batch placer and the planner; FGD's protocol with and without
the solver); the suites rerun all of them.

Issue 15 changed suite 1b's defaults (drawn natural waits, a lower margin, pods held for their
room, age bonuses and lifetime ties in the solver), so suite-1b runs here use
:data:`RECORDED_WITH`, the settings the fixture was recorded with: the averaged natural wait is
still there and still gives the same runs.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.experiments.suite1a.suite import Suite1aConfig, run_variant
from gpudefrag.experiments.suite1b.scenario import run_scenario
from gpudefrag.experiments.suite1b.suite import Suite1bConfig

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE = FIXTURES / "suite1b_seeds42-46_event_hashes.csv"
FIXTURE_1A = FIXTURES / "suite1a_seeds42-46_decisions_sha256.csv"
RECORDED_WITH = replace(
    Suite1bConfig(),
    hold_reserved_pods=False,
    planner=PlannerConfig(max_moves=8, margin=0.5, harm_weight=1.0, wait_draws=0),
    small_pods_per_tick=4,
    small_plans_per_tick=2,
    small_margin=None,
    headroom_fraction=0.05,
    solver=SolverConfig(
        min_solver_batch=2,
        deterministic_time=0.005,
        candidates_per_pod=6,
        max_patterns_per_node=24,
        protect_blocked=8,
    ),
)
"""Suite 1b's settings when the fixture was recorded (before issue 15)."""


def recorded_1a() -> dict[tuple[str, int], str]:
    with FIXTURE_1A.open() as fh:
        return {(r["variant"], int(r["seed"])): r["decisions_sha256"] for r in csv.DictReader(fh)}


def recorded() -> dict[tuple[str, float, int, float], str]:
    with FIXTURE.open() as fh:
        return {
            (r["variant"], float(r["load"]), int(r["seed"]), float(r["restart_s"])): r["event_hash"]
            for r in csv.DictReader(fh)
        }


def test_the_fixture_holds_every_run_of_the_tuning_suite() -> None:
    runs = recorded()
    config = Suite1bConfig()
    assert len(runs) == len(config.variants) * len(config.loads) * 5
    assert {k[0] for k in runs} == set(config.variants)


@pytest.mark.parametrize(("variant", "load", "seed"), [("fgd", 0.9, 42), ("solver+defrag", 1.0, 43)])
def test_a_run_reproduces_its_recorded_event_hash(mirror, variant: str, load: float, seed: int) -> None:
    result, _ = run_scenario(RECORDED_WITH, variant, load, seed, 60.0)
    assert result.event_hash == recorded()[(variant, load, seed, 60.0)]


def test_the_1a_fixture_holds_every_run_of_the_suite() -> None:
    assert set(recorded_1a()) == {(v, s) for v in Suite1aConfig().variants() for s in range(42, 47)}


@pytest.mark.parametrize(("variant", "seed"), [("fgd", 42), ("solver-b16", 43)])
def test_a_1a_run_reproduces_its_recorded_decisions(mirror, variant: str, seed: int) -> None:
    run = run_variant(variant, seed, Suite1aConfig().workload, SolverConfig())
    assert run.decisions_sha256 == recorded_1a()[(variant, seed)]


FIXTURE_DEFAULTS = FIXTURES / "suite1b_tuning_defaults_event_hashes.csv"
"""Every run of ``gpudefrag suite 1b --seeds 42-46`` at the suite's own settings, restart sweep
included, recorded at commit 2b13b60 before issue 54's refactor."""


def recorded_defaults() -> dict[tuple[str, float, int, float], str]:
    with FIXTURE_DEFAULTS.open() as fh:
        return {
            (r["variant"], float(r["load"]), int(r["seed"]), float(r["restart_s"])): r["event_hash"]
            for r in csv.DictReader(fh)
        }


def test_the_defaults_fixture_holds_every_run_and_the_sweep() -> None:
    config = Suite1bConfig()
    runs = recorded_defaults()
    main = {(v, x, s, config.restart_s) for v in config.variants for x in config.loads for s in range(42, 47)}
    sweep = {
        (v, config.sweep_load, s, r)
        for v in config.sweep_variants
        for s in range(42, 47)
        for r in config.sweep_restart_s
    }
    assert set(runs) == main | sweep


@pytest.mark.parametrize(
    ("variant", "load", "seed", "restart_s"),
    [("fgd+defrag", 1.1, 44, 60.0), ("fgd+defrag", 1.0, 45, 3600.0)],
)
def test_a_run_at_the_suites_settings_reproduces_its_recorded_event_hash(
    mirror, variant: str, load: float, seed: int, restart_s: float
) -> None:
    result, _ = run_scenario(Suite1bConfig(), variant, load, seed, restart_s)
    assert result.event_hash == recorded_defaults()[(variant, load, seed, restart_s)]
