"""``import slurm``: a hand-made ``sacct --parsable2`` file loads to the jobs worked out below, and
every malformed line is one error naming the file, the line and the column."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudefrag.cli import main
from gpudefrag.errors import InputError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.import_slurm import import_sacct, parse_alloc_tres
from gpudefrag.workloads.jobtrace import load_job_trace

HEADER = "JobID|JobName|Partition|QOS|Priority|Submit|Start|End|State|AllocTRES|NNodes|Timelimit"
T0 = "2026-11-01T00"
LINES = [
    # a 16-GPU gang over two nodes, and its steps (skipped: the allocation line holds the job)
    f"100|pretrain|gpu|high|5000|{T0}:00:00|{T0}:10:00|2026-11-01T02:10:00|COMPLETED|"
    "billing=64,cpu=64,gres/gpu=16,mem=512G,node=2|2|1-00:00:00",
    f"100.batch|batch||||{T0}:10:00|{T0}:10:00|2026-11-01T02:10:00|COMPLETED|cpu=32,gres/gpu=8,mem=256G,node=1|1|",
    f"100.0|python||||{T0}:10:01|{T0}:10:01|2026-11-01T02:09:59|COMPLETED|cpu=64,gres/gpu=16,node=2|2|",
    # one typed GPU
    f"101|eval|gpu|normal|100|{T0}:05:00|{T0}:06:00|{T0}:36:00|COMPLETED|cpu=8,gres/gpu:a100=1,mem=64G,node=1|1|01:00:00",
    # CPU only: skipped
    f"102|prep|cpu|normal|100|{T0}:07:00|{T0}:07:30|{T0}:20:00|COMPLETED|cpu=4,mem=16G,node=1|1|00:30:00",
    # a quarter of a GPU through MPS
    "103|notebook|gpu|normal|100|2026-11-01T01:00:00|2026-11-01T01:00:05|2026-11-01T03:00:05|COMPLETED|"
    "cpu=2,gres/mps=25,mem=8G,node=1|1|",
    # never started: pending (no AllocTRES yet) and cancelled in the queue
    "104|queued|gpu|normal|100|2026-11-01T02:00:00|Unknown|Unknown|PENDING||1|",
    "105|gone|gpu|normal|100|2026-11-01T02:30:00|None|2026-11-01T02:40:00|CANCELLED by 1000||1|",
    # still running at the dump
    "106|serve|gpu|normal|7|2026-11-01T03:00:00|2026-11-01T03:00:00|Unknown|RUNNING|cpu=8,gres/gpu=4,node=1|1|",
    # clock skew: a start before the submission, an end before the start
    f"107_1|sweep|gpu|normal|100|{T0}:01:00|{T0}:00:58|{T0}:30:00|COMPLETED|gres/gpu=1|1|",
    f"107_2|sweep|gpu|normal|100|{T0}:01:00|{T0}:02:00|{T0}:01:50|FAILED|gres/gpu=1|1|",
]


def _write(tmp_path: Path, lines: list[str], name: str = "sacct.txt") -> Path:
    f = tmp_path / name
    f.write_text("\n".join([HEADER, *lines]) + "\n")
    return f


def test_alloc_tres_rules() -> None:
    assert parse_alloc_tres("billing=8,cpu=8,gres/gpu=4,mem=64G,node=1") == (4, 1000)
    assert parse_alloc_tres("gres/gpu:a100=2,gres/gpu:h100=1") == (3, 1000)  # typed only: summed
    assert parse_alloc_tres("gres/gpu=2,gres/gpu:a100=2") == (2, 1000)  # the untyped total wins
    assert parse_alloc_tres("gres/mps=50") == (1, 500)
    assert parse_alloc_tres("cpu=4,mem=1G") == (0, 1000)
    for bad in ("gres/gpu=two", "gres/gpu", "gres/mps=150", "=3"):
        with pytest.raises(ValueError):
            parse_alloc_tres(bad)


def test_hand_made_sacct_loads_to_the_expected_jobs(tmp_path: Path) -> None:
    got = import_sacct(_write(tmp_path, LINES), now_s=None)
    # origin 2026-11-01T00:00:00; ids in (submit, file order); 106 ends at the latest time in
    # the file (103's end, 03:00:05): 5 s
    assert got.jobs == [
        Job(0, 0.0, 7200.0, 16, 1000, 5000, None, "pretrain"),
        Job(1, 60.0, 1740.0, 1, 1000, 100, None, "sweep"),  # start 00:00:58 moved to 00:01:00
        Job(2, 60.0, 1.0, 1, 1000, 100, None, "sweep"),  # ended 10 s before it started
        Job(3, 300.0, 1800.0, 1, 1000, 100, None, "eval"),
        Job(4, 3600.0, 7200.0, 1, 250, 100, None, "notebook"),
        Job(5, 10800.0, 5.0, 4, 1000, 7, None, "serve"),
    ]
    assert got.notes == {
        "job steps (the allocation line holds the job)": 2,
        "CPU-only jobs (no GPU in AllocTRES)": 1,
        "never started (PENDING)": 1,
        "never started (CANCELLED)": 1,
        "still running (ended at the dump time: a lower bound)": 1,
        "start before submission (moved to the submission)": 1,
        "end before start (clock skew; ran 1 s)": 1,
    }


def test_now_ends_the_running_jobs(tmp_path: Path) -> None:
    import datetime as dt

    now = dt.datetime(2026, 11, 1, 4, 0, tzinfo=dt.UTC).timestamp()
    serve = import_sacct(_write(tmp_path, LINES), now_s=now).jobs[-1]
    assert (serve.name, serve.duration_s) == ("serve", 3600.0)


def test_the_command_writes_a_trace_gang_sim_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "trace.csv"
    assert (
        main(
            [
                "import",
                "slurm",
                str(_write(tmp_path, LINES)),
                "--out",
                str(out),
                "--now",
                "2026-11-01T04:00:00",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "wrote 6 jobs" in text and "never started (PENDING): 1" in text and "gang-sim --trace" in text
    assert [j.gpus for j in load_job_trace(out)] == [16, 1, 1, 1, 1, 4]


@pytest.mark.parametrize(
    ("line", "column"),
    [
        (f"200|x|gpu|n|1|{T0}:00:00|2026-11-01 00:10:00|{T0}:20:00|COMPLETED|gres/gpu=1|1|", "Start"),
        (f"200|x|gpu|n|1|{T0}:00:00|{T0}:10:00|yesterday|COMPLETED|gres/gpu=1|1|", "End"),
        (f"200|x|gpu|n|1|Unknown|{T0}:10:00|{T0}:20:00|COMPLETED|gres/gpu=1|1|", "Submit"),
        (f"200|x|gpu|n|1|{T0}:00:00|{T0}:10:00|{T0}:20:00|COMPLETED|gres/gpu=four|1|", "AllocTRES"),
        (f"200|x|gpu|n|1|{T0}:00:00|{T0}:10:00|{T0}:20:00|COMPLETED|gres/mps=150|1|", "AllocTRES"),
        (f"200|x|gpu|n|high|{T0}:00:00|{T0}:10:00|{T0}:20:00|COMPLETED|gres/gpu=1|1|", "Priority"),
        (f"job-7|x|gpu|n|1|{T0}:00:00|{T0}:10:00|{T0}:20:00|COMPLETED|gres/gpu=1|1|", "JobID"),
        (f"200|x|gpu|n|1|{T0}:00:00|{T0}:10:00", "End"),  # too few fields: the first missing column
    ],
)
def test_a_malformed_line_names_file_line_and_column(tmp_path: Path, line: str, column: str) -> None:
    f = _write(tmp_path, [LINES[0], line, LINES[3]])
    with pytest.raises(InputError) as e:
        import_sacct(f)
    assert (e.value.path, e.value.line, e.value.column) == (str(f), 3, column)


def test_other_malformed_files(tmp_path: Path) -> None:
    extra = _write(tmp_path, [LINES[0] + "|extra"], "extra.txt")
    with pytest.raises(InputError, match="13 fields, the header has 12") as e:
        import_sacct(extra)
    assert e.value.line == 2
    blank = _write(tmp_path, [LINES[0], "", LINES[3]], "blank.txt")
    with pytest.raises(InputError, match="blank line") as e:
        import_sacct(blank)
    assert e.value.line == 3
    no_end = tmp_path / "noend.txt"
    no_end.write_text(HEADER.replace("|End|", "|") + "\n")
    with pytest.raises(InputError) as e:
        import_sacct(no_end)
    assert (e.value.line, e.value.column) == (1, "End")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file"):
        import_sacct(empty)
    with pytest.raises(InputError, match="file not found"):
        import_sacct(tmp_path / "missing.txt")


def test_a_bad_file_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _write(tmp_path, [LINES[0], LINES[0].replace("gres/gpu=16", "gres/gpu=x")])
    out = tmp_path / "trace.csv"
    assert main(["import", "slurm", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 3, column 'AllocTRES'" in err and "Traceback" not in err
    assert not out.exists()
    only_cpu = _write(tmp_path, [LINES[4]], "cpu.txt")
    assert main(["import", "slurm", str(only_cpu), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no job with GPUs that started (left out: CPU-only jobs (no GPU in AllocTRES): 1)" in err
    assert not out.exists()
