"""``gpudefrag sim`` and the split ``suite 1a`` / ``suite 1b`` options.

``sim`` runs one suite-1b scenario: its event hash must be the one suite 1b's own run function
gives for the same scenario, its events file must hold every processed event, and bad input
must be one line on stderr with exit code 2.  Each suite takes only its own options: a flag of
the other suite is a usage error of one line.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter

import pytest

from gpudefrag.cli import build_parser, main
from gpudefrag.cli_suite1 import SUITE1B_HOURS, SUITE1B_NODES
from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.overrides import apply_overrides
from gpudefrag.experiments.suite1b.sim import PLAN_COLUMNS
from gpudefrag.experiments.suite1b.suite import Suite1bConfig, run_one
from gpudefrag.sim.engine import EventLog
from gpudefrag.sim.events import Event
from test_cli import _assert_one_line_error, _cli

# A scenario small enough to run in a fraction of a second, loaded enough to migrate pods.
TINY = {"seed": 42, "load": 6.0, "hours": 0.25, "nodes": 8}
SETTINGS = ("runtime_estimates=oracle", "planner.harm_weight=3")


def _sim_args(variant: str, *extra: str) -> list[str]:
    return [
        "sim",
        "--seed",
        str(TINY["seed"]),
        "--load",
        str(TINY["load"]),
        "--hours",
        str(TINY["hours"]),
        "--nodes",
        str(TINY["nodes"]),
        "--variant",
        variant,
        *extra,
    ]


def _suite_hash(variant: str, restart_s: float | None = None, settings=()) -> str:
    """The event hash suite 1b's run function gives for the tiny scenario."""
    config = apply_overrides(Suite1bConfig(horizon_h=TINY["hours"], n_nodes=TINY["nodes"]), list(settings))
    restart = config.restart_s if restart_s is None else restart_s
    return run_one(config, variant, TINY["load"], TINY["seed"], restart).event_hash


def _printed_hash(out: str) -> str:
    found = re.findall(r"^event_hash\s+([0-9a-f]{64})$", out, flags=re.M)
    assert len(found) == 1, out
    return found[0]


def _sim_json(capsys, args: list[str]) -> dict:
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    return json.loads(lines[0])


