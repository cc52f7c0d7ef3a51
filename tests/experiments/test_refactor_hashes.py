"""Behaviour kept through the decision-core refactor: runs of suite 1b on its tuning seeds give
the event-log hashes recorded before it (``fixtures/suite1b_seeds42-46_event_hashes.csv``, all
75 runs of ``gpudefrag suite 1b --seeds 42-46 --no-sweep`` at commit 876d304).

Two of the 75 run here (a per-pod policy, and the solver with the defragmenter: every component
of the simulator, the batch placer and the planner); the suite reruns all of them.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpudefrag.experiments.scenario1b import run_scenario
from gpudefrag.experiments.suite1b import Suite1bConfig

FIXTURE = Path(__file__).parent / "fixtures" / "suite1b_seeds42-46_event_hashes.csv"


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
    result, _ = run_scenario(Suite1bConfig(), variant, load, seed, 60.0)
    assert result.event_hash == recorded()[(variant, load, seed, 60.0)]
