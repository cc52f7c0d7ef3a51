"""``KEY=VALUE`` overrides of the suite configuration, and ``suite 1b``'s filter options."""

from __future__ import annotations

import pytest

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.overrides import apply_overrides
from gpudefrag.experiments.suite1b import Suite1bConfig, tasks
from test_cli import _assert_one_line_error, _cli


def test_overrides_parse_each_field_as_its_type():
    base = Suite1bConfig()
    cfg = apply_overrides(
        base,
        [
            "plans_per_tick=3",
            "planner.harm_weight=2.5",
            "solver.deterministic=false",
            "sweep_variant=solver+defrag",
            "planner.max_moves = 4",
        ],
    )
    assert cfg.plans_per_tick == 3 and cfg.planner.harm_weight == 2.5 and cfg.planner.max_moves == 4
    assert cfg.solver.deterministic is False and cfg.sweep_variant == "solver+defrag"
    assert apply_overrides(base, ["acceptance.defrag_min_gain_pp=1.5"]).acceptance.defrag_min_gain_pp == 1.5
    # nothing else changes, and the original stays as it was
    assert cfg.planner.margin == base.planner.margin and cfg.solver.seed == base.solver.seed
    assert base.plans_per_tick != 3 and base.planner.harm_weight != 2.5


@pytest.mark.parametrize(
    "item, message",
    [
        ("planner.harm=3", "unknown setting"),
        ("nope=1", "unknown setting"),
        ("planner=1", "unknown setting"),  # a nested configuration, not a value
        ("plans_per_tick.x=1", "unknown setting"),
        ("plans_per_tick=2.5", "expected int"),
        ("solver.deterministic=yes", "expected true or false"),
        ("loads=1.0", "tuple fields cannot be set"),
        ("harm_weight", "use KEY=VALUE"),
        ("runtime_estimates=guess", "expected one of oracle, history"),
    ],
)
def test_bad_overrides_name_the_key(item, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(Suite1bConfig(), [item])


def test_no_sweep_leaves_only_the_main_runs():
    cfg = Suite1bConfig(seeds=(42,), loads=(1.0,), variants=("fgd",), sweep_restart_s=())
    assert [(t[1], t[2], t[3]) for t in tasks(cfg)] == [("fgd", 1.0, 42)]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--variants", "fgd,nope"], "unknown nope"),
        (["--set", "planner.harm=3"], "planner.harm_weight"),  # the list of known keys
        (["--set", "runtime_estimates=guess"], "expected one of oracle, history"),
    ],
)
def test_suite_1b_rejects_bad_options_in_one_line(args, message, tmp_path):
    result = _cli("suite", "1b", "--seeds", "42", "--out", str(tmp_path), *args)
    assert result.returncode == 2
    assert message in _assert_one_line_error(result.stderr)
    assert not any(tmp_path.iterdir())


def test_suite_1b_rejects_a_bad_load_list_with_usage(tmp_path):
    result = _cli("suite", "1b", "--seeds", "42", "--out", str(tmp_path), "--loads", "1.0,x")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument --loads: invalid list '1.0,x'" in result.stderr


def test_suite_1a_refuses_the_1b_options(tmp_path):
    result = _cli(
        "suite", "1a", "--seeds", "42", "--out", str(tmp_path), "--set", "plans_per_tick=1", "--no-sweep"
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "gpudefrag suite 1a: error: unrecognized arguments: --set plans_per_tick=1 --no-sweep"
    ]
    assert not any(tmp_path.iterdir())
