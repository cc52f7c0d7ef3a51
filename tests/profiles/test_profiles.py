"""Profiles: the shipped ones carry the settings the suites and the driver ran with, and a bad
file is one clear error naming the file and the field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.errors import InputError
from gpudefrag.experiments.suite1b.config import Suite1bConfig
from gpudefrag.gangs.defrag import DefragConfig as GangDefragConfig
from gpudefrag.k8s.defrag import DefragReconciler
from gpudefrag.k8s.defrag_config import DefragConfig
from gpudefrag.profiles.schema import load_profile, shipped


def test_suite_1b_takes_its_settings_from_its_profile() -> None:
    profile, config = shipped("suite1b"), Suite1bConfig()
    assert config.defragment_settings() == profile.defragment
    assert config.solver == profile.allocate.solver
    # the values docs/tuning-suite1b.md records
    assert (config.planner.max_moves, config.planner.margin, config.planner.wait_draws) == (12, 0.2, 32)
    assert (config.headroom_fraction, config.small_margin, config.plans_per_tick) == (0.035, -0.5, 2)
    assert config.solver == replace(
        SolverConfig(),
        min_solver_batch=2,
        deterministic_time=0.005,
        candidates_per_pod=6,
        max_patterns_per_node=24,
        protect_blocked=8,
        lifetime_ties=True,
        age_weight_milli_per_s=1.0,
        whole_gpu_above_milli=700,
    )


def test_the_controller_runs_the_kubernetes_profile() -> None:
    # what `gpudefrag defrag` ran before profiles: suite 1b's defragmenter, at most 8 moves,
    # 5 % headroom, planning at every reconcile
    c = DefragReconciler(None, DefragConfig()).controller
    assert (c.planner.config.max_moves, c.planner.config.margin, c.planner.config.wait_draws) == (8, 0.2, 32)
    assert (c.headroom_fraction, c.tick_interval_s, c.plans_per_tick, c.small_margin) == (0.05, 0.0, 2, -0.5)
    assert shipped("kubernetes").allocate.placer == "fgd"
    # the flags win over the profile
    c = DefragReconciler(None, DefragConfig(max_moves=3, headroom_fraction=0.2)).controller
    assert (c.planner.config.max_moves, c.headroom_fraction) == (3, 0.2)


def _write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            'name = "x"\nactions = ["allocate", "backfill"]\n',
            "actions[1]: must be 'allocate', 'defragment', ",
        ),
        (
            'name = "x"\nactions = ["allocate", "preempt"]\n[preempt]\nvictims = "random"\n',
            "preempt.victims: must be",
        ),
        (
            'name = "x"\nactions = ["allocate", "preempt"]\n[preempt]\ncheckpoint_wait_s = -1\n',
            "preempt.checkpoint_wait_s: must be",
        ),
        (
            'name = "x"\nactions = ["allocate", "defragment"]\n[defragment.gangs]\nmax_moves = 0\n',
            "defragment.gangs.max_moves: must be an integer in 1..10_000, got 0",
        ),
        (
            'name = "x"\nactions = ["allocate", "defragment"]\n[defragment.gangs]\nrestart_s = 5\n',
            "the restart time is the cluster's",
        ),
        (
            'name = "x"\nactions = ["allocate", "elastic"]\n[elastic]\nwarm_fraction = 2\n',
            "elastic.warm_fraction",
        ),
        ('name = "x"\nactions = ["allocate", "consolidate"]\n[consolidate]\nx = 1\n', "takes no settings"),
        ('name = "x"\n[allocate]\ngangs = "tetris"\n', "allocate.gangs: must be"),
        ('name = "x"\n[allocate]\nplacer = "fgd"\nspeed = 3\n', "allocate.speed: unknown setting"),
        (
            'name = "x"\nactions = ["allocate", "defragment"]\n[defragment.planner]\nmax_moves = -3\n',
            "defragment.planner.max_moves: must be an integer in 1..64, got -3",
        ),
        (
            'name = "x"\nactions = ["allocate", "defragment"]\n[defragment]\nplans_per_tick = 0\n',
            "defragment.plans_per_tick: must be an integer in 1..10_000, got 0",
        ),
        (
            'name = "x"\n[defragment]\nplans_per_tick = 2\n',
            "[defragment] is set but 'defragment' is not in actions",
        ),
        ('name = "x"\nactions = ["defragment"]\n', "a profile needs 'allocate'"),
        ('name = "x"\n[allocate]\nplacer = "tetris"\n', "allocate.placer: must be 'fgd', "),
        (
            'name = "x"\n[allocate.solver]\nage_weight_milli_per_s = "a lot"\n',
            "allocate.solver.age_weight_milli_per_s",
        ),
        (
            'name = "x"\nactions = ["allocate", "defragment"]\n[defragment.planner.migration]\nrestart_s = 5\n',
            "the restart and grace times are the cluster's",
        ),
        ("name = [\n", "not valid TOML"),
        ('actions = ["allocate"]\n', "name: missing"),
    ],
)
def test_a_bad_profile_names_the_file_and_the_field(tmp_path: Path, text: str, needle: str) -> None:
    f = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_profile(f)
    assert str(err.value).startswith(f"{f}: ") and needle in str(err.value), str(err.value)


def test_a_yaml_profile_reads_as_the_toml_one(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        "name: y\nactions: [allocate, defragment]\nallocate: {placer: bestfit}\n"
        "defragment:\n  headroom_fraction: 0.1\n  planner: {max_moves: 5}\n",
        "p.yaml",
    )
    p = load_profile(f)
    assert (p.allocate.placer, p.defragment.headroom_fraction, p.defragment.planner.max_moves) == (
        "bestfit",
        0.1,
        5,
    )


def test_an_unknown_shipped_profile_lists_the_shipped_ones() -> None:
    with pytest.raises(
        InputError, match=r"no such shipped profile \(shipped: kubernetes, suite1b, suite2, suite3\)"
    ):
        shipped("nope")


def test_a_bad_profile_on_the_command_line_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpudefrag.cli import main

    bad = _write(
        tmp_path, 'name = "x"\nactions = ["allocate", "defragment"]\n[defragment]\nplans_per_tick = -2\n'
    )
    for command in (
        ["plan", "--snapshot", "s.json"],
        ["defrag", "--kubeconfig", "k"],
        ["scheduler", "--kubeconfig", "k"],
    ):
        with pytest.raises(SystemExit) as stop:
            main([*command, "--config", str(bad)])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1
        assert f"argument --config: {bad}: defragment.plans_per_tick: must be an integer in 1..10_000" in err


def test_suites_2_and_3_take_their_settings_from_their_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpudefrag.experiments.suite2 import config as config2
    from gpudefrag.experiments.suite3 import config as config3

    two, three = shipped("suite2"), shipped("suite3")
    assert config2.Suite2Config(windows=(), set_name="t").defrag == two.defragment.gangs
    assert two.defragment.gangs.max_moves == 32 and two.allocate.gangs == "ours"
    cfg3 = config3.Suite3Config(windows=(), set_name="t")
    assert (cfg3.checkpoint_wait_s, cfg3.wait_price, cfg3.elastic) == (
        three.preempt.checkpoint_wait_s,
        three.preempt.wait_price,
        three.elastic,
    )
    # a changed profile changes the suite's default
    edited = two.model_copy(
        update={"defragment": two.defragment.model_copy(update={"gangs": GangDefragConfig(max_moves=5)})}
    )
    monkeypatch.setattr(config2, "shipped", lambda name: edited)
    assert config2.Suite2Config(windows=(), set_name="t").defrag.max_moves == 5


@pytest.mark.parametrize("name", ["suite2", "suite3"])
def test_the_kubernetes_driver_refuses_what_only_the_job_simulators_run(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpudefrag.cli import main

    with pytest.raises(SystemExit) as e:
        main(["plan", "--snapshot", "nothing.json", "--config", name])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "in the job simulators only" in err[0], err
