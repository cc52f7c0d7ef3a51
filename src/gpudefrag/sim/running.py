"""Running pods of the time-driven simulator: progress, checkpoints and the move phase.

A running pod is in one of three run phases: RUN (working), GRACE (moved: working on its
source, already bound on its target) and RESTART (evicted from the source, restarting on the
target).  ``placement`` is where it is (the target once a move started); ``source`` is the
place it still holds during the grace period.  Work is measured in the pod's own run time:
``progress`` is the work done at ``resumed_at``.  ``gen`` voids the completion scheduled
before a move.
"""

from __future__ import annotations

from enum import IntEnum

from gpudefrag.model.cluster import Placement
from gpudefrag.model.constants import GPU_MILLI_PER_GPU


class RunPhase(IntEnum):
    RUN = 0
    GRACE = 1
    RESTART = 2


RUN, GRACE, RESTART = (int(p) for p in RunPhase)  # plain ints for the hot paths


class RunRecord:
    __slots__ = (
        "gen",
        "move_id",
        "move_start",
        "phase",
        "placement",
        "progress",
        "resumed_at",
        "source",
        "start_s",
    )

    def __init__(self, placement: Placement, now_s: float) -> None:
        self.placement = placement
        self.source: Placement | None = None
        self.start_s = now_s
        self.progress = 0.0
        self.resumed_at = now_s
        self.phase = RUN
        self.gen = 0
        self.move_id = -1
        self.move_start = 0.0

    def work_done(self, now_s: float) -> float:
        if self.phase == RESTART:
            return self.progress
        return self.progress + (now_s - self.resumed_at)

    @property
    def gpus_held(self) -> float:
        return self.placement.pod.total_gpu_milli / GPU_MILLI_PER_GPU
