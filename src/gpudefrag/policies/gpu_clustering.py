"""GpuClustering (spec §5.3): put GPU pods with the same shape tag together.

Tags: ``share-gpu`` for a fractional single GPU, ``k-gpu`` for k whole GPUs; CPU-only pods have
none and score 0 everywhere.  ``base = 25 * (8000 - tl) // 8000`` (``tl`` = GPU milli left), then
``+75`` if the pod's tag is the node's only tag, ``+50`` if it is among others, ``+25`` if the
node has no GPU pods, ``+0`` if the node has only other tags.  GPU choice: ``best``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.constants import MAX_SPEC_GPU_MILLI

NAME = "gpuclustering"


@njit_no_nrt
def score(
    n: int,
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    affinity: NDArray[np.int64],
    pod_milli: int,
    pod_tag: int,
) -> int:
    if pod_milli <= 0:
        return 0
    tl = 0
    for g in range(gpu_count[n]):
        tl += gpu_left[n, g]
    base = 25 * (MAX_SPEC_GPU_MILLI - tl) // MAX_SPEC_GPU_MILLI
    own = affinity[n, pod_tag] > 0
    others = False
    for t in range(affinity.shape[1]):
        if t != pod_tag and affinity[n, t] > 0:
            others = True
            break
    if own and not others:
        return base + 75
    if own:
        return base + 50
    if not others:
        return base + 25
    return base
