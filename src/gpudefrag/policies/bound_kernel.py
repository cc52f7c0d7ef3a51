"""Exact best node from a tree of upper bounds: the score index's query for FGD and BestFit.

A pod's score depends on its CPU request (FGD: a smaller CPU left after placement can only make
the node's fragmentation larger; BestFit: the value before truncation grows linearly with it),
so an index with one tree per full pod shape must build a new tree over every node for each
new CPU or memory figure.  For these kinds the index instead keeps trees per *GPU request* (GPU
count, milli, model mask) and *floor* ``(f_cpu, f_mem)``, whose leaf for a node is a **bound
key**: an int64 from which :func:`_bound` gives, for any pod with this GPU request asking at
least the floor, an integer that no score of that node for the pod can exceed:

* FGD: the node's score for the GPU request with CPU ``f_cpu``, with
  :data:`~gpudefrag.policies.kinds.FGD_BOUND_SLACK_MILLI` added to its fragmentation change (so
  float rounding cannot put a real score above it); the bound is the key itself;
* BestFit: ``floor(v_f x KEY_SCALE)`` with ``v_f`` the value at CPU ``f_cpu``; the bound for CPU
  ``c`` is ``int64((key + 1) / KEY_SCALE + (c - f_cpu) / 128000 x 50 + 1e-9)``.

A node the floor does not fit (``f_cpu`` CPU, ``f_mem`` memory and the GPU request) has no key;
a pod asking more CPU or memory fits fewer nodes, never more.

:func:`best_bounded` searches the tree (whose inner entries hold the position of the best key
in their subtree, ties to the lower position) depth first, the child of the higher bound first
(the left one on equal bounds), scoring a leaf exactly (:func:`~gpudefrag.policies.index_kernel._node_value`) when
it is reached.  A subtree is skipped when its best bound is below the best score found, or equal
to it with its leftmost position not below the best position.  The answer is therefore exactly
the full scan's: the highest score, ties to the lowest position in tie-break order.
:func:`top_bounded` is that search holding the ``k`` best (a subtree is skipped against the
``k``-th); :func:`best_bounded` is it with ``k = 1``.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.constants import MAX_SPEC_CPU_MILLI
from gpudefrag.policies.index_kernel import _node_value, refresh
from gpudefrag.policies.kinds import BESTFIT, KEY_SCALE
from gpudefrag.policies.kinds import LEAF_INFEASIBLE as INFEASIBLE

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

__all__ = ["best_bounded", "refresh_best_bounded", "top_bounded"]


@njit_no_nrt
def _bound(kind: int, key: int, extra_cpu: int) -> np.int64:
    """The highest score a node of bound ``key`` can give a pod asking ``extra_cpu`` more CPU
    than its tree's floor."""
    if kind == BESTFIT:
        return np.int64((key + 1) / KEY_SCALE + extra_cpu / MAX_SPEC_CPU_MILLI * 50.0 + 1e-9)
    return np.int64(key)


@njit(cache=True)
def top_bounded(
    k: int,
    top_pos: IntArray,
    top_score: IntArray,
    top_gpu: IntArray,
    kind: int,
    cpu_floor: int,
    order: IntArray,
    tree: IntArray,
    leaf_key: IntArray,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    affinity: IntArray,
    version: IntArray,
    frag: FloatArray,
    frag_version: IntArray,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    pod_tag: int,
    tp_cpu: IntArray,
    tp_gpu: IntArray,
    tp_num: IntArray,
    tp_mask: IntArray,
    tp_freq: FloatArray,
) -> tuple[int, int]:
    """The ``k`` best positions for the pod (the full scan's order: highest score, then lowest
    position) into ``top_pos[:count]``, with their scores and sharing-pod GPUs, best first (each
    array of at least ``k`` entries); ``(count, leaves scored)``, fewer than ``k`` when fewer
    nodes fit.  A subtree is skipped once ``k`` are held and its bound cannot
    beat the ``k``-th."""
    size = leaf_key.shape[0]
    scratch = np.empty(gpu_left.shape[1], dtype=np.int64)
    depth = 0
    while (1 << depth) < size:
        depth += 1
    stack = np.empty(2 * depth + 4, dtype=np.int64)
    top = 0
    stack[top] = 1
    top += 1
    count = 0
    scored = 0
    extra = pod_cpu - cpu_floor
    while top > 0:
        top -= 1
        j = stack[top]
        win = tree[j]
        if win < 0 or leaf_key[win] == INFEASIBLE:
            continue
        ub = _bound(kind, leaf_key[win], extra)
        level = 0
        while (j << level) < size:
            level += 1
        leftmost = (j << level) - size
        if count == k and (ub < top_score[k - 1] or (ub == top_score[k - 1] and leftmost >= top_pos[k - 1])):
            continue
        if j >= size:
            n = order[win]
            s, g = _node_value(
                kind,
                0,
                n,
                cpu_left,
                mem_left,
                gpu_left,
                gpu_count,
                model,
                pod_count,
                affinity,
                version,
                frag,
                frag_version,
                pod_cpu,
                pod_mem,
                pod_num,
                pod_milli,
                pod_mask,
                pod_tag,
                tp_cpu,
                tp_gpu,
                tp_num,
                tp_mask,
                tp_freq,
                scratch,
            )
            scored += 1
            if s == INFEASIBLE:
                continue
            # insert (s, win) in the held list, best first; the k-th falls off when full
            i = count if count < k else k - 1
            if count == k and (s < top_score[i] or (s == top_score[i] and win > top_pos[i])):
                continue
            while i > 0 and (s > top_score[i - 1] or (s == top_score[i - 1] and win < top_pos[i - 1])):
                top_score[i] = top_score[i - 1]
                top_pos[i] = top_pos[i - 1]
                top_gpu[i] = top_gpu[i - 1]
                i -= 1
            top_score[i], top_pos[i], top_gpu[i] = s, win, g
            if count < k:
                count += 1
            continue
        left, right = 2 * j, 2 * j + 1
        # the side of the higher bound is searched first (pushed last); on equal bounds the
        # left side, whose positions win ties
        if tree[right] >= 0 and (
            tree[left] < 0
            or _bound(kind, leaf_key[tree[right]], extra) > _bound(kind, leaf_key[tree[left]], extra)
        ):
            stack[top] = left
            stack[top + 1] = right
        else:
            stack[top] = right
            stack[top + 1] = left
        top += 2
    return count, scored


