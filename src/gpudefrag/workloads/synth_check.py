"""Does a fitted workload model look like the real weeks it was not fitted on?

The trace is cut into whole weeks from its first submission.  The model is fitted on the first
``fit_weeks`` of them; every later week is held out.  For each held-out week a synthetic week is
drawn (seed ``seed + k`` for the k-th held-out week) and compared with the real one by the
two-sample Kolmogorov-Smirnov distance of three features: inter-arrival times, job sizes (GPUs)
and durations.  The yardstick is the median KS distance between two real weeks of the trace
(every pair of its whole weeks): a synthetic week passes a feature when its distance to the
real week is no larger than that median.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.stats import ks_2samp

from gpudefrag.errors import ConfigError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.synth import WEEK_S, fit, generate

__all__ = ["FEATURES", "WeekCheck", "check_model", "features", "whole_weeks"]

FEATURES = ("inter-arrival s", "GPUs", "duration s")


def whole_weeks(jobs: list[Job]) -> list[list[Job]]:
    """The trace's whole weeks from its first submission, each with submit times from its start."""
    jobs = sorted(jobs, key=lambda j: j.submit_s)
    origin, last = jobs[0].submit_s, jobs[-1].submit_s
    out = []
    k = 0
    while origin + (k + 1) * WEEK_S <= last:
        lo, hi = origin + k * WEEK_S, origin + (k + 1) * WEEK_S
        week = [j for j in jobs if lo <= j.submit_s < hi]
        out.append(
            [Job(j.job_id, j.submit_s - lo, j.duration_s, j.gpus, j.gpu_milli, j.priority) for j in week]
        )
        k += 1
    return out


def features(jobs: list[Job]) -> dict[str, np.ndarray]:
    submit = np.sort(np.array([j.submit_s for j in jobs]))
    return {
        "inter-arrival s": np.diff(submit),
        "GPUs": np.array([j.gpus for j in jobs], dtype=np.float64),
        "duration s": np.array([j.duration_s for j in jobs]),
    }


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    return float(ks_2samp(a, b).statistic) if a.size and b.size else float("nan")


@dataclass(frozen=True)
class WeekCheck:
    """One held-out week: its KS distance to a synthetic week per feature, and the yardstick."""

    week: int  # 0-based index of the week in the trace
    jobs_real: int
    jobs_synthetic: int
    ks: dict[str, float]
    median_real: dict[str, float]

    def passed(self, feature: str) -> bool:
        return self.ks[feature] <= self.median_real[feature]


def check_model(jobs: list[Job], fit_weeks: int, seed: int) -> list[WeekCheck]:
    """The module docstring's check on ``jobs``."""
    weeks = whole_weeks(jobs)
    if len(weeks) < fit_weeks + 1 or fit_weeks < 1:
        raise ConfigError(
            f"the trace has {len(weeks)} whole weeks: too few to fit on {fit_weeks} and hold one out"
        )
    real = [features(w) for w in weeks]
    median = {f: float(np.median([_ks(a[f], b[f]) for a, b in combinations(real, 2)])) for f in FEATURES}
    origin = min(j.submit_s for j in jobs)
    model = fit([j for j in jobs if j.submit_s < origin + fit_weeks * WEEK_S], "fit weeks")
    out = []
    for k, w in enumerate(weeks[fit_weeks:]):
        synth = generate(model, 7.0, seed + k)
        s = features(synth)
        index = fit_weeks + k
        out.append(
            WeekCheck(index, len(w), len(synth), {f: _ks(s[f], real[index][f]) for f in FEATURES}, median)
        )
    return out
