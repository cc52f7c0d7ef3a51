"""Suite-2 windows: busiest-window choice, cluster sizing, load scaling, mixing, the fixed list."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_mirror
from gpudefrag.errors import ConfigError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.openb import PodTable
from gpudefrag.workloads.suite_windows import (
    CONFIRMATION,
    CONFIRMATION_2,
    CONFIRMATION_3,
    CONFIRMATION_4,
    MIX_SUFFIX,
    REPORT,
    TUNING,
    UNUSED,
    WINDOWS,
    load_trace,
    suite_run,
    suite_windows,
    window,
)
from gpudefrag.workloads.window_table import window_table
from gpudefrag.workloads.windows import (
    DAY_S,
    Window,
    busiest_windows,
    mixed_workload,
    offered_gpu_seconds,
    scaled_jobs,
    size_cluster,
)

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _trace(name: str) -> list[Job]:
    return load_trace(name)


# --- busiest windows -------------------------------------------------------------------------------


def _day_jobs(gpu_hours_per_day: list[float]) -> list[Job]:
    """One 1-GPU job submitted at noon of each day, carrying the given GPU-hours."""
    return [
        Job(i, i * DAY_S + DAY_S / 2, h * 3600.0, 1) for i, h in enumerate(gpu_hours_per_day) if h > 0
    ] + [Job(len(gpu_hours_per_day), len(gpu_hours_per_day) * DAY_S, 1.0, 1)]


def test_busiest_windows_toy():
    # Days 0..11 (day 12 holds the last submission). 2-day windows after a 1-day warm-up.
    hours = [50, 1, 1, 9, 9, 1, 1, 7, 7, 1, 1, 3]
    jobs = _day_jobs(hours)
    got = busiest_windows(jobs, window_s=2 * DAY_S, warmup_s=DAY_S, count=3, trace="toy")
    # Day 0 is inside the warm-up (first submission at 0.5 d + 1 d warm-up -> first start day 2).
    assert [(w.start_s / DAY_S, w.gpu_hours) for w in got] == [(3, 18), (7, 14), (10, 4)]
    assert all(w.trace == "toy" and w.end_s - w.start_s == 2 * DAY_S for w in got)
    # A larger max_scale needs more room at both ends; a cool-down keeps the last days out.
    got = busiest_windows(jobs, 2 * DAY_S, DAY_S, count=5, max_scale=2.0, cooldown_s=2 * DAY_S)
    # Starts 3..6 (start >= 0.5 + 2 x 1 d, start + 2 x 2 d + 2 d <= 12 d) score 18, 10, 2, 8.
    assert [w.start_s / DAY_S for w in got] == [3, 6]
    assert busiest_windows(jobs, window_s=20 * DAY_S) == []
    with pytest.raises(ConfigError):
        busiest_windows([], count=1)


@needs_mirror
def test_busiest_windows_real_are_greedy_and_non_overlapping():
    jobs = _trace("itp_cluster04")
    week, warm = 7 * DAY_S, 2 * DAY_S
    got = busiest_windows(jobs, week, warm, count=5, trace="itp_cluster04")
    assert len(got) == 5
    first, last = jobs[0].submit_s, jobs[-1].submit_s
    submit = np.array([j.submit_s for j in jobs])
    work = np.array([j.gpu_share * j.duration_s for j in jobs])

    def hours(start: float) -> float:
        return float(work[(submit >= start) & (submit < start + week)].sum() / 3600)

    candidates = [d * DAY_S for d in range(0, 70) if d * DAY_S >= first + warm and d * DAY_S + week <= last]
    for i, w in enumerate(got):
        assert w.start_s % DAY_S == 0 and w.start_s >= first + warm and w.end_s <= last
        assert w.gpu_hours == pytest.approx(hours(w.start_s), rel=1e-9)
        for v in got[:i]:
            assert w.end_s <= v.start_s or v.end_s <= w.start_s  # no overlap
        # Greedy: no candidate that fits beside the earlier picks is busier.
        free = [c for c in candidates if all(c + week <= v.start_s or v.end_s <= c for v in got[:i])]
        assert w.gpu_hours >= max(hours(c) for c in free) - 1e-6
    assert got[0].gpu_hours == pytest.approx(max(hours(c) for c in candidates))


# --- sizing --------------------------------------------------------------------------------------------


def test_size_cluster_hand_computed():
    w = Window("toy", 100.0, 200.0, 0.0)
    jobs = [
        Job(0, 50.0, 100.0, 2),  # runs [50, 150): 50 s inside x 2 GPUs = 100
        Job(1, 120.0, 1000.0, 2),  # [120, 1120): 80 s x 2 = 160
        Job(2, 150.0, 10.0, 1, gpu_milli=500),  # [150, 160): 10 s x 0.5 = 5
        Job(3, 0.0, 50.0, 4),  # [0, 50): ends before the window, 0
        Job(4, 200.0, 10.0, 4),  # starts at the window's end, 0
    ]
    assert offered_gpu_seconds(jobs, w) == 265.0
    assert size_cluster(jobs, w, gpus_per_node=1) == 4  # 2.65 -> 3, but the largest job needs 4
    assert size_cluster(jobs[:3], w, gpus_per_node=1) == 3  # 2.65 rounds to 3
    assert size_cluster(jobs[:3], w, gpus_per_node=2) == 1  # 1.325 -> 1
    assert size_cluster(jobs[:3] + [Job(5, 900.0, 1.0, 16)], w, gpus_per_node=2) == 8  # 16-GPU gang
    half = [Job(0, 100.0, 100.0, 5)]  # 500 GPU-s / (100 s x 2 GPUs) = 2.5 -> rounds half up
    assert size_cluster(half, w, gpus_per_node=2) == 3
    assert size_cluster([Job(0, 500.0, 1.0, 1)], w, gpus_per_node=8) == 1  # never below 1


# --- scaling -------------------------------------------------------------------------------------------


def test_scaled_jobs_compress_gaps_exactly():
    w = Window("toy", 1000.0, 2000.0, 0.0)
    submits = [400.0, 549.0, 550.0, 1000.0, 1600.0, 2497.0, 2500.0]
    jobs = [Job(i, t, 10.0 + i, 1 + i, name=f"j{i}") for i, t in enumerate(submits)]
    # scale 1.5, warm-up 300: keeps [1000 - 450, 1000 + 1500) = [550, 2500)
    run = scaled_jobs(jobs, w, 1.5, warmup_s=300.0)
    assert run.measure == (300.0, 1300.0)
    assert [j.job_id for j in run.jobs] == [2, 3, 4, 5]
    assert [j.submit_s for j in run.jobs] == [0.0, 300.0, 700.0, 1298.0]
    assert [(j.duration_s, j.gpus, j.name) for j in run.jobs] == [
        (jobs[i].duration_s, jobs[i].gpus, jobs[i].name) for i in (2, 3, 4, 5)
    ]
    run1 = scaled_jobs(jobs, w, 1.0, warmup_s=300.0)  # scale 1: a pure shift by start - warmup
    assert [(j.job_id, j.submit_s) for j in run1.jobs] == [(3, 300.0), (4, 900.0)]
    with pytest.raises(ConfigError):
        scaled_jobs(jobs, w, 0.0)


@needs_mirror
def test_scaled_real_window_gaps_and_durations():
    w = window("itp04-w1")
    jobs = _trace(w.trace)
    by_id = {j.job_id: j for j in jobs}
    for scale in (1.0, 1.25, 1.5):
        run = scaled_jobs(jobs, w, scale, 2 * DAY_S)
        assert run.measure == (2 * DAY_S, 9 * DAY_S)
        orig = [by_id[j.job_id] for j in run.jobs]
        assert all(a.duration_s == b.duration_s and a.gpus == b.gpus for a, b in zip(run.jobs, orig))
        gaps = np.diff([j.submit_s for j in run.jobs])
        assert np.allclose(gaps * scale, np.diff([j.submit_s for j in orig]), rtol=0, atol=1e-6)
        assert run.jobs[0].submit_s >= 0 and run.jobs[-1].submit_s < run.measure[1]
        expected = sum(
            w.start_s - 2 * DAY_S * scale <= j.submit_s < w.start_s + 7 * DAY_S * scale for j in jobs
        )
        assert len(run.jobs) == expected


# --- mixing ---------------------------------------------------------------------------------------------


def _pods() -> PodTable:
    n = 6
    return PodTable(
        names=tuple(f"pod-{i}" for i in range(n)),
        cpu_milli=np.full(n, 1000),
        memory_mib=np.full(n, 1024),
        num_gpu=np.array([0, 1, 1, 1, 2, 8]),
        gpu_milli=np.array([0, 250, 500, 1000, 1000, 1000]),
        gpu_spec=("",) * n,
    )


def _share(mixed: list[Job], w: Window) -> float:
    added = [j for j in mixed if j.name.startswith("openb:")]
    total = offered_gpu_seconds(mixed, w)
    return offered_gpu_seconds(added, w) / total


def test_mixed_workload_toy_share_and_determinism():
    w = Window("toy", 0.0, 20 * DAY_S, 0.0)
    base = [Job(i, i * 3600.0, 7200.0, 8, name=f"gang{i}") for i in range(480)]
    mixed = mixed_workload(base, _pods(), w, share=0.2, seed=7)
    assert mixed == mixed_workload(base, _pods(), w, share=0.2, seed=7)
    assert mixed != mixed_workload(base, _pods(), w, share=0.2, seed=8)
    assert [j for j in mixed if not j.name.startswith("openb:")] == base
    added = [j for j in mixed if j.name.startswith("openb:")]
    assert {j.name for j in added} <= {f"openb:pod-{i}" for i in range(1, 6)}  # never the CPU pod
    assert all(j.gpus == 1 or j.gpu_milli == 1000 for j in added)
    assert sorted(j.job_id for j in mixed) == list(range(len(mixed)))
    assert all(a.submit_s <= b.submit_s for a, b in itertools.pairwise(mixed))
    assert all(w.start_s <= j.submit_s < w.end_s for j in added)
    assert np.mean([j.duration_s for j in added]) == pytest.approx(1800, rel=0.1)
    shares = [_share(mixed_workload(base, _pods(), w, 0.2, seed=s), w) for s in range(5)]
    assert np.mean(shares) == pytest.approx(0.2, abs=0.01)
    assert mixed_workload(base, _pods(), w, share=0.0, seed=1) == base


@needs_mirror
def test_mixed_workload_real_share():
    from gpudefrag.workloads.openb import load_workload

    w = window("itp04-w2")
    two_days = Window(w.trace, w.start_s, w.start_s + 2 * DAY_S, 0.0)
    mixed = mixed_workload(_trace(w.trace), load_workload("default"), two_days, share=0.2, seed=3)
    assert _share(mixed, two_days) == pytest.approx(0.2, abs=0.015)


# --- the suite's fixed windows ---------------------------------------------------------------------


def test_suite_split_is_fixed_and_complete():
    names = [w.name for w in WINDOWS]
    assert len(names) >= 8 and len(set(names)) == len(names)
    sets = (TUNING, REPORT, CONFIRMATION, CONFIRMATION_2, CONFIRMATION_3, CONFIRMATION_4)
    assert len(TUNING) == 5
    for i, a in enumerate(sets):  # the sets never share a window
        for b in sets[i + 1 :]:
            assert not set(a) & set(b)
    every = set().union(*sets)
    plain = {n for n in every if not n.endswith(MIX_SUFFIX)}
    mixed = {n[: -len(MIX_SUFFIX)] for n in every if n.endswith(MIX_SUFFIX)}
    assert not plain & set(UNUSED) and plain | set(UNUSED) == set(names)
    assert mixed == {"itp04-w2", "itp04-w1", "itp04-w4", "itp04-w6", "philly-w8", "itp07-w3"}
    assert "itp04-w2-mix" in TUNING and "itp04-w1-mix" in REPORT and "itp04-w4-mix" in CONFIRMATION
    assert "itp04-w6-mix" in CONFIRMATION_2
    for part in sets:  # cluster04 has no week left for confirmation-3 and -4
        traces = {window(n).trace for n in part}
        assert {"itp_cluster04", "philly"} <= traces or (
            part in (CONFIRMATION_3, CONFIRMATION_4) and "philly" in traces
        )
    assert {w.trace for w in WINDOWS} >= {"itp_cluster04", "philly", "itp_cluster03"}
    for a in WINDOWS:
        for b in WINDOWS:
            if a is not b and a.trace == b.trace:
                assert a.end_s <= b.start_s or b.end_s <= a.start_s
    with pytest.raises(ConfigError, match="itp04-w1"):
        window("itp04-w9")


@needs_mirror
def test_suite_windows_recomputed_from_data():
    computed = suite_windows(loader=_trace)
    assert [dataclasses.replace(w, gpu_hours=0.0) for w in computed] == [
        dataclasses.replace(w, gpu_hours=0.0) for w in WINDOWS
    ]
    assert [w.gpu_hours for w in computed] == pytest.approx([w.gpu_hours for w in WINDOWS], rel=1e-9)


@needs_mirror
def test_window_doc_matches_the_data():
    table = window_table(loader=_trace)
    doc = (REPO / "docs" / "suite2-windows.md").read_text()
    assert table in doc
    run = suite_run("itp04-w1", 1.25, loader=_trace)
    row = re.search(r"^\| itp04-w1 \| report \| itp_cluster04 \| 18 \|[^|]*\| (\d+) \|", table, re.M)
    assert row and int(row.group(1)) == run.nodes
    assert run.measure == (2 * DAY_S, 9 * DAY_S)
