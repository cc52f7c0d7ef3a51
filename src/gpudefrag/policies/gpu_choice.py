"""Which GPUs of the chosen node a pod takes (Open-Gpu-Share Reserve, spec §3.5).

* Exclusive pods (whole GPUs): the lowest-index GPUs with ``left == 1000``.
* Sharing pods, method ``best``: the GPU with the smallest ``left >= milli``; lowest index on ties.
* CPU-only pods: none.
(FGD's own choice for sharing pods comes from its score; Random's is a uniform fitting GPU.)
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.pods import PodSpec


def exclusive_gpus(gpu_left_row: NDArray[np.int64], gpu_count: int, num_gpu: int) -> tuple[int, ...]:
    """Lowest-index fully free GPUs, ``num_gpu`` of them."""
    free = [g for g in range(gpu_count) if gpu_left_row[g] == GPU_MILLI_PER_GPU]
    if len(free) < num_gpu:
        raise ValueError(f"needs {num_gpu} free GPUs, node has {len(free)}")
    return tuple(free[:num_gpu])


def best_fit_gpu(gpu_left_row: NDArray[np.int64], gpu_count: int, milli: int) -> int:
    """Smallest ``left >= milli``; the lowest index wins a tie (strict ``<`` while scanning)."""
    best = -1
    for g in range(gpu_count):
        left = gpu_left_row[g]
        if left >= milli and (best < 0 or left < gpu_left_row[best]):
            best = g
    if best < 0:
        raise ValueError(f"no GPU has {milli} milli left")
    return best


def choose_gpus_best(gpu_left_row: NDArray[np.int64], gpu_count: int, pod: PodSpec) -> tuple[int, ...]:
    """GPU indices for ``pod`` under the ``best`` selection method."""
    if pod.gpu_milli <= 0:
        return ()
    if pod.is_sharing:
        return (best_fit_gpu(gpu_left_row, gpu_count, pod.gpu_milli),)
    return exclusive_gpus(gpu_left_row, gpu_count, pod.num_gpu)
