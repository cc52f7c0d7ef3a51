"""One compiled selection loop for the score-based baselines.

For a pod, every feasible node is scored by the policy's integer score; the highest score wins
and a tie goes to the node with the lowest ``tie_rank`` (the reference's lowest randomised node
name, spec §3.4).  Returns -1 when no node is feasible.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.fit import node_fits
from gpudefrag.policies import best_fit, dot_product, gpu_clustering, gpu_packing
from gpudefrag.policies.kinds import BESTFIT, GPUCLUSTERING, GPUPACKING

INFEASIBLE = -1


@njit_no_nrt
def _score(
    policy: int,
    n: int,
    cpu_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    affinity: NDArray[np.int64],
    pod_cpu: int,
    pod_num: int,
    pod_milli: int,
    pod_tag: int,
) -> np.int64:
    if policy == BESTFIT:
        return best_fit.score(n, cpu_left, gpu_left, gpu_count, pod_cpu, pod_num, pod_milli)
    if policy == GPUPACKING:
        return np.int64(gpu_packing.score(n, gpu_left, gpu_count, pod_num, pod_milli))
    if policy == GPUCLUSTERING:
        return np.int64(gpu_clustering.score(n, gpu_left, gpu_count, affinity, pod_milli, pod_tag))
    return dot_product.score(n, cpu_left, gpu_left, gpu_count, pod_cpu, pod_num, pod_milli)


@njit(cache=True)
def score_nodes(
    policy: int,
    cpu_left: NDArray[np.int64],
    mem_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    model: NDArray[np.int64],
    pod_count: NDArray[np.int64],
    affinity: NDArray[np.int64],
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    pod_tag: int,
) -> NDArray[np.int64]:
    """Integer score per node; ``INFEASIBLE`` (-1) where the pod does not fit."""
    n_nodes = cpu_left.shape[0]
    out = np.full(n_nodes, INFEASIBLE, dtype=np.int64)
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
            out[n] = _score(
                policy, n, cpu_left, gpu_left, gpu_count, affinity, pod_cpu, pod_num, pod_milli, pod_tag
            )
    return out


@njit(cache=True)
def select_node(
    policy: int,
    cpu_left: NDArray[np.int64],
    mem_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    model: NDArray[np.int64],
    pod_count: NDArray[np.int64],
    affinity: NDArray[np.int64],
    rank: NDArray[np.int64],
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    pod_tag: int,
) -> int:
    """Feasible node with the highest score, lowest ``rank`` on ties; -1 if none fits."""
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
        s = _score(policy, n, cpu_left, gpu_left, gpu_count, affinity, pod_cpu, pod_num, pod_milli, pod_tag)
        if best < 0 or s > best_score or (s == best_score and rank[n] < rank[best]):
            best = n
            best_score = s
    return best
