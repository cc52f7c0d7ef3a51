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


# 44 one-GPU jobs fill 6 nodes of 8 GPUs and end at scattered times; four 8-GPU jobs then find
# enough free GPUs in all but no free node until moves gather them
FRAG = "submit_s,duration_s,gpus\n" + "".join(f"0,{2000 + (i * 7919) % 20000},1\n" for i in range(44))
FRAG += "".join(f"{5000 + k},30000,8\n" for k in range(4))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["gang-sim", *argv, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_a_profile_runs_what_it_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "jobs.csv"
    f.write_text(FRAG)
    base = ["--trace", str(f), "--nodes", "6", "--until-s", "40000"]
    # the shipped suite2 profile is the ours+defrag variant, decision for decision
    shipped = _run([*base, "--config", "suite2"], capsys)
    variant = _run([*base, "--variant", "ours+defrag"], capsys)
    assert shipped["event_hash"] == variant["event_hash"] and shipped["variant"] == "profile suite2"
    # a composition no variant has: Volcano's placement under our gang defragmenter
    mine = tmp_path / "mine.toml"
    mine.write_text('name = "mine"\nactions = ["allocate", "defragment"]\n[allocate]\ngangs = "volcano"\n')
    composed = _run([*base, "--config", str(mine)], capsys)
    alone = _run([*base, "--variant", "volcano"], capsys)
    assert composed["variant"] == "profile mine" and alone["migrations"] == 0
    assert isinstance(composed["migrations"], int) and composed["migrations"] > 0
    assert float(str(composed["alloc_pct"])) > float(str(alone["alloc_pct"]))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('name = "x"\n', "allocate.gangs: needed"),
        ('name = "x"\nactions = ["allocate", "preempt"]\n[allocate]\ngangs = "ours"\n', "run in suite 3"),
        (
            'name = "x"\nactions = ["allocate", "defragment", "consolidate"]\n[allocate]\ngangs = "kai"\n',
            "one of defragment and consolidate",
        ),
    ],
)
def test_a_profile_gang_sim_cannot_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needle: str
) -> None:
    f, prof = tmp_path / "jobs.csv", tmp_path / "p.toml"
    f.write_text(TRACE)
    prof.write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["gang-sim", "--trace", str(f), "--nodes", "4", "--config", str(prof)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
