"""A workload model fitted to a job trace, and fresh traces drawn from it (``gpudefrag synth``).

The model (:func:`fit`), every part read from the trace's jobs:

* **Arrivals in batches.**  Jobs submitted within :data:`BATCH_GAP_S` of the one before form a
  batch (a sweep, an array job); batches arrive as a Poisson process whose rate follows the hour
  of the week (168 rates, each the batches of that hour over the weeks the trace covers it;
  week phase counted from the trace's first submission), times a **day factor** per day drawn
  from the trace's own days (each day's batches over what the hour profile expects for it: its
  busy and quiet days, its bursts).  Submit times keep the trace's resolution (whole seconds
  when every submission in it is).  The trace must span a week at least (every hour of the
  week seen once).
* **Job shape.**  A batch is one of the trace's batches, drawn whole: its size (how many jobs)
  and its jobs' shape, (GPUs, milli-GPU per GPU), come together (a sweep of 500 one-GPU jobs
  stays one), while the gaps between its jobs are drawn from the trace's gaps inside batches;
  ``bigger_jobs`` F multiplies the weight of every batch of 8-GPU jobs or more by F (then
  renormalised).
* **Durations by size.**  Each job's duration is one of the trace's durations of its size class
  (1, 2-4, 5-8, 9-32, 33+ GPUs; the nearest class with jobs when its own has none), times a
  lognormal jitter of sigma :data:`DURATION_JITTER` (so no two draws repeat exactly).
* **Priorities** are drawn from the trace's priorities of the same size class.

:func:`generate` draws ``days`` of jobs with an explicit seeded generator (the same seed gives
the same trace); ``growth`` G multiplies the arrival rate.  What it cannot reproduce: users
(who submits what, and their habits over weeks), correlation between consecutive batches
beyond the day factor, durations longer than any in the trace, topology constraints, and jobs
that depend on other jobs.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_right
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

__all__ = ["SIZE_CLASSES", "WorkloadModel", "fit", "generate", "load_model", "save_model", "size_class"]

BATCH_GAP_S = 1.0
DURATION_JITTER = 0.05
HOURS_PER_WEEK = 168
WEEK_S = 7 * 86_400.0
SIZE_CLASSES = (1, 4, 8, 32)
"""Upper bounds of the size classes: 1, 2-4, 5-8, 9-32, then 33+ GPUs."""


def size_class(gpus: int) -> int:
    """0 for 1 GPU, 1 for 2-4, 2 for 5-8, 3 for 9-32, 4 for 33+."""
    return bisect_right(SIZE_CLASSES, gpus - 1)


@dataclass(frozen=True)
class WorkloadModel:
    """The fitted parts (module docstring); lists so that it writes as JSON."""

    source: str
    hourly_batches: list[float]  # mean batches per hour, by hour of the week
    day_factors: list[float]  # each day's batches over the hour profile's expectation, drawn from
    batch_sizes: list[int]  # each batch's size (jobs), drawn with its shape (same index)
    batch_gaps: list[float]  # the gaps between consecutive jobs inside its batches, drawn from
    resolution_s: float  # 1.0 when every submission is a whole second, else 0 (none)
    shapes: list[tuple[int, int]]  # (gpus, gpu_milli) of each batch's jobs (its leader's)
    durations_by_class: list[list[float]]  # by size class
    priorities_by_class: list[list[int]]  # by size class


def _batches(jobs: list[Job]) -> list[list[Job]]:
    out: list[list[Job]] = []
    last = -math.inf
    for j in jobs:
        if out and j.submit_s - last <= BATCH_GAP_S:
            out[-1].append(j)
        else:
            out.append([j])
        last = j.submit_s
    return out


def fit(jobs: list[Job], source: str = "") -> WorkloadModel:
    """The model of ``jobs`` (module docstring)."""
    if len(jobs) < 10:
        raise ConfigError(f"{source or 'the trace'}: {len(jobs)} jobs are too few to fit a workload model")
    jobs = sorted(jobs, key=lambda j: j.submit_s)
    origin = jobs[0].submit_s
    span_s = jobs[-1].submit_s - origin
    if span_s < WEEK_S:
        raise ConfigError(
            f"{source or 'the trace'}: submissions span {span_s / 86_400:.1f} days; a model needs a week "
            "(each hour of the week seen at least once)"
        )
    batches = _batches(jobs)
    starts = np.array([b[0].submit_s - origin for b in batches])
    hours = (starts // 3600).astype(np.int64)
    per_hour = np.bincount(hours % HOURS_PER_WEEK, minlength=HOURS_PER_WEEK).astype(np.float64)
    covered = np.maximum(
        1, np.bincount(np.arange(int(span_s // 3600) + 1) % HOURS_PER_WEEK, minlength=HOURS_PER_WEEK)
    )
    hourly = per_hour / covered
    days = (starts // 86_400).astype(np.int64)
    counts = np.bincount(days).astype(np.float64)
    expected = np.array([hourly[(d * 24 + np.arange(24)) % HOURS_PER_WEEK].sum() for d in range(counts.size)])
    day_factors = [float(c / e) for c, e in zip(counts, expected) if e > 0]
    durations: list[list[float]] = [[] for _ in range(len(SIZE_CLASSES) + 1)]
    priorities: list[list[int]] = [[] for _ in range(len(SIZE_CLASSES) + 1)]
    for j in jobs:
        durations[size_class(j.gpus)].append(j.duration_s)
        priorities[size_class(j.gpus)].append(j.priority)
    gaps = [b[i + 1].submit_s - b[i].submit_s for b in batches for i in range(len(b) - 1)]
    whole = all(float(j.submit_s).is_integer() for j in jobs)
    return WorkloadModel(
        source,
        [float(x) for x in hourly],
        day_factors or [1.0],
        [len(b) for b in batches],
        gaps or [0.0],
        1.0 if whole else 0.0,
        [(b[0].gpus, b[0].gpu_milli) for b in batches],
        durations,
        priorities,
    )


def _nearest(lists: list[list], k: int) -> list:
    """``lists[k]``, or the nearest non-empty class to it."""
    for d in range(len(lists)):
        for c in (k - d, k + d):
            if 0 <= c < len(lists) and lists[c]:
                return lists[c]
    raise ConfigError("the model has no durations")


def generate(
    model: WorkloadModel, days: float, seed: int, growth: float = 1.0, bigger_jobs: float = 1.0
) -> list[Job]:
    """``days`` of jobs drawn from ``model`` (module docstring), submit times from 0, numbered in
    submission order."""
    if not (days > 0 and growth > 0 and bigger_jobs > 0):
        raise ConfigError("synth: days, growth and bigger_jobs must be > 0")
    rng = np.random.default_rng(seed)
    shapes = np.array(model.shapes, dtype=np.int64)
    weight = np.where(shapes[:, 0] >= 8, bigger_jobs, 1.0)
    cum_weight = np.cumsum(weight / weight.sum())
    sizes = np.array(model.batch_sizes, dtype=np.int64)
    gaps = np.array(model.batch_gaps, dtype=np.float64)
    factors = np.array(model.day_factors, dtype=np.float64)
    hourly = np.array(model.hourly_batches) * growth
    out: list[Job] = []
    n_hours = math.ceil(days * 24)
    day_factor = 1.0
    for h in range(n_hours):
        if h % 24 == 0:
            day_factor = float(factors[rng.integers(factors.size)])
        n = int(rng.poisson(hourly[h % HOURS_PER_WEEK] * day_factor))
        for t in np.sort(rng.uniform(h * 3600.0, (h + 1) * 3600.0, n)):
            if t >= days * 86_400.0:
                continue
            pick = min(int(np.searchsorted(cum_weight, rng.random(), side="right")), len(shapes) - 1)
            gpus, milli, k = int(shapes[pick, 0]), int(shapes[pick, 1]), int(sizes[pick])
            cls = size_class(gpus)
            pool_d = _nearest(model.durations_by_class, cls)
            pool_p = _nearest(model.priorities_by_class, cls)
            at = float(t)
            for i in range(k):
                if i:
                    at += float(gaps[rng.integers(gaps.size)])
                if at >= days * 86_400.0:
                    break
                d = float(pool_d[rng.integers(len(pool_d))]) * float(rng.lognormal(0.0, DURATION_JITTER))
                when = float(math.floor(at)) if model.resolution_s == 1.0 else round(at, 3)
                prio = int(pool_p[rng.integers(len(pool_p))])
                out.append(Job(0, when, max(1.0, round(d, 1)), gpus, milli, prio))
    out.sort(key=lambda j: j.submit_s)
    return [Job(i, j.submit_s, j.duration_s, j.gpus, j.gpu_milli, j.priority) for i, j in enumerate(out)]


def save_model(model: WorkloadModel, path: Path) -> Path:
    """The model as JSON, written atomically (``gpudefrag synth --like MODEL.json`` reads it)."""
    import os
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise InputError(path, f"cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(model)) + "\n")
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(path, f"cannot write: {e.strerror or e}") from None
    return path


def load_model(path: Path) -> WorkloadModel:
    """A model written by :func:`save_model`; a bad file is an :class:`InputError` naming the field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(path, f"not a workload model: {e}") from None
    if not isinstance(data, dict):
        raise InputError(path, "not a workload model (a JSON object)")
    fields = WorkloadModel.__dataclass_fields__
    for name in fields:
        if name not in data:
            raise InputError(path, "not a workload model: missing", column=name)

    def numbers(name: str, kind: type = float, low: float = 0.0) -> list:
        value = data[name]
        ok = (
            isinstance(value, list)
            and value
            and all(
                isinstance(x, int | float)
                and not isinstance(x, bool)
                and x >= low
                and (kind is float or x == int(x))
                for x in value
            )
        )
        if not ok:
            raise InputError(path, f"not a list of {kind.__name__}s >= {low:g}", column=name)
        return [kind(x) for x in value]

    hourly = numbers("hourly_batches")
    if len(hourly) != HOURS_PER_WEEK:
        raise InputError(path, f"{len(hourly)} rates, not {HOURS_PER_WEEK}", column="hourly_batches")
    shapes = data["shapes"]
    if not (
        isinstance(shapes, list)
        and shapes
        and all(
            isinstance(s, list)
            and len(s) == 2
            and all(isinstance(x, int) for x in s)
            and s[0] >= 1
            and 1 <= s[1] <= GPU_MILLI_PER_GPU
            for s in shapes
        )
    ):
        raise InputError(path, "not a list of [gpus >= 1, gpu_milli 1..1000]", column="shapes")
    sizes = numbers("batch_sizes", int, 1)
    if len(sizes) != len(shapes):
        raise InputError(path, "one batch size per shape", column="batch_sizes")
    by_class = []
    for name in ("durations_by_class", "priorities_by_class"):
        value = data[name]
        if not (isinstance(value, list) and len(value) == len(SIZE_CLASSES) + 1 and any(value)):
            raise InputError(path, f"not {len(SIZE_CLASSES) + 1} lists", column=name)
        by_class.append(value)
    return WorkloadModel(
        str(data["source"]),
        hourly,
        numbers("day_factors"),
        sizes,
        numbers("batch_gaps"),
        float(data["resolution_s"]),
        [(int(g), int(m)) for g, m in shapes],
        [[float(x) for x in c] for c in by_class[0]],
        [[int(x) for x in c] for c in by_class[1]],
    )
