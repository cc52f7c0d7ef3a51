"""``KEY=VALUE`` overrides of the suite configuration, and ``suite 1b``'s filter options."""

from __future__ import annotations

import pytest

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.overrides import apply_overrides
from gpudefrag.experiments.suite1b.suite import Suite1bConfig, tasks
from gpudefrag.settings import check
from test_cli import _assert_one_line_error, _cli


def test_overrides_parse_each_field_as_its_type():
    base = Suite1bConfig()
    cfg = apply_overrides(
        base,
        [
            "plans_per_tick=3",
            "planner.harm_weight=2.5",
            "solver.deterministic=false",
            "runtime_estimates=oracle",
            "planner.max_moves = 4",
        ],
    )
    assert cfg.plans_per_tick == 3 and cfg.planner.harm_weight == 2.5 and cfg.planner.max_moves == 4
    assert cfg.solver.deterministic is False and cfg.runtime_estimates == "oracle"
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
        ("sweep_variants=fgd+defrag", "tuple fields cannot be set"),
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


def test_the_sweep_runs_every_sweep_variant_once_per_restart_time_and_seed():
    cfg = Suite1bConfig(
        seeds=(42, 43),
        loads=(0.9, 1.0),
        variants=("fgd", "fgd+defrag"),
        sweep_restart_s=(60.0, 300.0),
        sweep_variants=("fgd+defrag", "solver+defrag"),
    )
    cells = [(t[1], t[2], t[4], t[3]) for t in tasks(cfg)]
    main = [(v, load, 60.0, s) for load in (0.9, 1.0) for v in ("fgd", "fgd+defrag") for s in (42, 43)]
    sweep = [  # fgd+defrag at 60 s is a main run already; solver+defrag is not among the variants
        ("fgd+defrag", 1.0, 300.0, 42),
        ("fgd+defrag", 1.0, 300.0, 43),
        ("solver+defrag", 1.0, 60.0, 42),
        ("solver+defrag", 1.0, 60.0, 43),
        ("solver+defrag", 1.0, 300.0, 42),
        ("solver+defrag", 1.0, 300.0, 43),
    ]
    assert cells == main + sweep
    assert len(set(cells)) == len(cells)


def test_the_default_sweep_runs_both_defrag_variants_to_an_hour():
    cfg = Suite1bConfig(seeds=(42,))
    swept = {(t[1], t[4]) for t in tasks(cfg) if t[2] == cfg.sweep_load}
    for v in ("fgd+defrag", "solver+defrag"):
        assert {r for u, r in swept if u == v} == {60.0, 300.0, 900.0, 1800.0, 3600.0}


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"sweep_variants": ("fgd",)}, "sweep_variants=('fgd',): fgd not among the defrag variants"),
        ({"sweep_variants": ("fgd+defrag", "nope")}, "nope not among the defrag variants"),
        ({"sweep_restart_s": (60.0, -1.0)}, "sweep_restart_s.1=-1: must be a finite number >= 0"),
        ({"sweep_restart_s": (float("inf"),)}, "sweep_restart_s.0=inf: must be a finite number >= 0"),
        ({"sweep_restart_s": (float("nan"),)}, "sweep_restart_s.0=nan: must be a finite number >= 0"),
    ],
)
def test_sweep_settings_out_of_range_name_the_setting(fields, message):
    """Ranges are checked where settings come in (:func:`gpudefrag.settings.check`)."""
    with pytest.raises(ConfigError) as err:
        check(Suite1bConfig(**fields))
    assert message in str(err.value)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--variants", "fgd,nope"], "argument --variants: unknown variant nope"),
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
    assert (
        "argument --loads: each item must be a finite number > 0 and <= 100 (e.g. 0.9,1.0), got 'x'"
        in result.stderr
    )


def test_suite_1a_refuses_the_1b_options(tmp_path):
    result = _cli(
        "suite", "1a", "--seeds", "42", "--out", str(tmp_path), "--set", "plans_per_tick=1", "--no-sweep"
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "gpudefrag suite 1a: error: unrecognized arguments: --set plans_per_tick=1 --no-sweep"
    ]
    assert not any(tmp_path.iterdir())


def test_a_negative_defrag_age_max_gpus_names_the_setting():
    with pytest.raises(ConfigError, match=r"defrag_age_max_gpus=-1: must be an integer in 0..8 or none"):
        check(Suite1bConfig(defrag_age_max_gpus=-1))


@pytest.mark.parametrize(
    ("setting", "with_defrag", "expected"),
    [
        (1, True, 1),  # next to the defragmenter: only pods of <= 1 GPU age
        (1, False, 0),  # the solver alone keeps solver.age_max_gpus (0: every pod ages)
        (None, True, 0),  # none: solver.age_max_gpus for both
    ],
)
def test_defrag_age_max_gpus_applies_only_next_to_the_defragmenter(setting, with_defrag, expected):
    from gpudefrag.experiments.suite1b.scenario import make_scheduler, scenario

    cfg = Suite1bConfig(n_nodes=4, horizon_h=0.1, defrag_age_max_gpus=setting)
    inputs, _, _ = scenario(cfg, 1.0, 42)
    scheduler, _ = make_scheduler(cfg, inputs, "solver", 42, with_defrag=with_defrag)
    assert scheduler.placer.config.age_max_gpus == expected
    assert scheduler.placer.config.age_weight_milli_per_s == cfg.solver.age_weight_milli_per_s


def test_an_optional_field_takes_none_whatever_its_value():
    base = Suite1bConfig(defrag_age_max_gpus=1)
    assert base.small_margin is not None
    cfg = apply_overrides(base, ["defrag_age_max_gpus=none", "small_margin=None"])
    assert cfg.defrag_age_max_gpus is None and cfg.small_margin is None
    assert apply_overrides(cfg, ["defrag_age_max_gpus=2"]).defrag_age_max_gpus == 2
    with pytest.raises(ConfigError, match="plans_per_tick=none: expected int"):
        apply_overrides(base, ["plans_per_tick=none"])  # not optional
