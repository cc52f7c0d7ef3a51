"""A running job's progress, checkpoints and restarts in the job-level simulator.

Work advances one second per second from ``work_start_s``; checkpoints are taken every
``checkpoint_interval_s`` of work.  Moving a job evicts it at once: the work since its last
checkpoint is lost, and it restarts on its new nodes, holding them for ``restart_s`` before
work resumes from the checkpoint.  A job that has not started working yet (still restarting)
loses nothing but the restart time already spent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpudefrag.model.jobs import Job

__all__ = ["Running"]


@dataclass(slots=True)
class Running:
    """One running job.  ``token`` invalidates the completion event of an earlier segment."""

    job: Job
    first_start_s: float
    work_start_s: float
    saved_work_s: float = 0.0
    moves: int = 0
    token: int = 0

    @property
    def end_s(self) -> float:
        return self.work_start_s + (self.job.duration_s - self.saved_work_s)

    def progress_s(self, now_s: float) -> float:
        """Work done in the current segment."""
        return max(0.0, now_s - self.work_start_s)

    def last_checkpoint_s(self, now_s: float, interval_s: float) -> float:
        """Simulated time of the last checkpoint (the segment's work start if none yet)."""
        done = self.progress_s(now_s)
        return self.work_start_s + math.floor(done / interval_s) * interval_s

    def lost_work_s(self, now_s: float, interval_s: float) -> float:
        """Work a move at ``now_s`` throws away."""
        return self.progress_s(now_s) - (self.last_checkpoint_s(now_s, interval_s) - self.work_start_s)

    def move(self, now_s: float, interval_s: float, restart_s: float) -> float:
        """Evict and restart at ``now_s``; returns the work lost (seconds)."""
        lost = self.lost_work_s(now_s, interval_s)
        self.saved_work_s += self.progress_s(now_s) - lost
        self.work_start_s = now_s + restart_s
        self.moves += 1
        self.token += 1
        return lost
