"""Suite 1b's seed sets: named, disjoint, the confirmation set never tuned on, the report
naming the set it ran on."""

from __future__ import annotations

import pytest

from gpudefrag.cli import main
from gpudefrag.experiments.suite1b.config import RUN_ONCE_SEED_SETS, SEED_SETS, seed_set_name


def test_seed_sets_are_disjoint_and_named_back() -> None:
    seen: set[int] = set()
    for name, seeds in SEED_SETS.items():
        assert not seen & set(seeds), f"{name} shares seeds with another set"
        seen |= set(seeds)
        assert seed_set_name(list(reversed(seeds))) == name
    assert all(len(SEED_SETS[name]) == 20 for name in RUN_ONCE_SEED_SETS)
    assert seed_set_name([42, 43]) is None  # part of a set is not the set


@pytest.mark.parametrize("name", RUN_ONCE_SEED_SETS)
def test_a_confirmation_set_refuses_changed_settings(capsys, tmp_path, name) -> None:
    argv = ["suite", "1b", "--seeds", name, "--set", "plans_per_tick=1", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--seeds {name} " in err[0] and "--seeds tuning" in err[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("seeds", "folder", "named"), [("42", "suite1b-other-seeds", "seeds outside")])
def test_the_report_names_its_seed_set(mirror, capsys, tmp_path, seeds, folder, named) -> None:
    argv = ["suite", "1b", "--seeds", seeds, "--hours", "0.25", "--nodes", "8", "--loads", "1.0"]
    argv += ["--variants", "fgd", "--no-sweep", "--jobs", "1", "--no-progress", "--out", str(tmp_path)]
    assert main(argv) == 0
    report = (tmp_path / "report.md").read_text()  # --out is the folder written
    assert named in report.splitlines()[0]
