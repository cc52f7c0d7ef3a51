"""Measurement windows of the job traces for suite 2, cluster sizing, load scaling, mixing.

Times are seconds on the trace's own axis (ITP: from the start of collection; Philly: from the
first submission), days are 86,400 s.

* :func:`busiest_windows` ranks windows of ``window_s`` (default 7 days) whose start lies on a
  1-day grid (multiples of 86,400 s) by the GPU-hours *submitted* in them (sum of
  ``gpu_share * duration_s`` of the jobs with ``start <= submit_s < end``), and greedily keeps
  the busiest ones that do not overlap an already kept one. A window must leave ``warmup_s``
  after the first submission and end by the last one (both stretched by ``max_scale``, and
  ``cooldown_s`` kept free before the last submission, when asked).
* :func:`size_cluster` is the sizing rule: the node count at which the mean offered load over
  the window is 1.0. Offered GPU-seconds are counted as if every job started at its submission:
  each job's ``[submit, submit + duration)`` is clipped to the window and weighted by its
  ``gpu_share``. Nodes = offered / (window length x GPUs per node), rounded half up, but at least
  the largest job's node count (``ceil(gpus / gpus_per_node)`` over the jobs given) and at least 1.
  The suite applies it to the jobs of a window's run at scale 1.0 (:func:`run_nodes`), i.e. to
  what the simulator is offered, and keeps that node count for the runs at higher loads.
* :func:`scaled_jobs` builds the input of a run at load ``scale`` (1.0, 1.25, 1.5): the jobs
  submitted in ``[start - warmup_s * scale, start + length * scale)`` with submit time ``t`` moved
  to ``start + (t - start) / scale`` (every inter-arrival gap divided by ``scale``; durations and
  sizes unchanged), then shifted so that the run starts at 0 = ``start - warmup_s``. Metrics are
  measured over ``[warmup_s, warmup_s + length)``.
* :func:`mixed_workload` adds openb-like pods (sharing fractions of one GPU, or whole GPUs) as a
  Poisson stream carrying a given share of the GPU-seconds.

Suite 2's own windows, their sets and runs: :mod:`gpudefrag.workloads.suite_windows`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gpudefrag.errors import ConfigError
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.workloads.openb import PodTable

__all__ = [
    "DAY_S",
    "MIX_MEAN_DURATION_S",
    "ScaledJobs",
    "Window",
    "busiest_windows",
    "mixed_workload",
    "offered_gpu_seconds",
    "scaled_jobs",
    "size_cluster",
]

DAY_S = 86_400.0
MIX_MEAN_DURATION_S = 1_800.0  # mean run time of the added openb-like pods (exponential)


@dataclass(frozen=True)
class Window:
    """A measurement window ``[start_s, end_s)`` of ``trace`` (a registered dataset name such as
    ``itp_cluster04`` or ``philly``) with the GPU-hours submitted in it; ``name`` is the suite
    name (``itp04-w1``) or empty."""

    trace: str
    start_s: float
    end_s: float
    gpu_hours: float
    name: str = ""

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def start_day(self) -> float:
        return self.start_s / DAY_S


def _arrays(jobs: Sequence[Job]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    submit = np.fromiter((j.submit_s for j in jobs), dtype=np.float64, count=len(jobs))
    duration = np.fromiter((j.duration_s for j in jobs), dtype=np.float64, count=len(jobs))
    share = np.fromiter((j.gpu_share for j in jobs), dtype=np.float64, count=len(jobs))
    return submit, duration, share


def busiest_windows(
    jobs: Sequence[Job],
    window_s: float = 7 * DAY_S,
    warmup_s: float = 2 * DAY_S,
    count: int = 1,
    *,
    trace: str = "",
    max_scale: float = 1.0,
    cooldown_s: float = 0.0,
) -> list[Window]:
    """The ``count`` busiest non-overlapping windows, busiest first (fewer if no more fit).

    Candidate starts are the multiples of one day with ``start >= first_submit + warmup_s *
    max_scale`` and ``start + window_s * max_scale + cooldown_s <= last_submit``; with the defaults
    (``max_scale=1``, ``cooldown_s=0``) that is ``start >= first + warmup_s`` and
    ``end <= last``. ``max_scale`` > 1 keeps room for :func:`scaled_jobs` up to that load.
    A candidate's score is the GPU-hours submitted in ``[start, start + window_s)``; candidates
    are taken in order of decreasing score (earlier start first on ties) and kept when they do
    not overlap a kept window.
    """
    if not jobs:
        raise ConfigError("busiest_windows: no jobs")
    if window_s <= 0 or warmup_s < 0 or count < 1 or max_scale < 1.0 or cooldown_s < 0:
        raise ConfigError("busiest_windows: need window_s > 0, warmup_s >= 0, count >= 1, max_scale >= 1")
    submit, duration, share = _arrays(jobs)
    order = np.argsort(submit, kind="stable")
    submit = submit[order]
    cum = np.concatenate(([0.0], np.cumsum((share * duration)[order])))
    first, last = float(submit[0]), float(submit[-1])
    k0 = math.ceil((first + warmup_s * max_scale) / DAY_S)
    k1 = math.floor((last - window_s * max_scale - cooldown_s) / DAY_S)
    if k1 < k0:
        return []
    starts = np.arange(k0, k1 + 1, dtype=np.float64) * DAY_S
    lo = np.searchsorted(submit, starts, side="left")
    hi = np.searchsorted(submit, starts + window_s, side="left")
    hours = (cum[hi] - cum[lo]) / 3600.0
    picked: list[Window] = []
    for i in sorted(range(len(starts)), key=lambda i: (-hours[i], starts[i])):
        s = float(starts[i])
        if all(s + window_s <= w.start_s or w.end_s <= s for w in picked):
            picked.append(Window(trace, s, s + window_s, float(hours[i])))
            if len(picked) == count:
                break
    return picked


def offered_gpu_seconds(jobs: Sequence[Job], window: Window) -> float:
    """GPU-seconds the jobs would run inside the window if each started at its submission:
    sum of ``gpu_share * |[submit, submit + duration) ∩ [start, end)|``."""
    if not jobs:
        return 0.0
    submit, duration, share = _arrays(jobs)
    overlap = np.minimum(submit + duration, window.end_s) - np.maximum(submit, window.start_s)
    return float(np.sum(share * np.clip(overlap, 0.0, None)))


def size_cluster(jobs: Sequence[Job], window: Window, gpus_per_node: int) -> int:
    """Nodes for a mean offered load of 1.0 over the window (the rule in the module docstring):
    ``round_half_up(offered_gpu_seconds / (length * gpus_per_node))``, at least the largest job
    of ``jobs`` in nodes and at least 1. Pass the jobs you will simulate."""
    if gpus_per_node < 1 or window.length_s <= 0:
        raise ConfigError("size_cluster: need gpus_per_node >= 1 and a window of positive length")
    nodes = math.floor(offered_gpu_seconds(jobs, window) / (window.length_s * gpus_per_node) + 0.5)
    largest = max((math.ceil(j.gpus / gpus_per_node) for j in jobs), default=1)
    return max(nodes, largest, 1)


class ScaledJobs(NamedTuple):
    """Jobs of one run (times from the run's start) and its measurement interval."""

    jobs: list[Job]
    measure: tuple[float, float]


def scaled_jobs(jobs: Sequence[Job], window: Window, scale: float, warmup_s: float = 2 * DAY_S) -> ScaledJobs:
    """The jobs of a run of ``window`` at load ``scale`` (see the module docstring).

    Keeps each job's ``job_id``, size, duration and name; only ``submit_s`` changes, to
    ``warmup_s + (t - start) / scale``. Returns the jobs sorted by the new submit time (the order
    of the original submissions) and ``measure = (warmup_s, warmup_s + window length)``.
    """
    if not scale > 0 or warmup_s < 0:
        raise ConfigError(f"scaled_jobs: need scale > 0 and warmup_s >= 0 (got {scale}, {warmup_s})")
    start, length = window.start_s, window.length_s
    lo, hi = start - warmup_s * scale, start + length * scale
    out = [
        Job(
            j.job_id,
            warmup_s + (j.submit_s - start) / scale,
            j.duration_s,
            j.gpus,
            j.gpu_milli,
            j.priority,
            j.constraint,
            j.name,
        )
        for j in sorted(jobs, key=lambda j: j.submit_s)
        if lo <= j.submit_s < hi
    ]
    return ScaledJobs(out, (warmup_s, warmup_s + length))


def mixed_workload(
    itp_jobs: Sequence[Job],
    openb_pods: PodTable,
    window: Window,
    share: float = 0.2,
    *,
    seed: int,
    mean_duration_s: float = MIX_MEAN_DURATION_S,
) -> list[Job]:
    """``itp_jobs`` plus openb-like pods carrying about ``share`` of the window's GPU-seconds.

    The pods are drawn (uniformly, with replacement) from the rows of ``openb_pods`` with
    ``num_gpu >= 1``, each keeping its ``num_gpu`` and ``gpu_milli`` (so most ask for a share of
    one GPU; a multi-GPU pod takes whole GPUs). They arrive as a Poisson process over
    ``[start, end)`` (a Poisson count, then uniform times) and run for an exponential time of mean
    ``mean_duration_s`` (at least 1 s). The rate is set so that the pods' expected GPU-seconds
    inside the window (clipped at its end, as in :func:`offered_gpu_seconds`) are
    ``share / (1 - share)`` of the jobs' offered GPU-seconds in the window, i.e. ``share`` of
    the total. Random numbers come from
    ``np.random.default_rng(seed)`` only, so the result is a function of the arguments.

    The pods get ``job_id`` s after the largest one of ``itp_jobs`` and names
    ``openb:<pod name>``; the result is sorted by submit time (jobs before pods on ties).
    To mix into a scaled run, pass the scaled jobs and a window covering the whole run,
    e.g. ``Window(trace, 0, measure_end, 0)``.
    """
    if not 0 <= share < 1 or mean_duration_s <= 0:
        raise ConfigError(f"mixed_workload: need 0 <= share < 1 and mean_duration_s > 0 (got {share})")
    usable = np.flatnonzero(openb_pods.num_gpu >= 1)
    if usable.size == 0:
        raise ConfigError("mixed_workload: the pod list has no pod with num_gpu >= 1")
    num_gpu = openb_pods.num_gpu[usable]
    milli = np.where(
        num_gpu == 1, np.clip(openb_pods.gpu_milli[usable], 1, GPU_MILLI_PER_GPU), GPU_MILLI_PER_GPU
    )
    mean_gpus = float(np.mean(num_gpu * milli)) / GPU_MILLI_PER_GPU
    target = share / (1.0 - share) * offered_gpu_seconds(itp_jobs, window)
    # A pod arriving at a uniform time in the window runs inside it for E[min(D, end - t)]
    # = mean * (1 - (mean / L) * (1 - exp(-L / mean))) on average (D exponential).
    length = window.length_s
    inside = mean_duration_s * (1.0 - mean_duration_s / length * (1.0 - math.exp(-length / mean_duration_s)))
    rate = target / (length * mean_gpus * inside)  # arrivals per second
    rng = np.random.default_rng(seed)
    count = int(rng.poisson(rate * length))
    arrivals = np.sort(rng.uniform(window.start_s, window.end_s, size=count))
    picks = rng.integers(0, usable.size, size=count)
    durations = np.maximum(rng.exponential(mean_duration_s, size=count), 1.0)
    next_id = max((j.job_id for j in itp_jobs), default=-1) + 1
    pods = [
        Job(
            next_id + i,
            float(arrivals[i]),
            float(durations[i]),
            int(num_gpu[k]),
            int(milli[k]),
            name=f"openb:{openb_pods.names[int(usable[k])]}",
        )
        for i, k in enumerate(picks)
    ]
    return sorted([*itp_jobs, *pods], key=lambda j: j.submit_s)
