"""Run-time estimates a defragmenter can have without knowing each pod's own run time.

:class:`ResidualLife` answers from a sample of past run times (seconds): a pod that has run
``elapsed_s`` is expected to run ``mean(d - elapsed_s for d in sample if d > elapsed_s)`` more
(its mean residual life), and a pod that has not started ``mean(sample)``.  A pod that has
already outlived every run time in the sample is expected to finish at once (0 s).

It implements :class:`gpudefrag.model.port.RuntimeEstimator`: a running pod's age counts from
its first start (``RunningPod.start_s``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.model.port import PendingPod, RunningPod


class ResidualLife:
    """Mean residual run time from a sample of run times (module docstring)."""

    def __init__(self, durations_s: npt.ArrayLike) -> None:
        d = np.sort(np.asarray(durations_s, dtype=np.float64).ravel())
        if d.size == 0:
            raise ValueError("ResidualLife needs at least one run time")
        if not np.all(np.isfinite(d)) or d[0] < 0:
            raise ValueError("run times must be finite and non-negative")
        self._sorted_s = d
        # _tail_sum_s[k] = sum of d[k:] (0 past the end)
        self._tail_sum_s = np.concatenate([np.cumsum(d[::-1])[::-1], [0.0]])

    def remaining_s(self, pod: RunningPod, now_s: float) -> float:
        """Expected further run time of a running pod (its mean residual life at its age)."""
        return self.remaining_after_s(now_s - pod.start_s)

    def expected_s(self, pod: PendingPod) -> float:
        """Expected run time of a pod that has not started (the sample mean)."""
        return self.mean_s()

    def remaining_after_s(self, elapsed_s: float) -> float:
        """Expected further run time of a pod that has run ``elapsed_s`` seconds."""
        k = int(np.searchsorted(self._sorted_s, elapsed_s, side="right"))
        longer = self._sorted_s.size - k
        if longer == 0:
            return 0.0
        return float(self._tail_sum_s[k] / longer - elapsed_s)

    def mean_s(self) -> float:
        """The sample's mean run time."""
        return float(self._tail_sum_s[0] / self._sorted_s.size)
