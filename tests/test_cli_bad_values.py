"""Every command with bad values: exit 2, one line on stderr naming the flag, no traceback, and
nothing written.

The values come from the parser itself: every option that takes a value declares what it
accepts (a range from :mod:`gpudefrag.settings`, a list of such items, a set of names, or a
file), and each is driven below its range, above it, with the wrong type and with an unknown
name.  A new option that declares nothing fails :func:`test_every_option_declares_what_it_takes`.
Each ``--set KEY`` of suite 1b is driven the same way from its field's range.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from gpudefrag.cli import build_parser, main
from gpudefrag.cli_args import NameList, NumberList
from gpudefrag.settings import Bounds, Flag

FREE_TEXT = {"--identity", "--lease-namespace"}
"""Options whose value is any string (a name the user picks)."""


def options() -> Iterator[tuple[list[str], argparse.Action]]:
    """(command words, action) of every option of every command that takes a value."""

    def walk(
        parser: argparse.ArgumentParser, words: list[str]
    ) -> Iterator[tuple[list[str], argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, [*words, name])
            elif action.option_strings and action.nargs != 0 and action.dest != "help":
                yield words, action

    yield from walk(build_parser(), [])


def _below_above(b: Bounds) -> list[str]:
    """Values just outside ``b``: below its lower bound and above its upper one."""
    out = []
    step = 1 if b.kind is int else 0.5
    if b.ge is not None:
        out.append(_num(b.ge - step, b.kind))
    if b.gt is not None:
        out.append(_num(b.gt, b.kind))
    if b.le is not None:
        out.append(_num(b.le * 10 + 1 if b.le > 0 else b.le + step, b.kind))
    if b.lt is not None:
        out.append(_num(b.lt, b.kind))
    return out


def _num(v: float, kind: type) -> str:
    return str(int(v)) if kind is int else repr(float(v))


def bad_values(action: argparse.Action) -> list[str]:
    """Values ``action`` must refuse (module docstring)."""
    t = action.type
    if isinstance(t, Flag):
        b = t.bounds
        wrong = ["abc", "1.5"] if b.kind is int else ["abc", "nan", "inf"]
        return _below_above(b) + wrong
    if isinstance(t, NumberList):
        items = [*_below_above(t.item.bounds), "abc"]
        return [*items, ",", "1," + items[0]]
    if isinstance(t, NameList):
        return ["no-such-name", ","]
    if action.choices is not None:
        return ["no-such-name"]
    if t is Path:
        return []  # a file: see test_missing_files_exit_2
    return ["no-such-name"]


def test_every_option_declares_what_it_takes() -> None:
    undeclared = [
        f"{' '.join(words)} {a.option_strings[-1]}"
        for words, a in options()
        if not (isinstance(a.type, (Flag, NumberList, NameList)) or a.choices is not None or a.type is Path)
        and a.option_strings[-1]
        not in FREE_TEXT
        | {
            "--set",
            "--now",
            "--windows",
            "--window",
            "--workload",
            "--variant",
            "--constraint",
            "--dask",
            "--seeds",
            "--config",
            "--like",
        }
    ]
    assert not undeclared, "options that check nothing: " + "; ".join(undeclared)


def _cases() -> list[tuple[list[str], str, str]]:
    cases = []
    for words, action in options():
        flag = action.option_strings[-1]
        if flag in FREE_TEXT or flag == "--set":
            continue
        for bad in bad_values(action):
            cases.append((words, flag, bad))
    return cases


class _Stuck(Exception):
    pass


def _run(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` in this process, stopped after 20 s (a bad value accepted would start work)."""

    def stuck(signum: int, frame: object) -> None:
        raise _Stuck(" ".join(argv))

    old = signal.signal(signal.SIGALRM, stuck)
    signal.alarm(20)
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:
                code = int(e.code or 0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue()


def _one_line_error(code: int, out: str, err: str, argv: list[str]) -> None:
    assert code == 2, f"{argv}: exit {code}; stderr {err!r}"
    assert out == "", f"{argv}: wrote {out!r}"
    assert err.count("\n") == 1 and err.startswith("gpudefrag"), f"{argv}: {err!r}"
    assert "Traceback" not in err


@pytest.mark.parametrize(("words", "flag", "bad"), _cases())
def test_a_bad_value_is_one_line_and_exit_2(
    words: list[str], flag: str, bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [*words, f"{flag}={bad}"]
    code, out, err = _run(argv)
    _one_line_error(code, out, err, argv)
    assert flag in err, f"{argv}: the message does not name {flag}: {err!r}"
    assert list(tmp_path.iterdir()) == [], f"{argv} left files behind"


def _set_keys() -> list[tuple[str, str]]:
    from dataclasses import fields, is_dataclass

    from gpudefrag.experiments.suite1b.config import Suite1bConfig
    from gpudefrag.settings import _hints, bounds_of

    out = []

    def walk(cls: type, prefix: str) -> None:
        hints = _hints(cls)
        default = cls()
        for f in fields(cls):
            v = getattr(default, f.name)
            if is_dataclass(v):
                walk(type(v), f"{prefix}{f.name}.")
            elif isinstance(v, (bool, int, float)) or (
                v is None and bounds_of(hints[f.name]).kind in (int, float)
            ):
                b = bounds_of(hints[f.name])
                for bad in [*_below_above(b), "abc"] if not isinstance(v, bool) else ["maybe"]:
                    out.append((prefix + f.name, bad))

    walk(Suite1bConfig, "")
    return out


@pytest.mark.parametrize(("key", "bad"), _set_keys())
def test_a_bad_setting_is_one_line_and_exit_2(
    key: str, bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if key == "planner.migration.restart_s" or key == "planner.migration.eviction_grace_s":
        pytest.skip("the run's migration model: set restart_s and eviction_grace_s")
    monkeypatch.chdir(tmp_path)
    argv = ["sim", "--set", f"{key}={bad}"]
    code, out, err = _run(argv)
    _one_line_error(code, out, err, argv)
    assert key in err
    assert list(tmp_path.iterdir()) == []


def test_every_numeric_setting_has_a_range() -> None:
    from gpudefrag.experiments.common.overrides import _scalar_keys
    from gpudefrag.experiments.suite1b.config import Suite1bConfig

    checked = {k for k, _ in _set_keys()}
    numeric = {k for k in _scalar_keys(Suite1bConfig()) if k not in ("workload", "runtime_estimates")}
    assert numeric == checked
    assert all(bad for _, bad in _set_keys())  # every numeric key got at least one bad value


@pytest.mark.parametrize(
    "argv",
    [
        ["gang-sim", "--trace", "missing.csv", "--nodes", "4"],
        ["gang-sim", "--window", "itp04-w2", "--topology-file", "missing.toml"],
        ["plan", "--snapshot", "missing.json"],
        ["defrag", "--dry-run", "--snapshot", "missing.json"],
        ["plan", "--snapshot", "missing.json", "--topology-levels", "missing.yaml"],
        ["data", "fetch", "missing"],
        ["data", "verify", "missing"],
    ],
)
def test_missing_files_exit_2(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(argv)
    _one_line_error(code, out, err, argv)
    assert "missing" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["gang-sim", "--trace", "{trace}", "--nodes", "4", "--load", "2"], "--load: only with --window"),
        (["gang-sim", "--window", "itp04-w2", "--until-s", "5"], "--until-s: only with --trace"),
        (["gang-sim", "--trace", "{trace}", "--nodes", "0"], "--nodes: must be an integer in 1..1_000_000"),
        (["gang-sim", "--trace", "{trace}"], "--nodes: needed with --trace"),
        (["bench", "--decisions", "5"], "--decisions: only with --gpus or --sweep"),
        (["bench", "--out", "x"], "--out: only with --sweep"),
        (["bench", "--sweep", "1000", "--gpus", "1000"], "--gpus: not with --sweep"),
        (["sim", "--nodes", "100000"], "--nodes 100000: the GPU-node list has"),
        (
            ["k8s-bench", "--pods", "10", "--latency-pods", "20"],
            "--latency-pods 20: must be fewer than --pods",
        ),
    ],
)
def test_flags_that_do_not_apply_or_do_not_fit_exit_2(
    argv: list[str], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,duration_s,gpus\n0,60,8\n")
    argv = [a.format(trace=trace) for a in argv]
    code, out, err = _run(argv)
    _one_line_error(code, out, err, argv)
    assert needle in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.mark.parametrize("argv", [["data", "list"], ["--help"], ["plan", "--help"]])
def test_a_closed_stdout_ends_quietly(argv: list[str]) -> None:
    """``gpudefrag ... | head -1``: the command stops without a message (exit 141, as a Unix tool
    killed by SIGPIPE would; argparse's help, which ignores a failed write, exits 0).  Here the
    reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gpudefrag", *argv], stdout=write_end, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write_end)
    assert proc.stderr.decode() == ""
    assert proc.returncode == (0 if "--help" in argv else 141)


def test_the_names_the_parser_knows_are_the_packages() -> None:
    """The parser names policies and variants without loading them: the lists must agree."""
    from gpudefrag.cli_args import POLICY_NAMES_CLI
    from gpudefrag.cli_suite1 import KNOWN_VARIANTS
    from gpudefrag.experiments.suite1b.config import KNOWN_VARIANTS as SUITE1B_VARIANTS
    from gpudefrag.policies.registry import POLICY_NAMES

    assert set(POLICY_NAMES_CLI) == set(POLICY_NAMES) and len(POLICY_NAMES_CLI) == len(POLICY_NAMES)
    assert KNOWN_VARIANTS == SUITE1B_VARIANTS


def test_plain_numbers_are_read_as_pydantic_reads_them() -> None:
    """A flag reads plain numerals without pydantic (start-up time); on every numeric flag and
    on numerals at, inside and just outside its bounds, it must give pydantic's answer."""
    from pydantic import TypeAdapter, ValidationError

    texts = ["0", "1", "-1", "+2", "007", "42", "0.5", ".5", "5.", "1e3", "-1e-3", "86400", "99999999999"]
    compared = 0
    for _words, action in options():
        t = action.type
        if not isinstance(t, Flag) or t.bounds.kind not in (int, float):
            continue
        b = t.bounds
        edges = [v for v in (b.ge, b.gt, b.le, b.lt) if v is not None]
        candidates = texts + [repr(e) for e in edges] + [repr(int(e)) for e in edges if float(e).is_integer()]
        candidates += [repr(e + d) for e in edges for d in (-1e-9, 1e-9, -1, 1)]
        for text in candidates:
            try:
                expected: object = TypeAdapter(t.annotation).validate_python(text)
            except ValidationError:
                expected = "rejected"
            try:
                got: object = t(text)
            except argparse.ArgumentTypeError:
                got = "rejected"
            if b.optional and text.lower() == "none":
                continue
            assert got == expected and type(got) is type(expected), (
                action.option_strings,
                text,
                got,
                expected,
            )
            compared += 1
    assert compared > 100
