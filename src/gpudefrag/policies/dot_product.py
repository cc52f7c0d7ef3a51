"""DotProd (spec §5.4, dimExt ``merge``, norm ``max``).

Node vector ``[cpu_left / 128000, tl / 8000]``, pod vector ``[cpu / 128000, req_gpu / 8000]``;
``d = 0 + n0 * p0 + n1 * p1``; score ``int64(100 * (1 - d / 2))``.  A larger dot product gives a
lower score, so it prefers nodes with less free capacity.  GPU choice: ``best``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.constants import MAX_SPEC_CPU_MILLI, MAX_SPEC_GPU_MILLI

NAME = "dotprod"


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
    tl = 0
    for g in range(gpu_count[n]):
        tl += gpu_left[n, g]
    n0 = cpu_left[n] / MAX_SPEC_CPU_MILLI
    n1 = tl / MAX_SPEC_GPU_MILLI
    p0 = pod_cpu / MAX_SPEC_CPU_MILLI
    p1 = (pod_milli * pod_num) / MAX_SPEC_GPU_MILLI
    d = 0.0 + n0 * p0 + n1 * p1
    return np.int64(100.0 * (1.0 - d / 2.0))
