"""Behaviour kept through the one-core refactor (issue 54): suite 2's and suite 3's runs give the
event hashes recorded before it, at commit 2b13b60 -- every run of ``gpudefrag suite 2 --windows
tuning`` (``fixtures/suite2_tuning_event_hashes.csv``) and of ``gpudefrag suite 3 --windows
tuning`` (``fixtures/suite3_tuning_event_hashes.csv``).  A sample runs here (the cheap ones, one
per component: placement, batches, defragmentation; preemption, pooled spares, elastic nodes);
the suites rerun all of them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpudefrag.experiments.suite2.config import VARIANTS as VARIANTS2
from gpudefrag.experiments.suite2.config import Suite2Config
from gpudefrag.experiments.suite2.suite import run_one as run_one2
from gpudefrag.experiments.suite3.config import VARIANTS as VARIANTS3
from gpudefrag.experiments.suite3.config import Suite3Config
from gpudefrag.experiments.suite3.suite import run_one as run_one3
from gpudefrag.workloads.suite_windows import TUNING

FIXTURES = Path(__file__).parent / "fixtures"


def recorded(name: str, keys: tuple[str, str, str]) -> dict[tuple[str, str, str], str]:
    with (FIXTURES / name).open() as fh:
        return {tuple(r[k] for k in keys): r["event_hash"] for r in csv.DictReader(fh)}  # type: ignore[misc]


SUITE2 = recorded("suite2_tuning_event_hashes.csv", ("window", "load", "variant"))
SUITE3 = recorded("suite3_tuning_event_hashes.csv", ("window", "seed", "variant"))


def test_the_fixtures_hold_every_run_of_the_tuning_windows() -> None:
    assert set(SUITE2) == {(w, str(x), v) for w in TUNING for x in (1.0, 1.25, 1.5) for v in VARIANTS2}
    assert set(SUITE3) == {(w, str(s), v) for w in TUNING for s in (1, 2) for v in VARIANTS3}


@pytest.mark.parametrize(
    ("window", "load", "variant"),
    [("itp01-w1", 1.5, "ours+defrag"), ("itp01-w1", 1.0, "ours-batch"), ("itp06-w1", 1.25, "volcano")],
)
def test_a_suite_2_run_reproduces_its_recorded_event_hash(
    mirror: Path, window: str, load: float, variant: str
) -> None:
    run = run_one2(Suite2Config(windows=(window,), set_name="test", loads=(load,)), window, load, variant)
    assert run.event_hash == SUITE2[(window, str(load), variant)]


@pytest.mark.parametrize(
    ("window", "seed", "variant"),
    [
        ("itp01-w1", 1, "ours"),
        ("itp01-w1", 2, "pooled-cluster"),
        ("itp01-w1", 1, "elastic"),
        ("itp06-w1", 1, "kube"),
    ],
)
def test_a_suite_3_run_reproduces_its_recorded_event_hash(
    mirror: Path, window: str, seed: int, variant: str
) -> None:
    run = run_one3(Suite3Config(windows=(window,), set_name="test"), window, seed, variant)
    assert run.event_hash == SUITE3[(window, str(seed), variant)]
