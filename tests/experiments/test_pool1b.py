"""Suite 1b's results folders read back and pooled: settings kept beside the results, folders
pooled only at identical settings, never with tuning seeds, and the pooled report naming its sets."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpudefrag.cli import main
from gpudefrag.errors import ConfigError, InputError
from gpudefrag.experiments.suite1b import report as report1b
from gpudefrag.experiments.suite1b.config import SEED_SETS
from gpudefrag.experiments.suite1b.pool import config_from_settings, pool_folders, read_results
from gpudefrag.experiments.suite1b.suite import METRICS, Run1b, Suite1bConfig

VARIANTS = ("fgd", "fgd+defrag")


def _runs(seeds: tuple[int, ...], gain_pp: float) -> list[Run1b]:
    """FGD at 90 % and fgd+defrag ``gain_pp`` above it (plus a little per seed) at load 1.0."""
    out = []
    for k, seed in enumerate(seeds):
        for v, alloc in (("fgd", 90.0), ("fgd+defrag", 90.0 + gain_pp + 0.01 * (k % 3))):
            metrics = {m: 0.0 for m in METRICS}
            metrics.update(gpu_alloc_pct=alloc, goodput_pct=alloc, wait_p95_s=100.0)
            metrics.update(reservations_made=10.0, reservations_fulfilled=9.0)
            out.append(Run1b(v, 1.0, seed, 60.0, metrics, f"h{seed}{v}", 1.5))
    return out


def _folder(tmp_path: Path, name: str, set_name: str, gain_pp: float, **changes: object) -> Path:
    seeds = SEED_SETS[set_name]
    config = replace(
        Suite1bConfig(seeds=seeds, loads=(1.0,), variants=VARIANTS, sweep_restart_s=()), **changes
    )
    report1b.write_report(_runs(seeds, gain_pp), config, tmp_path / name, 100.0, set_name)
    return tmp_path / name


def test_a_folder_reads_back_as_it_ran(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "a", "confirmation", 1.0)
    config, wall_s = config_from_settings(folder / "settings.json")
    assert config == Suite1bConfig(
        seeds=SEED_SETS["confirmation"], loads=(1.0,), variants=VARIANTS, sweep_restart_s=()
    )
    assert wall_s == 100.0
    runs = read_results(folder / "results.csv")
    assert sorted((r.variant, r.seed) for r in runs) == sorted(
        (r.variant, r.seed) for r in _runs(config.seeds, 1.0)
    )
    first = next(r for r in runs if r.variant == "fgd+defrag" and r.seed == 1001)
    assert first.metrics["gpu_alloc_pct"] == 91.0 and first.event_hash == "h1001fgd+defrag"


def test_two_sets_pool_into_one_verdict_that_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _folder(tmp_path, "a", "confirmation", 1.0)
    b = _folder(tmp_path, "b", "confirmation-2", 1.0)
    pooled = pool_folders([a, b])
    assert len(pooled.runs) == 2 * 2 * 20 and len(pooled.config.seeds) == 40
    assert pooled.sets == ["confirmation", "confirmation-2"] and pooled.wall_s == 200.0
    out = tmp_path / "pooled"
    assert main(["suite", "1b", "--from", str(a), str(b), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "pooled seed sets: confirmation, confirmation-2 (40 seeds)" in text
    assert "fgd+defrag: allocation +1.01 pp" in text  # the mean over the 40 seeds of the pool
    assert json.loads((out / "settings.json").read_text())["config"]["seeds"][-1] == 2020
    capsys.readouterr()


def test_folders_that_ran_other_settings_are_not_pooled(tmp_path: Path) -> None:
    a = _folder(tmp_path, "a", "confirmation", 1.0)
    planner = Suite1bConfig().planner
    b = _folder(tmp_path, "b", "confirmation-2", 1.0, plans_per_tick=Suite1bConfig().plans_per_tick + 1)
    with pytest.raises(ConfigError, match=r"ran different settings \(plans_per_tick\)"):
        pool_folders([a, b])
    c = _folder(
        tmp_path, "c", "confirmation-3", 1.0, planner=replace(planner, max_moves=planner.max_moves + 1)
    )
    with pytest.raises(ConfigError, match=r"planner\.max_moves"):
        pool_folders([a, c])


def test_tuning_seeds_and_a_seed_twice_are_refused(tmp_path: Path) -> None:
    a = _folder(tmp_path, "a", "confirmation", 1.0)
    tuning = _folder(tmp_path, "t", "tuning", 1.0)
    with pytest.raises(ConfigError, match="tuning seeds"):
        pool_folders([a, tuning])
    again = _folder(tmp_path, "again", "confirmation", 1.0)
    with pytest.raises(ConfigError, match="seed 1001 is in both"):
        pool_folders([a, again])


def test_bad_or_missing_settings_name_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _folder(tmp_path, "a", "confirmation", 1.0)
    data = json.loads((a / "settings.json").read_text())
    data["config"]["planner"]["no_such_knob"] = 1
    (a / "settings.json").write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        config_from_settings(a / "settings.json")
    assert e.value.column == "planner.no_such_knob" and "unknown to this version" in str(e.value)
    (a / "settings.json").unlink()
    assert main(["suite", "1b", "--from", str(a), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "settings.json: file not found" in err and err.count("\n") == 1
    assert main(["suite", "1b", "--from", str(a), "--seeds", "1,2"]) == 2
    assert "--seeds: not with --from" in capsys.readouterr().err


def test_hand_edited_types_partial_results_and_overwrites_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _folder(tmp_path, "a", "confirmation", 1.0)
    data = json.loads((a / "settings.json").read_text())
    data["config"]["restart_s"] = "60"
    (a / "settings.json").write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        config_from_settings(a / "settings.json")
    assert e.value.column == "restart_s" and "'60' is not a float" in str(e.value)
    b = _folder(tmp_path, "b", "confirmation-2", 1.0)
    lines = (b / "results.csv").read_text().splitlines()
    (b / "results.csv").write_text("\n".join(line for line in lines if ",2020," not in line) + "\n")
    with pytest.raises(InputError, match="2 runs of its settings missing"):
        pool_folders([b])
    c = _folder(tmp_path, "c", "confirmation-3", 1.0)
    assert main(["suite", "1b", "--from", str(c), "--out", str(c)]) == 2
    assert "one of the --from folders" in capsys.readouterr().err
    assert main(["suite", "1b", "--from", str(c / "results.csv"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "settings.json: cannot read" in err and err.count("\n") == 1