def _assert_usage_line(stderr: str, prog: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{stderr}"
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert "Traceback" not in stderr and "usage:" not in stderr
    return lines[0]


# ------------------------------------------------------------------------------- same hash
@pytest.mark.parametrize("variant", ["fgd", "solver+defrag", "fgd-nudged"])
def test_sim_prints_the_hash_suite_1b_gives_the_same_run(mirror, capsys, variant):
    assert main(_sim_args(variant)) == 0
    out = capsys.readouterr().out
    assert _printed_hash(out) == _suite_hash(variant)
    for label in ("GPU allocation %", "wait p50 / p95 s", "pods arrived", "migrations", "reservations"):
        assert label in out


def test_sim_applies_restart_time_and_settings_as_suite_1b_does(mirror, capsys):
    changed = _suite_hash("solver+defrag", restart_s=300.0, settings=SETTINGS)
    assert changed != _suite_hash("solver+defrag")  # the settings matter in this scenario
    sets = [arg for s in SETTINGS for arg in ("--set", s)]
    summary = _sim_json(capsys, _sim_args("solver+defrag", "--restart-s", "300", *sets, "--json"))
    assert summary["event_hash"] == changed
    assert summary["restart_s"] == 300.0 and summary["settings"] == list(SETTINGS)


def test_sim_restart_defaults_to_the_suites_restart_time(mirror, capsys):
    restart = Suite1bConfig().restart_s + 240.0
    summary = _sim_json(capsys, _sim_args("fgd+defrag", "--set", f"restart_s={restart:g}", "--json"))
    assert summary["restart_s"] == restart
    assert summary["event_hash"] == _suite_hash("fgd+defrag", restart_s=restart)


# ----------------------------------------------------------------------------- events file
def test_events_file_has_one_json_line_per_processed_event(mirror, capsys, tmp_path):
    path = tmp_path / "events.jsonl"
    with_events = _sim_json(capsys, _sim_args("fgd+defrag", "--events", str(path), "--json"))
    without = _sim_json(capsys, _sim_args("fgd+defrag", "--json"))
    assert with_events["event_hash"] == without["event_hash"]  # writing events changes nothing
    lines = path.read_text().splitlines()
    assert len(lines) == with_events["events_processed"] == with_events["events_written"]
    events = [json.loads(line) for line in lines]
    assert all(set(e) == {"t_s", "event", "payload"} for e in events)
    assert all(e["event"] in Event.__members__ and isinstance(e["payload"], list) for e in events)
    times = [e["t_s"] for e in events]
    assert times == sorted(times)
    counts = Counter(e["event"] for e in events)
    assert counts["ARRIVAL"] == with_events["pods_arrived"]
    assert counts["COMPLETION"] == with_events["pods_completed"]
    assert counts["EVICT_DONE"] > 0  # the scenario migrates pods, so those events are named too
    assert [p.name for p in tmp_path.iterdir()] == ["events.jsonl"]  # no temporary file left
    # the file is the event log itself: hashing its lines as the simulator does gives the hash
    log = EventLog()
    for e in events:
        log.record(e["t_s"], int(Event[e["event"]]), _as_tuples(e["payload"]))
    assert log.hexdigest() == with_events["event_hash"]


def test_the_nudged_fgd_runs_as_fgd_until_the_window_starts_then_apart(mirror, capsys, tmp_path):
    runs = {}
    for variant in ("fgd", "fgd-nudged"):
        path = tmp_path / f"{variant}.jsonl"
        summary = _sim_json(capsys, _sim_args(variant, "--events", str(path), "--json"))
        runs[variant] = (summary, [json.loads(line) for line in path.read_text().splitlines()])
    (plain, plain_events), (nudged, nudged_events) = runs["fgd"], runs["fgd-nudged"]
    assert nudged["event_hash"] != plain["event_hash"]
    warmup_s = TINY["hours"] * 3600.0 / 4  # the first quarter is the warm-up
    first_apart = next(k for k, (a, b) in enumerate(zip(plain_events, nudged_events)) if a != b)
    assert first_apart > 0 and nudged_events[first_apart]["t_s"] >= warmup_s
    assert nudged["pods_arrived"] == plain["pods_arrived"]  # the same arrivals either way


def test_plans_file_has_one_row_per_executed_plan(mirror, capsys, tmp_path):
    path = tmp_path / "plans.csv"
    with_plans = _sim_json(capsys, _sim_args("fgd+defrag", "--plans", str(path), "--json"))
    without = _sim_json(capsys, _sim_args("fgd+defrag", "--json"))
    assert with_plans["event_hash"] == without["event_hash"]  # writing plans changes nothing
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == PLAN_COLUMNS
    assert len(rows) == with_plans["reservations_made"] > 0
    outcomes = Counter(r["outcome"] for r in rows)
    assert outcomes["fulfilled"] == with_plans["reservations_fulfilled"]
    assert set(outcomes) <= {"fulfilled", "bound_elsewhere", "expired", "released", "open"}
    for r in rows:
        made = float(r["made_s"])
        if r["outcome"] == "open":
            assert r["ended_s"] == "" and r["bound_node"] == "-1"
            continue
        assert float(r["ended_s"]) >= made
        if r["outcome"] == "fulfilled":
            assert r["bound_node"] == r["node_freed"] and float(r["pod_bound_s"]) == float(r["ended_s"])
            assert float(r["pod_wait_after_plan_s"]) == pytest.approx(float(r["ended_s"]) - made)
    assert [p.name for p in tmp_path.iterdir()] == ["plans.csv"]


def _as_tuples(value):
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value


def test_a_failing_run_leaves_no_events_file(mirror, capsys, tmp_path, monkeypatch):
    def fail_midway(config, variant, load, seed, restart_s, hook=None):
        hook(None, 1.0, 0, (1,))
        raise ConfigError("simulated failure")

    monkeypatch.setattr("gpudefrag.experiments.suite1b.sim.run_scenario", fail_midway)
    assert main(_sim_args("fgd", "--events", str(tmp_path / "events.jsonl"))) == 2
    assert "simulated failure" in _assert_one_line_error(capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "extra, said",
    [
        (["--variant", "tetris"], "argument --variant: invalid choice: 'tetris'"),
        (["--set", "planner.harm=3"], "unknown setting"),
        (["--set", "acceptance.defrag_load=x"], "expected float"),
        (["--events", "{tmp}/missing/events.jsonl"], "does not exist"),
        (["--events", "{tmp}"], "is a folder"),
        (["--plans", "{tmp}/missing/plans.csv"], "missing/plans.csv: folder"),
        (["--plans", "{tmp}"], "is a folder"),
        (["--set", "restart_s=-1"], "--set restart_s=-1: must be a finite number >= 0"),
        (["--set", "eviction_grace_s=nan"], "eviction_grace_s=nan"),
        (["--set", "decision_latency_s=-1"], "decision_latency_s"),
        (["--set", "headroom_fraction=2"], "--set headroom_fraction=2: must be a finite number >= 0 and < 1"),
        (["--load", "1e9"], "argument --load: must be a finite number > 0 and <= 100, got '1e9'"),
        (["--hours", "1e9"], "argument --hours: must be a finite number > 0 and <= 336, got '1e9'"),
    ],
)
def test_sim_bad_input_is_one_line_and_exit_2(capsys, tmp_path, extra, said):
    extra = [e.replace("{tmp}", str(tmp_path)) for e in extra]
    try:
        code = main(_sim_args("fgd", *extra))
    except SystemExit as e:  # a usage error, from the parser
        code = int(e.code or 0)
    assert code == 2
    assert said in _assert_one_line_error(capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_sim_help_names_every_variant(capsys):
    with pytest.raises(SystemExit) as info:
        main(["sim", "--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert all(v in out for v in Suite1bConfig().variants)


def test_sim_defaults_are_suite_1b_defaults():
    args = build_parser().parse_args(["sim"])
    config = Suite1bConfig()
    assert (args.hours, args.nodes) == (config.horizon_h, config.n_nodes) == (SUITE1B_HOURS, SUITE1B_NODES)
    assert args.workload == config.workload and args.variant in config.variants
    assert args.restart_s is None  # then the configuration's restart_s
    suite = build_parser().parse_args(["suite", "1b"])
    assert (suite.hours, suite.nodes, tuple(suite.seeds)) == (config.horizon_h, config.n_nodes, config.seeds)


# -------------------------------------------------------------------------- suite options
FOREIGN = {
    "1a": [
        ["--hours", "1"],
        ["--nodes", "4"],
        ["--loads", "1.0"],
        ["--variants", "fgd"],
        ["--no-sweep"],
        ["--set", "plans_per_tick=1"],
    ],
    "1b": [
        ["--batch-sizes", "16"],
        ["--deterministic-time", "0.1"],
        ["--time-limit", "1"],
        ["--wall-clock"],
        ["--candidates", "4"],
    ],
}


@pytest.mark.parametrize("suite, flag", [(s, f) for s, flags in FOREIGN.items() for f in flags])
def test_a_flag_of_the_other_suite_is_a_one_line_usage_error(capsys, tmp_path, suite, flag):
    with pytest.raises(SystemExit) as info:
        main(["suite", suite, "--seeds", "42", "--out", str(tmp_path), *flag])
    assert info.value.code == 2
    line = _assert_usage_line(capsys.readouterr().err, f"gpudefrag suite {suite}")
    assert line.endswith("unrecognized arguments: " + " ".join(flag))
    assert not list(tmp_path.iterdir())


def test_each_suite_help_lists_only_its_own_flags(capsys):
    helps = {}
    for suite in ("1a", "1b"):
        with pytest.raises(SystemExit) as info:
            main(["suite", suite, "--help"])
        assert info.value.code == 0
        helps[suite] = capsys.readouterr().out
    for suite, flags in FOREIGN.items():
        other = "1b" if suite == "1a" else "1a"
        for flag in flags:
            assert flag[0] not in helps[suite] and flag[0] in helps[other]
    for shared in ("--workload", "--seeds", "--jobs", "--out", "--no-progress"):
        assert shared in helps["1a"] and shared in helps["1b"]


@pytest.mark.parametrize(
    "argv, prog",
    [
        (["suite"], "gpudefrag suite"),
        (["suite", "1c"], "gpudefrag suite"),
        (["suite", "1a", "--batch-sizes", "0"], "gpudefrag suite 1a"),
        (["sim", "--load", "-1"], "gpudefrag sim"),
        (["sim", "--seed", "-1"], "gpudefrag sim"),
        (["sim", "--hours", "inf"], "gpudefrag sim"),
        (["--bogus"], "gpudefrag"),
        (["data", "verify", "--bogus"], "gpudefrag data verify"),
    ],
)
def test_every_usage_error_is_one_line(capsys, argv, prog):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    _assert_usage_line(capsys.readouterr().err, prog)


def test_foreign_flag_exits_2_with_one_line_from_the_real_command():
    proc = _cli("suite", "1b", "--batch-sizes", "16")
    assert proc.returncode == 2
    line = _assert_usage_line(proc.stderr, "gpudefrag suite 1b")
    assert line == "gpudefrag suite 1b: error: unrecognized arguments: --batch-sizes 16"
