"""The feasibility filter every policy shares (spec §3.2), as a compiled kernel.

A node is feasible for a pod iff CPU, memory and the pod-count limit fit and, for GPU pods
(``gpu_milli > 0``): the node has GPUs, its model is accepted, and at least ``num_gpu`` GPUs
have ``left >= gpu_milli`` (multi-GPU pods ask whole GPUs, so these are fully free GPUs).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpudefrag.model.constants import MAX_PODS_PER_NODE


@njit(cache=True, _nrt=False)
def node_feasible(
    n,
    cpu_left,
    mem_left,
    gpu_left,
    gpu_count,
    model,
    pod_count,
    pod_cpu,
    pod_mem,
    pod_num,
    pod_milli,
    pod_mask,
):
    """True when the pod fits node ``n``."""
    if cpu_left[n] < pod_cpu or mem_left[n] < pod_mem or pod_count[n] + 1 > MAX_PODS_PER_NODE:
        return False
    if pod_milli <= 0:
        return True
    if gpu_count[n] == 0 or ((pod_mask >> model[n]) & 1) == 0:
        return False
    fits = 0
    for g in range(gpu_count[n]):
        if gpu_left[n, g] >= pod_milli:
            fits += 1
    return fits >= pod_num


@njit(cache=True)
def feasible_mask(
    cpu_left, mem_left, gpu_left, gpu_count, model, pod_count, pod_cpu, pod_mem, pod_num, pod_milli, pod_mask
):
    """Boolean array: which nodes the pod fits."""
    n_nodes = cpu_left.shape[0]
    out = np.zeros(n_nodes, dtype=np.bool_)
    for n in range(n_nodes):
        out[n] = node_feasible(
            n,
            cpu_left,
            mem_left,
            gpu_left,
            gpu_count,
            model,
            pod_count,
            pod_cpu,
            pod_mem,
            pod_num,
            pod_milli,
            pod_mask,
        )
    return out
