"""Job-trace CSV (load/write), and the ITP and Philly loaders: real counts and bad inputs."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from conftest import needs_mirror
from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.jobs import Constraint, Job
from gpudefrag.workloads.itp import ITP_CLUSTERS, itp_dataset, load_itp, load_itp_csv
from gpudefrag.workloads.jobtrace import JOB_TRACE_COLUMNS, load_job_trace, write_job_trace
from gpudefrag.workloads.philly import load_philly, load_philly_csv


def _csv(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path, loader=load_job_trace) -> InputError:
    with pytest.raises(InputError) as info:
        loader(path)
    assert str(info.value).startswith(str(path))
    return info.value


# --- job-trace CSV --------------------------------------------------------------------------------


def test_load_all_columns_any_order_sorted_and_defaults(tmp_path):
    path = _csv(
        tmp_path,
        "name,gpus,submit_s,duration_s,gpu_milli,priority,topology\n"
        "late,16,100.5,3600,,2,required:leaf\n"
        '"early ""a, b""",1,0,60,250,-1,preferred:nvlink\n'
        "tie,4,100.5,1e3,1000,,none\n"
        "plain,8,50,10,,,\n",
    )
    jobs = load_job_trace(path)
    assert [j.job_id for j in jobs] == [1, 3, 0, 2]  # by submit time, file order on ties
    assert jobs[0] == Job(1, 0.0, 60.0, 1, 250, -1, Constraint("preferred", "nvlink"), 'early "a, b"')
    assert jobs[1] == Job(3, 50.0, 10.0, 8, name="plain")
    assert jobs[2] == Job(0, 100.5, 3600.0, 16, 1000, 2, Constraint("required", "leaf"), "late")
    assert jobs[3] == Job(2, 100.5, 1000.0, 4, name="tie")
    assert jobs[0].gpu_share == 0.25


def test_only_required_columns(tmp_path):
    jobs = load_job_trace(_csv(tmp_path, "submit_s,duration_s,gpus\n0,1,1\n\n"))  # trailing blank ok
    assert jobs == [Job(0, 0.0, 1.0, 1)]


HEADER = "submit_s,duration_s,gpus,gpu_milli,priority,topology,name\n"


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("submit_s,duration_s,gpus,colour\n0,1,1,red\n", 1, "colour", "unknown column"),
        ("submit_s,gpus\n0,1\n", 1, "duration_s", "missing required column"),
        ("submit_s,duration_s,gpus,gpus\n0,1,1,1\n", 1, "gpus", "duplicate column"),
        ("submit_s, duration_s,gpus\n0,1,1\n", 1, " duration_s", "did you mean 'duration_s'"),
        (HEADER + "0,1,1,1000,0,none,a\n5,10\n", 3, "gpus", "truncated row"),
        (HEADER + "0,1,1,1000,0,none,a,extra\n", 2, "#8 (after 'name')", "too many fields"),
        (HEADER + "-1,1,1,,,,\n", 2, "submit_s", "must be >= 0"),
        (HEADER + "nan,1,1,,,,\n", 2, "submit_s", "not a number"),
        (HEADER + "1e400,1,1,,,,\n", 2, "submit_s", "out of range"),
        (HEADER + ",1,1,,,,\n", 2, "submit_s", "empty required field"),
        (HEADER + "0,0,1,,,,\n", 2, "duration_s", "must be > 0"),
        (HEADER + "0,1 ,1,,,,\n", 2, "duration_s", "not a number"),
        (HEADER + "0,1,0,,,,\n", 2, "gpus", "must be >= 1"),
        (HEADER + "0,1,1.5,,,,\n", 2, "gpus", "not an integer"),
        (HEADER + "0,1,1,0,,,\n", 2, "gpu_milli", "must be >= 1"),
        (HEADER + "0,1,1,1001,,,\n", 2, "gpu_milli", "must be <= 1000"),
        (HEADER + "0,1,1,1000,,,\n0,1,2,500,,,\n", 3, "gpu_milli", "needs gpus == 1"),
        (HEADER + "0,1,1,,high,,\n", 2, "priority", "not an integer"),
        (HEADER + "0,1,1,,,sometimes:rack,\n", 2, "topology", "bad topology"),
        (HEADER + "0,1,1,,,required:,\n", 2, "topology", "bad topology"),
        (HEADER + "0,1,1,,,,\n\n0,1,1,,,,\n", 3, None, "blank line inside the data"),
    ],
)
def test_bad_rows_name_file_line_and_column(tmp_path, text, line, column, fragment):
    err = _error(_csv(tmp_path, text))
    assert (err.line, err.column) == (line, column)
    assert fragment in err.message
    where = f"line {line}" + (f", column '{column}'" if column is not None else "")
    assert where in str(err)


