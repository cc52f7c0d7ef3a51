"""What a pod counts for in the batch placer's objective besides its GPU milli: an age bonus for
the time it has waited, and the rest of a GPU for a sharing pod that takes nearly all of one."""

from __future__ import annotations

import math

from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.pods import PodSpec

__all__ = ["MAX_AGE_BONUS_MILLI", "age_bonus_milli", "whole_gpu_bonus_milli"]

MAX_AGE_BONUS_MILLI = 100_000
"""Cap of one pod's age bonus (100 GPUs' worth): keeps the CP-SAT objective far inside the
range its double-precision objective value represents exactly."""


def age_bonus_milli(waited_s: float, weight_milli_per_s: float) -> int:
    """A pod's age bonus: ``floor(weight * waited_s)`` milli-GPU, at least 0 and at most
    :data:`MAX_AGE_BONUS_MILLI` (an integer, so the objective stays exact)."""
    return int(min(max(math.floor(weight_milli_per_s * waited_s), 0), MAX_AGE_BONUS_MILLI))


def whole_gpu_bonus_milli(pod: PodSpec, above_milli: int) -> int:
    """What a sharing pod asking more than ``above_milli`` (> 0) milli-GPU lacks of a whole GPU:
    ``1000 - gpu_milli``, so that with it the pod counts as 1,000 milli; 0 for every other pod
    (and for every pod when ``above_milli`` is 0)."""
    if above_milli <= 0 or not pod.is_sharing or pod.gpu_milli <= above_milli:
        return 0
    return GPU_MILLI_PER_GPU - pod.gpu_milli
