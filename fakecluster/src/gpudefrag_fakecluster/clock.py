"""A scaled simulated clock (so a demo replays a day in minutes), and the RFC 3339 helpers.

Every fake component (store, kubelet, workload controller, replayer) takes its time from one
:class:`ScaledClock`: ``now_s()`` is an epoch-like float of *simulated* seconds that advances
``scale`` simulated seconds per wall-clock second.  Timestamps written into objects use
:func:`to_rfc3339` and are read back with :func:`from_rfc3339` (both from
:mod:`gpudefrag.k8s.timefmt`, re-exported here).
"""

from __future__ import annotations

import threading
import time

from gpudefrag.k8s.timefmt import from_rfc3339, to_rfc3339

__all__ = ["ScaledClock", "from_rfc3339", "to_rfc3339"]


class ScaledClock:
    """Simulated seconds that run ``scale`` times faster than the wall clock.

    ``now_s() = start_s + scale × (wall seconds since construction)``; ``start_s`` defaults to the
    current wall time, so timestamps look like real ones.  Thread-safe (it only reads a
    monotonic clock).  Instances are callable (``clock()`` is ``clock.now_s()``) so they can be
    handed to anything that wants a ``Callable[[], float]``.
    """

    def __init__(self, scale: float = 1.0, start_s: float | None = None) -> None:
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)
        self.start_s = time.time() if start_s is None else float(start_s)
        self._wall0 = time.monotonic()

    def now_s(self) -> float:
        """Current simulated time (seconds, epoch-like)."""
        return self.start_s + (time.monotonic() - self._wall0) * self.scale

    def __call__(self) -> float:
        return self.now_s()

    def wall_delay(self, sim_s: float) -> float:
        """Wall-clock seconds that ``sim_s`` simulated seconds take (0 for a negative span)."""
        return max(0.0, sim_s) / self.scale

    def sleep_until(self, t_s: float, stop: threading.Event) -> bool:
        """Block until simulated time ``t_s``; True when reached, False when ``stop`` was set first."""
        while True:
            if stop.is_set():
                return False
            remaining_s = t_s - self.now_s()
            if remaining_s <= 0:
                return True
            if stop.wait(self.wall_delay(remaining_s)):
                return False