def test_empty_file_header_only_and_missing_file(tmp_path):
    err = _error(_csv(tmp_path, ""))
    assert err.line == 1 and "empty file" in err.message
    err = _error(_csv(tmp_path, "submit_s,duration_s,gpus\n"))
    assert err.line == 1 and "no data rows" in err.message
    err = _error(tmp_path / "absent.csv")
    assert "file not found" in err.message


def test_round_trip_write_then_read(tmp_path):
    jobs = [
        Job(0, 0.0, 0.1, 1, 125, -3, Constraint("preferred", "nvlink"), 'quote " and, comma'),
        Job(1, 0.1 + 0.2, 86_400.0, 64, 1000, 0, Constraint("required", "leaf"), "ünïcode"),
        Job(2, 1e6 / 3, 1e-3, 12, name="line\nbreak"),
        Job(3, 123456789.0, 7.25, 8),
    ]
    path = write_job_trace(tmp_path / "out.csv", jobs)
    assert path.read_text(encoding="utf-8").splitlines()[0] == ",".join(JOB_TRACE_COLUMNS)
    assert load_job_trace(path) == jobs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # no temp file left


def test_write_refuses_bad_jobs_and_keeps_the_old_file(tmp_path):
    path = write_job_trace(tmp_path / "out.csv", [Job(0, 0.0, 1.0, 1)])
    before = path.read_bytes()
    for bad in (Job(0, 0.0, 1.0, 2, gpu_milli=500), Job(0, -1.0, 1.0, 1), Job(0, 0.0, 0.0, 1)):
        with pytest.raises(ConfigError):
            write_job_trace(path, [Job(1, 0.0, 1.0, 1), bad])
    with pytest.raises(ConfigError, match="no jobs"):
        write_job_trace(path, [])
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


# --- ITP ---------------------------------------------------------------------------------------------

ITP_HEADER = "job_id,submission_time,duration,num_gpu\n"
U1 = "c9c620ea-4336-c1a9-8abe-e26bd13076b8"
U2 = "be631d51-a07b-5693-739f-f4379ec5d0cc"


def test_itp_toy_file(tmp_path):
    path = _csv(tmp_path, ITP_HEADER + f"{U1},700,600,16\n{U2},5,1200,1\n")
    assert load_itp_csv(path) == [Job(1, 5.0, 1200.0, 1, name=U2), Job(0, 700.0, 600.0, 16, name=U1)]


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("job_id,submission_time,duration,num_gpus\n", 1, "num_gpus", "unknown column"),
        (ITP_HEADER + "not-a-uuid,0,600,1\n", 2, "job_id", "not a UUID"),
        (ITP_HEADER + f"{U1},0,600,1\n{U1},1,600,1\n", 3, "job_id", "duplicate job_id"),
        (ITP_HEADER + f"{U1},-5,600,1\n", 2, "submission_time", "must be >= 0"),
        (ITP_HEADER + f"{U1},1.5,600,1\n", 2, "submission_time", "not an integer"),
        (ITP_HEADER + f"{U1},0,0,1\n", 2, "duration", "must be >= 1"),
        (ITP_HEADER + f"{U1},0,600,0\n", 2, "num_gpu", "must be >= 1"),
        (ITP_HEADER + f"{U1},0,600\n", 2, "num_gpu", "truncated row"),
    ],
)
def test_itp_bad_rows(tmp_path, text, line, column, fragment):
    err = _error(_csv(tmp_path, text), load_itp_csv)
    assert (err.line, err.column) == (line, column)
    assert fragment in err.message


