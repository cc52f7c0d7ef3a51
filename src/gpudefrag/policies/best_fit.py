"""BestFit (spec §5.1): prefer the node with the least CPU and GPU left after placement.

``s = (cpu_left - cpu) / 128000 * 0.5 + (tl - req_gpu) / 8000 * 0.5`` in float64, in that order,
where ``tl`` is the node's total GPU milli left; ``raw = int64((1 - s) * 100)``.  The reference
min-max normalises over feasible nodes, which never changes which nodes score highest, so the
raw score decides.  GPU choice: ``best``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.constants import MAX_SPEC_CPU_MILLI, MAX_SPEC_GPU_MILLI

NAME = "bestfit"


@njit_no_nrt
def value(
    n: int,
    cpu_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    pod_cpu: int,
    pod_num: int,
    pod_milli: int,
) -> float:
    """``(1 - s) * 100`` before truncation (module docstring).  In exact arithmetic it is the
    value at ``pod_cpu = 0`` plus ``pod_cpu / 128000 * 50``: linear in the pod's CPU."""
    tl = 0
    for g in range(gpu_count[n]):
        tl += gpu_left[n, g]
    s = 0.0
    s += (cpu_left[n] - pod_cpu) / MAX_SPEC_CPU_MILLI * 0.5
    s += (tl - pod_milli * pod_num) / MAX_SPEC_GPU_MILLI * 0.5
    return (1.0 - s) * 100.0


@njit_no_nrt
def score(
    n: int,
    cpu_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    pod_cpu: int,
    pod_num: int,
    pod_milli: int,
) -> np.int64:
    return np.int64(value(n, cpu_left, gpu_left, gpu_count, pod_cpu, pod_num, pod_milli))
