"""Compiled FGD selection with a per-(node, pod shape) score cache.

A node's FGD score for a pod shape depends only on the node's contents, so it is cached with
the node's ``version`` and recomputed only when the node has changed since.  The node's own
fragmentation ``F0`` is cached the same way.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gpudefrag.frag.kernels import fgd_node_score, node_frag_milli
from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.fit import node_fits


@njit_no_nrt
def _cached_score(
    n: int,
    key: int,
    cpu_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    model: NDArray[np.int64],
    version: NDArray[np.int64],
    frag: NDArray[np.float64],
    frag_version: NDArray[np.int64],
    cache_score: NDArray[np.int64],
    cache_gpu: NDArray[np.int64],
    cache_version: NDArray[np.int64],
    pod_cpu: int,
    pod_num: int,
    pod_milli: int,
    tp_cpu: NDArray[np.int64],
    tp_gpu: NDArray[np.int64],
    tp_num: NDArray[np.int64],
    tp_mask: NDArray[np.int64],
    tp_freq: NDArray[np.float64],
    scratch: NDArray[np.int64],
) -> np.int64:
    if cache_version[n, key] != version[n]:
        if frag_version[n] != version[n]:
            frag[n] = node_frag_milli(
                cpu_left[n], gpu_left[n], gpu_count[n], model[n], tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq
            )
            frag_version[n] = version[n]
        s, g = fgd_node_score(
            cpu_left[n],
            gpu_left[n],
            gpu_count[n],
            model[n],
            frag[n],
            pod_cpu,
            pod_num,
            pod_milli,
            tp_cpu,
            tp_gpu,
            tp_num,
            tp_mask,
            tp_freq,
            scratch,
        )
        cache_score[n, key] = s
        cache_gpu[n, key] = g
        cache_version[n, key] = version[n]
    return cache_score[n, key]


@njit(cache=True)
def fgd_select(
    cpu_left: NDArray[np.int64],
    mem_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    model: NDArray[np.int64],
    pod_count: NDArray[np.int64],
    version: NDArray[np.int64],
    rank: NDArray[np.int64],
    frag: NDArray[np.float64],
    frag_version: NDArray[np.int64],
    cache_score: NDArray[np.int64],
    cache_gpu: NDArray[np.int64],
    cache_version: NDArray[np.int64],
    key: int,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    tp_cpu: NDArray[np.int64],
    tp_gpu: NDArray[np.int64],
    tp_num: NDArray[np.int64],
    tp_mask: NDArray[np.int64],
    tp_freq: NDArray[np.float64],
) -> tuple[int, int]:
    """(node, gpu): best FGD score, lowest rank on ties; gpu is the sharing pod's GPU (-1 else)."""
    scratch = np.empty(gpu_left.shape[1], dtype=np.int64)
    best = -1
    best_score = np.int64(0)
    for n in range(cpu_left.shape[0]):
        if not node_fits(
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
            continue
        if cache_version[n, key] == version[n]:
            s = cache_score[n, key]
        else:
            s = _cached_score(
                n,
                key,
                cpu_left,
                gpu_left,
                gpu_count,
                model,
                version,
                frag,
                frag_version,
                cache_score,
                cache_gpu,
                cache_version,
                pod_cpu,
                pod_num,
                pod_milli,
                tp_cpu,
                tp_gpu,
                tp_num,
                tp_mask,
                tp_freq,
                scratch,
            )
        if best < 0 or s > best_score or (s == best_score and rank[n] < rank[best]):
            best = n
            best_score = s
    if best < 0:
        return -1, -1
    return best, cache_gpu[best, key]


@njit(cache=True)
def fgd_scores(
    cpu_left: NDArray[np.int64],
    mem_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    model: NDArray[np.int64],
    pod_count: NDArray[np.int64],
    version: NDArray[np.int64],
    frag: NDArray[np.float64],
    frag_version: NDArray[np.int64],
    cache_score: NDArray[np.int64],
    cache_gpu: NDArray[np.int64],
    cache_version: NDArray[np.int64],
    key: int,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    tp_cpu: NDArray[np.int64],
    tp_gpu: NDArray[np.int64],
    tp_num: NDArray[np.int64],
    tp_mask: NDArray[np.int64],
    tp_freq: NDArray[np.float64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(score per node with -1 where infeasible, sharing-pod GPU per node)."""
    n_nodes = cpu_left.shape[0]
    scratch = np.empty(gpu_left.shape[1], dtype=np.int64)
    scores = np.full(n_nodes, -1, dtype=np.int64)
    gpus = np.full(n_nodes, -1, dtype=np.int64)
    for n in range(n_nodes):
        if node_fits(
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
            scores[n] = _cached_score(
                n,
                key,
                cpu_left,
                gpu_left,
                gpu_count,
                model,
                version,
                frag,
                frag_version,
                cache_score,
                cache_gpu,
                cache_version,
                pod_cpu,
                pod_num,
                pod_milli,
                tp_cpu,
                tp_gpu,
                tp_num,
                tp_mask,
                tp_freq,
                scratch,
            )
            gpus[n] = cache_gpu[n, key]
    return scores, gpus
