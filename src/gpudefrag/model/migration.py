"""The migration model, defined once: what moving a running pod costs in time.

A move binds the pod on its target at once; the pod keeps running on its source for
``eviction_grace_s`` (holding both places), is then evicted, and resumes on the target
``restart_s`` later.  At eviction its progress falls back to its last checkpoint.

Checkpoints fall at work marks ``phase_s + k * interval_s`` (k = 0, 1, ...), measured in the
pod's own run time; a pod with ``interval_s <= 0`` never checkpoints, and before its first mark
a pod has nothing to resume from (it restarts from zero).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Interval


@dataclass(frozen=True)
class MigrationModel:
    """Times of one move, in seconds (module docstring)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # unknown keys in a file: an error

    eviction_grace_s: Annotated[float, Interval(ge=0, le=86_400)] = 30.0
    restart_s: Annotated[float, Interval(ge=0, le=86_400)] = 60.0

    def __post_init__(self) -> None:
        if not (self.eviction_grace_s >= 0 and self.restart_s >= 0):
            raise ValueError(
                f"eviction_grace_s and restart_s must be >= 0, got {self.eviction_grace_s}, {self.restart_s}"
            )


def last_checkpoint_work_s(work_s: float, interval_s: float, phase_s: float) -> float:
    """The last checkpoint mark (``phase_s + k * interval_s``) at or before ``work_s``; 0 if none."""
    if work_s < phase_s or interval_s <= 0:
        return 0.0
    return phase_s + math.floor((work_s - phase_s) / interval_s) * interval_s


def disruption_cost_gpu_s(gpus: float, lost_work_s: float, restart_s: float) -> float:
    """What stopping a running unit (a pod or a whole gang) costs, whether it is moved or killed:
    the work it loses since its last checkpoint (never below 0) plus its restart time, for every
    GPU it holds (a share for a shared GPU): ``gpus * (max(lost_work_s, 0) + restart_s)``
    GPU-seconds.  The one price of a move and of a preemption victim, in every simulator and in
    the Kubernetes controller."""
    return gpus * (max(lost_work_s, 0.0) + restart_s)
