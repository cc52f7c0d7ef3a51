"""Compiled kernels for FGD's fragmentation measure and score (spec §4.2-4.4).

``node_frag_milli`` follows the reference exactly, including the float summation order:
seven bins (q1, q2, q3, q4, xl, xr, na) are accumulated over the typical pods in list order,
then ``F`` = q1 + q2 + q4 + xl + xr + na (everything but q3), in that order.

Categories of a (node, typical pod ``(c, m, k, mask)``) pair:

* ``m == 0`` (CPU-only typical pod): xl if ``cpu_left >= c`` else xr;
* the node's GPU model is not accepted: na;
* else ``gpu_ok`` = at least ``k`` GPUs with ``left >= m``; q3 (gpu_ok, CPU fits),
  q4 (gpu_ok, CPU short), q2 (GPU short, CPU fits), q1 (both short).

A q3 pair adds ``f * gfrag`` to q2, where ``gfrag`` is the idle milli on GPUs with
``left < m``, and the rest to q3; any other category adds ``f * idle`` to its bin.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt

Q1, Q2, Q3, Q4, XL, XR, NA = 0, 1, 2, 3, 4, 5, 6


@njit_no_nrt
def node_frag_milli(
    cpu_left: int,
    gpu_left: NDArray[np.int64],
    gpu_count: int,
    model: int,
    tp_cpu: NDArray[np.int64],
    tp_gpu: NDArray[np.int64],
    tp_num: NDArray[np.int64],
    tp_mask: NDArray[np.int64],
    tp_freq: NDArray[np.float64],
) -> float:
    """Fragmentation F of one node in milli-GPU (``gpu_left`` is the node's GPU row)."""
    idle = 0
    for g in range(gpu_count):
        idle += gpu_left[g]
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    b3 = 0.0
    b4 = 0.0
    b5 = 0.0
    b6 = 0.0
    for j in range(tp_freq.shape[0]):
        c = tp_cpu[j]
        m = tp_gpu[j]
        f = tp_freq[j]
        if m == 0:
            if cpu_left >= c:
                b4 += f * idle
            else:
                b5 += f * idle
            continue
        if ((tp_mask[j] >> model) & 1) == 0:
            b6 += f * idle
            continue
        fits = 0
        gfrag = 0
        for g in range(gpu_count):
            if gpu_left[g] >= m:
                fits += 1
            else:
                gfrag += gpu_left[g]
        gpu_ok = fits >= tp_num[j]
        if gpu_ok:
            if cpu_left >= c:
                b1 += f * gfrag
                b2 += f * (idle - gfrag)
            else:
                b3 += f * idle
        else:
            if cpu_left >= c:
                b1 += f * idle
            else:
                b0 += f * idle
    return b0 + b1 + b3 + b4 + b5 + b6


@njit_no_nrt
def fgd_score(delta_milli: float) -> np.int64:
    """FGD's integer score: ``int64(sigmoid(delta / 1000) * 100)``, truncated toward zero."""
    s = 1.0 / (1.0 + math.exp(-(delta_milli / 1000.0)))
    return np.int64(s * 100.0)


@njit_no_nrt
def fgd_node_score(
    cpu_left: int,
    gpu_left: NDArray[np.int64],
    gpu_count: int,
    model: int,
    f0: float,
    pod_cpu: int,
    pod_num: int,
    pod_milli: int,
    tp_cpu: NDArray[np.int64],
    tp_gpu: NDArray[np.int64],
    tp_num: NDArray[np.int64],
    tp_mask: NDArray[np.int64],
    tp_freq: NDArray[np.float64],
    scratch: NDArray[np.int64],
    slack: float = 0.0,
) -> tuple[np.int64, int]:
    """FGD's score of one node for one pod, and the GPU a sharing pod would take (-1 otherwise).
    ``slack`` (milli-GPU, >= 0) is added to the fragmentation change before scoring: 0 gives the
    score; a small positive slack gives an upper bound that float rounding cannot undercut.

    Sharing pods: the best truncated score over GPUs with ``left >= milli``, lowest index on ties
    (a GPU whose ``left`` equals an earlier candidate's gives the same score and is skipped).
    Other pods: ``cpu_left -= cpu``; GPU pods take ``milli`` from the first ``num`` GPUs with
    ``left >= milli`` in ascending-``left`` order (stable).
    """
    new_cpu = cpu_left - pod_cpu
    if pod_num == 1 and 0 < pod_milli < 1000:
        best = np.int64(-1)
        best_gpu = -1
        for i in range(gpu_count):
            v = gpu_left[i]
            if v < pod_milli:
                continue
            seen = False
            for j in range(i):
                if gpu_left[j] == v:
                    seen = True
                    break
            if seen:
                continue
            for g in range(gpu_count):
                scratch[g] = gpu_left[g]
            scratch[i] = v - pod_milli
            f1 = node_frag_milli(new_cpu, scratch, gpu_count, model, tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq)
            s = fgd_score(f0 - f1 + slack)
            if best_gpu < 0 or s > best:
                best = s
                best_gpu = i
        return best, best_gpu
    for g in range(gpu_count):
        scratch[g] = gpu_left[g]
    if pod_milli > 0:
        taken = 0
        # Ascending-left stable order: scan values from small to large, indices in order.
        while taken < pod_num:
            pick = -1
            for g in range(gpu_count):
                if scratch[g] >= pod_milli and scratch[g] == gpu_left[g]:  # noqa: SIM102
                    if pick < 0 or scratch[g] < scratch[pick]:
                        pick = g
            if pick < 0:
                break
            scratch[pick] -= pod_milli
            taken += 1
    f1 = node_frag_milli(new_cpu, scratch, gpu_count, model, tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq)
    return fgd_score(f0 - f1 + slack), -1


@njit(cache=True)
def refresh_frag(
    cpu_left: NDArray[np.int64],
    gpu_left: NDArray[np.int64],
    gpu_count: NDArray[np.int64],
    model: NDArray[np.int64],
    version: NDArray[np.int64],
    frag: NDArray[np.float64],
    frag_version: NDArray[np.int64],
    tp_cpu: NDArray[np.int64],
    tp_gpu: NDArray[np.int64],
    tp_num: NDArray[np.int64],
    tp_mask: NDArray[np.int64],
    tp_freq: NDArray[np.float64],
) -> int:
    """Recompute ``frag[n]`` for every node whose version changed; returns how many changed."""
    changed = 0
    for n in range(cpu_left.shape[0]):
        if frag_version[n] != version[n]:
            frag[n] = node_frag_milli(
                cpu_left[n], gpu_left[n], gpu_count[n], model[n], tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq
            )
            frag_version[n] = version[n]
            changed += 1
    return changed