@njit(cache=True)
def best_bounded(
    out: IntArray,
    kind: int,
    cpu_floor: int,
    order: IntArray,
    tree: IntArray,
    leaf_key: IntArray,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    affinity: IntArray,
    version: IntArray,
    frag: FloatArray,
    frag_version: IntArray,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    pod_tag: int,
    tp_cpu: IntArray,
    tp_gpu: IntArray,
    tp_num: IntArray,
    tp_mask: IntArray,
    tp_freq: FloatArray,
) -> int:
    """The best position for the pod (module docstring), or -1 when no node fits; ``out``
    receives ``(position, sharing-pod GPU or -1, leaves scored)``."""
    pos = np.empty(1, dtype=np.int64)
    score = np.empty(1, dtype=np.int64)
    gpu = np.empty(1, dtype=np.int64)
    count, scored = top_bounded(
        1, pos, score, gpu, kind, cpu_floor, order, tree, leaf_key, cpu_left, mem_left, gpu_left,
        gpu_count, model, pod_count, affinity, version, frag, frag_version, pod_cpu, pod_mem,
        pod_num, pod_milli, pod_mask, pod_tag, tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq,
    )  # fmt: skip
    out[0] = pos[0] if count else -1
    out[1] = gpu[0] if count else -1
    out[2] = scored
    return out[0]


@njit(cache=True)
def refresh_best_bounded(
    nodes: IntArray,
    out: IntArray,
    kind: int,
    order: IntArray,
    position: IntArray,
    tree: IntArray,
    leaf_key: IntArray,
    leaf_gpu: IntArray,
    leaf_version: IntArray,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    affinity: IntArray,
    version: IntArray,
    frag: FloatArray,
    frag_version: IntArray,
    floor_cpu: int,
    floor_mem: int,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
    pod_tag: int,
    tp_cpu: IntArray,
    tp_gpu: IntArray,
    tp_num: IntArray,
    tp_mask: IntArray,
    tp_freq: FloatArray,
) -> int:
    """:func:`~gpudefrag.policies.index_kernel.refresh` of the floor tree ``(floor_cpu,
    floor_mem)`` of the pod's GPU request at ``nodes``, then :func:`best_bounded` for the pod on
    it, in one call (one argument list: most of a warm decision's cost is passing the arrays)."""
    refresh(
        nodes, kind, 1, position, tree, leaf_key, leaf_gpu, leaf_version, cpu_left, mem_left, gpu_left,
        gpu_count, model, pod_count, affinity, version, frag, frag_version, floor_cpu, floor_mem, pod_num,
        pod_milli, pod_mask, pod_tag, tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq,
    )  # fmt: skip
    return best_bounded(
        out, kind, floor_cpu, order, tree, leaf_key, cpu_left, mem_left, gpu_left, gpu_count, model,
        pod_count, affinity, version, frag, frag_version, pod_cpu, pod_mem, pod_num, pod_milli, pod_mask,
        pod_tag, tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq,
    )  # fmt: skip
