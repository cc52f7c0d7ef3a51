"""Seed statistics: mean with a 95 % confidence interval, and paired differences.

Intervals use Student's t with n - 1 degrees of freedom (seeds are the unit of replication).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


@dataclass(frozen=True)
class Interval:
    mean: float
    half_width: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def fmt(self, digits: int = 2) -> str:
        return f"{self.mean:.{digits}f} ± {self.half_width:.{digits}f}"


def mean_ci(values: np.ndarray | list[float], level: float = 0.95) -> Interval:
    """Mean ± t-based half width (0 for n < 2)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return Interval(float(x.mean()) if n else float("nan"), 0.0, n)
    sem = x.std(ddof=1) / np.sqrt(n)
    return Interval(float(x.mean()), float(sps.t.ppf(0.5 + level / 2, n - 1) * sem), n)


@dataclass(frozen=True)
class Paired:
    """``treatment - control`` per seed: interval, seeds won (strictly better), seeds lost."""

    diff: Interval
    wins: int
    losses: int


def paired(treatment: np.ndarray | list[float], control: np.ndarray | list[float]) -> Paired:
    a, b = np.asarray(treatment, dtype=np.float64), np.asarray(control, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("paired samples must have the same shape")
    d = a - b
    return Paired(mean_ci(d), int((d > 1e-9).sum()), int((d < -1e-9).sum()))


def _pass_threshold(
    sd: float, n: int, min_mean: float, min_ci_low: float, level: float
) -> tuple[float, float]:
    """(the sample mean a check of :func:`check_pass_probability` needs, the standard error)."""
    if n < 2 or not sd > 0:
        raise ValueError(f"needs n >= 2 and sd > 0, got n={n}, sd={sd}")
    se = sd / math.sqrt(n)
    return max(min_mean, min_ci_low + float(sps.t.ppf(0.5 + level / 2, n - 1)) * se), se


def check_pass_probability(
    true_mean: float, sd: float, n: int, min_mean: float, min_ci_low: float, level: float = 0.95
) -> float:
    """Chance that ``n`` paired differences with mean ``true_mean`` and per-seed standard
    deviation ``sd`` meet a check asking their sample mean >= ``min_mean`` and the lower end of
    its ``level`` t interval >= ``min_ci_low``.

    The rule: the check is met when the sample mean reaches ``max(min_mean, min_ci_low +
    t * sd / sqrt(n))``, with the sample's deviation taken as ``sd`` and the sample mean normal
    with standard error ``sd / sqrt(n)`` (a design figure, not a test)."""
    threshold, se = _pass_threshold(sd, n, min_mean, min_ci_low, level)
    return float(sps.norm.sf((threshold - true_mean) / se))


def mean_to_pass(
    sd: float, n: int, min_mean: float, min_ci_low: float, probability: float = 0.8, level: float = 0.95
) -> float:
    """The true mean difference that meets the check of :func:`check_pass_probability` with
    ``probability`` on ``n`` seeds of per-seed deviation ``sd``."""
    threshold, se = _pass_threshold(sd, n, min_mean, min_ci_low, level)
    return threshold + float(sps.norm.ppf(probability)) * se
