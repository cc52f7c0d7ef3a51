"""Seed statistics: mean with a 95 % confidence interval, and paired differences.

Intervals use Student's t with n - 1 degrees of freedom (seeds are the unit of replication).
"""

from __future__ import annotations

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