def test_itp_dataset_names():
    assert itp_dataset(4) == itp_dataset("04") == itp_dataset("cluster04") == "itp_cluster04"
    assert itp_dataset("itp04") == itp_dataset("itp_cluster04") == ITP_CLUSTERS[3]
    for bad in (0, 11, "cluster", "philly"):
        with pytest.raises(ConfigError, match="itp_cluster01"):
            itp_dataset(bad)


@needs_mirror
def test_itp_cluster04_real_counts():
    jobs = load_itp("itp_cluster04")
    assert len(jobs) == 15_802
    assert Counter(j.gpus for j in jobs) == {1: 11_924, 2: 125, 4: 532, 8: 2_779, 16: 182, 32: 254, 64: 6}
    assert sum(j.gpus > 8 for j in jobs) == 442
    assert all(a.submit_s <= b.submit_s for a, b in itertools.pairwise(jobs))
    assert min(j.duration_s for j in jobs) >= 600
    assert round(sum(j.gpus * j.duration_s for j in jobs) / 3600) == 705_683
    assert len({j.name for j in jobs}) == len(jobs)


@needs_mirror
def test_itp_all_clusters_real_counts():
    assert sum(len(load_itp(name)) for name in ITP_CLUSTERS) == 69_351


# --- Philly ------------------------------------------------------------------------------------------

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def test_philly_toy_file_unsorted_and_vc(tmp_path):
    path = _csv(
        tmp_path,
        PHILLY_HEADER
        + "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
        + "2017-10-09 07:00:00,10.0,8,80.0,6214e9\n"
        + "2017-10-10 07:00:00,2.5,2,5.0,11cb48\n",
    )
    assert load_philly_csv(path) == [
        Job(1, 0.0, 10.0, 8, name="6214e9-1"),
        Job(0, 115.0, 66.0, 1, name="11cb48-0"),
        Job(2, 86_400.0, 2.5, 2, name="11cb48-2"),
    ]
    # One VC keeps the time axis of the whole file.
    assert [j.submit_s for j in load_philly_csv(path, vc="11cb48")] == [115.0, 86_400.0]
    with pytest.raises(ConfigError, match="11cb48, 6214e9"):
        load_philly_csv(path, vc="nope")


@pytest.mark.parametrize(
    ("row", "column", "fragment"),
    [
        ("2017-9-04 10:30:00,1.0,1,1.0,a", "timestamp", "bad timestamp"),
        ("2017-02-30 10:30:00,1.0,1,1.0,a", "timestamp", "not a valid date"),
        ("2017-09-04T10:30:00,1.0,1,1.0,a", "timestamp", "bad timestamp"),
        ("2017-09-04 10:30:00,0,1,0.0,a", "duration", "must be > 0"),
        ("2017-09-04 10:30:00,1.0,0,0.0,a", "num_gpus", "must be >= 1"),
        ("2017-09-04 10:30:00,2.0,4,7.0,a", "gpu_time", "not duration x num_gpus"),
        ("2017-09-04 10:30:00,1.0,1,1.0,", "cluster", "empty required field"),
    ],
)
def test_philly_bad_rows(tmp_path, row, column, fragment):
    text = PHILLY_HEADER + "2017-09-04 10:30:00,1.0,1,1.0,a\n" + row + "\n"
    err = _error(_csv(tmp_path, text), load_philly_csv)
    assert (err.line, err.column) == (3, column)
    assert fragment in err.message


@needs_mirror
def test_philly_real_counts():
    jobs = load_philly()
    assert len(jobs) == 82_247
    assert jobs[0].submit_s == 0.0
    assert all(a.submit_s <= b.submit_s for a, b in itertools.pairwise(jobs))
    assert jobs[-1].submit_s / 86_400 == pytest.approx(108.9, abs=0.05)
    assert sum(j.gpus > 8 for j in jobs) == 289
    assert round(sum(j.gpus * j.duration_s for j in jobs) / 3600) == 978_078
    vc = load_philly(vc="b436b2")
    assert len(vc) == 7_423 and all(j.name.startswith("b436b2-") for j in vc)
