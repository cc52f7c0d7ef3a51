"""GpuPacking (spec §5.2): fill partly used GPUs first, then used nodes, then idle nodes.

CPU-only pods score 0 everywhere (the tie-break decides).  For GPU pods, with ``ff`` the number
of fully free GPUs on the node:

* fully idle node (``ff == gpu_count``): ``max(33 - ff, ff)``;
* otherwise take the first ``num_gpu`` GPUs with ``left >= milli`` in ascending-``left`` order;
  if ``ffu`` of them are fully free and ``ffu > 0``: ``max(50 - ffu, 33)``;
  else ``max(100 - (sum(left * 100 // 1000)) // 10, 50)``.
GPU choice: ``best``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt

NAME = "gpupacking"


@njit_no_nrt
def score(
    n: int, gpu_left: NDArray[np.int64], gpu_count: NDArray[np.int64], pod_num: int, pod_milli: int
) -> int:
    if pod_milli <= 0:
        return 0
    count = gpu_count[n]
    ff = 0
    for g in range(count):
        if gpu_left[n, g] == 1000:
            ff += 1
    if ff == count:
        return max(33 - ff, ff)
    taken = 0
    ffu = 0
    pct_sum = 0
    used = 0  # bitmask of picked GPU indices
    while taken < pod_num:
        pick = -1
        for g in range(count):
            if (used >> g) & 1 == 0 and gpu_left[n, g] >= pod_milli:  # noqa: SIM102
                if pick < 0 or gpu_left[n, g] < gpu_left[n, pick]:
                    pick = g
        if pick < 0:
            break
        used |= 1 << pick
        taken += 1
        if gpu_left[n, pick] == 1000:
            ffu += 1
        pct_sum += gpu_left[n, pick] * 100 // 1000
    if ffu > 0:
        return max(50 - ffu, 33)
    return max(100 - pct_sum // 10, 50)
