"""``gpudefrag gang-sim`` on a user's job trace: figures, JSON, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudefrag.cli import main

TRACE = "submit_s,duration_s,gpus,topology\n0,3600,16,required:leaf\n10,600,1,none\n20,7200,8,\n"


def test_runs_a_trace_and_prints_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(TRACE)
    assert (
        main(["gang-sim", "--trace", str(f), "--nodes", "4", "--constraint", "keep", "--check", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["jobs"] == 3 and out["pending_at_end"] == 0 and out["nodes"] == 4
    assert out["wait_p95_s_32p"] is None  # no job of 32+ GPUs: null, not NaN
    # 16 GPUs for 20 s of the 21 s run (the gang), plus the 1- and 8-GPU jobs from 10 s / 20 s
    expected = (16 * 21 + 1 * 11 + 8 * 1) / (21 * 32)
    assert out["alloc_pct"] == pytest.approx(100 * expected)


@pytest.mark.parametrize(
    ("text", "argv", "needle"),
    [
        ("submit_s,duration_s,gpus\n0,abc,4\n", [], "line 2, column 'duration_s'"),
        (TRACE, ["--topology", "nvl72"], "unknown topology level 'leaf'"),
        (TRACE, [], "--nodes: needed with --trace"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, argv: list[str], needle: str
) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(text)
    nodes = [] if needle == "--nodes: needed with --trace" else ["--nodes", "4"]
    assert main(["gang-sim", "--trace", str(f), "--constraint", "keep", *nodes, *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
