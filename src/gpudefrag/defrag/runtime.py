"""Run-time estimates a defragmenter can have without knowing each pod's own run time.

:class:`ResidualLife` answers from a sample of past run times (seconds): a pod that has run
``elapsed_s`` is expected to run ``mean(d - elapsed_s for d in sample if d > elapsed_s)`` more
(its mean residual life), and a pod that has not started ``mean(sample)``.  A pod that has
already outlived every run time in the sample is expected to finish at once (0 s).  Its
further run time is distributed as ``d - elapsed_s`` over the sample's ``d > elapsed_s``: the
``u``-quantile is the ``floor(u * m)``-th smallest of those ``m`` values.

It implements :class:`gpudefrag.model.port.RuntimeEstimator`: a running pod's age counts from
its first start (``RunningPod.start_s``).
"""

from __future__ import annotations

from collections.abc import Sequence

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

    def remaining_all_s(self, pods: Sequence[RunningPod], now_s: float) -> npt.NDArray[np.float64]:
        """:meth:`remaining_s` of every pod of ``pods`` at once (the same numbers)."""
        return self.remaining_after_all_s(np.asarray([now_s - p.start_s for p in pods], dtype=np.float64))

    def expected_s(self, pod: PendingPod) -> float:
        """Expected run time of a pod that has not started (the sample mean)."""
        return self.mean_s()

    def remaining_quantiles_s(
        self, pods: Sequence[RunningPod], now_s: float, levels: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """Quantiles of each running pod's further run time at ``levels[i, k]`` (module docstring)."""
        ages = np.asarray([now_s - p.start_s for p in pods], dtype=np.float64)
        return self.quantiles_after_s(ages, levels)

    def quantiles_after_s(
        self, elapsed_s: npt.NDArray[np.float64], levels: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """``out[i, k]``: the ``levels[i, k]``-quantile of the further run time of a pod that has
        run ``elapsed_s[i]`` (0 where it outlived the whole sample)."""
        d = self._sorted_s
        levels = np.asarray(levels, dtype=np.float64)
        if levels.ndim != 2 or levels.shape[0] != elapsed_s.size:
            raise ValueError(f"levels must have shape ({elapsed_s.size}, K), got {levels.shape}")
        k = np.searchsorted(d, elapsed_s, side="right")
        longer = (d.size - k)[:, None]
        pick = k[:, None] + np.minimum(np.floor(levels * longer).astype(np.int64), longer - 1)
        out = d[np.clip(pick, 0, d.size - 1)] - elapsed_s[:, None]
        out[np.broadcast_to(longer == 0, out.shape)] = 0.0
        return out

    def remaining_after_s(self, elapsed_s: float) -> float:
        """Expected further run time of a pod that has run ``elapsed_s`` seconds."""
        k = int(np.searchsorted(self._sorted_s, elapsed_s, side="right"))
        longer = self._sorted_s.size - k
        if longer == 0:
            return 0.0
        return float(self._tail_sum_s[k] / longer - elapsed_s)

    def remaining_after_all_s(self, elapsed_s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """:meth:`remaining_after_s` of each of ``elapsed_s`` (the same IEEE operations, so the
        same numbers)."""
        k = np.searchsorted(self._sorted_s, elapsed_s, side="right")
        longer = self._sorted_s.size - k
        out: npt.NDArray[np.float64] = self._tail_sum_s[k] / np.maximum(longer, 1) - elapsed_s
        out[longer == 0] = 0.0
        return out

    def mean_s(self) -> float:
        """The sample's mean run time."""
        return float(self._tail_sum_s[0] / self._sorted_s.size)
