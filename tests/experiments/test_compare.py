"""``gpudefrag compare``: windows cut from the trace as documented, every variant of a window on the
same jobs, a report that starts with the verdict, and bad options refused."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from gpudefrag.cli import main
from gpudefrag.experiments.compare.plan import cluster_nodes, trace_windows
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.jobtrace import write_job_trace

DAY = 86_400.0


def _jobs(days: float, n: int, seed: int = 1) -> list[Job]:
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, days * DAY, n))
    sizes = rng.choice([1, 1, 2, 4, 8, 16], size=n)
    return [
        Job(i, float(s), float(rng.uniform(600, 20_000)), int(g))
        for i, (s, g) in enumerate(zip(submit, sizes))
    ]


def test_windows_are_the_days_after_a_day_of_warm_up() -> None:
    jobs = [Job(0, 100.0, 60.0, 1), Job(1, 3.5 * DAY, 60.0, 1)]
    windows, warmup = trace_windows(jobs)
    # first submission at 100 s: windows start at 100 s + 1 day and must end by 3.5 days
    assert warmup == DAY
    assert [(w.name, w.start_s, w.end_s) for w in windows] == [
        ("day01", 100.0 + DAY, 100.0 + 2 * DAY),
        ("day02", 100.0 + 2 * DAY, 100.0 + 3 * DAY),
    ]
    short, warmup = trace_windows([Job(0, 0.0, 60.0, 1), Job(1, 5000.0, 60.0, 1)])
    assert warmup == 0.0 and [(w.name, w.start_s, w.end_s) for w in short] == [("all", 0.0, 5001.0)]
    hourly, _ = trace_windows(jobs, 6 * 3600.0, 6 * 3600.0)
    assert len(hourly) == 12 and hourly[0].start_s == 100.0 + 6 * 3600.0
    # at growth 1.5 a window reads 1.5 days of the trace: it starts after 1.5 days of warm-up
    # and must read arrivals until it ends: only [100 s + 1.5 d, + 1 d) fits (it reads to 3 d)
    grown, _ = trace_windows(jobs, DAY, DAY, 1.5)
    assert [(w.start_s, w.end_s) for w in grown] == [(100.0 + 1.5 * DAY, 100.0 + 2.5 * DAY)]


def test_the_cluster_carries_the_trace_and_its_largest_job() -> None:
    # 10 jobs of 8 GPUs running a day each, one every 2.4 h over the trace's one day: inside that
    # day they run 8 x (10 + 9 + ... + 1) / 10 = 44 GPU-days, 5.5 nodes, rounded half up to 6
    busy = [Job(i, i * DAY / 10, DAY, 8) for i in range(10)] + [Job(10, DAY, 60.0, 1)]
    assert cluster_nodes(busy, 8) == 6
    assert cluster_nodes([Job(0, 0.0, 60.0, 64), Job(1, DAY, 60.0, 1)], 8) == 8  # the 64-GPU job


def test_compare_writes_a_report_that_starts_with_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_job_trace(tmp_path / "mine.csv", _jobs(4.6, 300))
    out = tmp_path / "report"
    argv = ["compare", "--trace", str(trace), "--variants", "volcano,ours+defrag", "--growth", "1,1.5"]
    assert main([*argv, "--jobs", "1", "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "300 jobs, 2 windows of 24 h" in printed and "ours+defrag instead of volcano" in printed
    text = (out / "report.md").read_text()
    assert text.index("## Verdict") < text.index("## Growth 1x") < text.index("## Growth 1.5x")
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 2 * 2 * 2  # windows x growths x variants
    # every variant of a (window, growth) replays the same jobs
    for w in ("day01", "day02"):
        for g in ("1.0", "1.5"):
            jobs = {r["jobs"] for r in rows if r["window"] == w and r["load"] == g}
            assert len(jobs) == 1, (w, g, jobs)
    assert (out / "charts" / "alloc_pct.png").exists()


def test_a_topology_without_leaves_gets_its_lowest_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "mine.csv"  # no topology column: the gangs get the default constraint
    rows = [f"{j.submit_s},{j.duration_s},{j.gpus}" for j in _jobs(2.5, 120)]
    trace.write_text("submit_s,duration_s,gpus\n" + "\n".join(rows) + "\n")
    argv = [
        "compare",
        "--trace",
        str(trace),
        "--topology",
        "nvl72",
        "--variants",
        "volcano,ours",
        "--growth",
        "1",
    ]
    assert main([*argv, "--jobs", "1", "--no-progress", "--out", str(tmp_path / "r")]) == 0
    assert (
        "constraints: `preferred:nvlink` for multi-node gangs" in (tmp_path / "r" / "report.md").read_text()
    )
    capsys.readouterr()
    bad = [*argv[:-2], "--growth", "1", "--constraint", "required:nosuch", "--out", str(tmp_path / "r2")]
    assert main(bad) == 2
    assert "nosuch" in capsys.readouterr().err and not (tmp_path / "r2").exists()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--topology-file", "t.toml", "--nodes", "4"], "--nodes: not with --topology-file"),
        (["--growth", "0"], "--growth"),
        (["--variants", "nosuch"], "nosuch"),
        (["--window-hours", "0.5"], "--window-hours"),
    ],
)
def test_bad_options_exit_2(
    tmp_path: Path, extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_job_trace(tmp_path / "mine.csv", _jobs(2.0, 20))
    try:
        code = main(["compare", "--trace", str(trace), *extra, "--out", str(tmp_path / "o")])
    except SystemExit as stop:  # a usage error found by the parser
        code = int(stop.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_missing_trace_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--trace", str(tmp_path / "none.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "none.csv: file not found" in capsys.readouterr().err
