"""BestFit (spec §5.1): prefer the node with the least CPU and GPU left after placement.

``s = (cpu_left - cpu) / 128000 * 0.5 + (tl - req_gpu) / 8000 * 0.5`` in float64, in that order,
where ``tl`` is the node's total GPU milli left; ``raw = int64((1 - s) * 100)``.  The reference
min-max normalises over feasible nodes, which never changes which nodes score highest, so the
raw score decides.  GPU choice: ``best``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpudefrag.model.constants import MAX_SPEC_CPU_MILLI, MAX_SPEC_GPU_MILLI

NAME = "bestfit"


@njit(cache=True, _nrt=False)
def score(n, cpu_left, gpu_left, gpu_count, pod_cpu, pod_num, pod_milli):
    tl = 0
    for g in range(gpu_count[n]):
        tl += gpu_left[n, g]
    s = 0.0
    s += (cpu_left[n] - pod_cpu) / MAX_SPEC_CPU_MILLI * 0.5
    s += (tl - pod_milli * pod_num) / MAX_SPEC_GPU_MILLI * 0.5
    return np.int64((1.0 - s) * 100.0)
