"""Compiled parts of the incremental score index (:mod:`gpudefrag.policies.score_index`).

One index per (attached state, pod shape) is a *tournament tree* over the nodes in tie-break
order: leaf ``p`` is the node at position ``p`` of the order ``(tie_rank, node index)``, and
every inner entry holds the position of the better of its two children, where "better" is the
higher score and, on equal scores, the lower position.  The root is therefore exactly the node
a full scan picks (highest score, lowest ``tie_rank``, then lowest index).  Infeasible nodes
score :data:`INFEASIBLE`, below every real score.

A node's leaf depends only on the node's contents, so after a change only that leaf and the
``log2(nodes)`` entries above it are recomputed.  The score of a node is the policy's own
compiled score (FGD: :func:`~gpudefrag.frag.kernels.fgd_node_score` against ``F`` of the node,
cached per node version; baselines: :func:`~gpudefrag.policies.baseline_kernel._score`), and
feasibility is :func:`~gpudefrag.model.fit.node_fits`, so the index decides what the full scan
decides.

Building a tree scores every node, but nodes with equal contents score alike, so
:func:`rebuild` scores one node per distinct content (found with an open-addressing hash table
over the nodes) and copies the result to the others; on a large cluster most nodes still look
like a few others when a new pod shape first arrives.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gpudefrag.frag.kernels import fgd_node_score, node_frag_milli
from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.constants import MAX_PODS_PER_NODE
from gpudefrag.model.fit import node_fits
from gpudefrag.policies import best_fit
from gpudefrag.policies.baseline_kernel import _score as baseline_score
from gpudefrag.policies.kinds import BESTFIT, FGD_BOUND_SLACK_MILLI, FGD_KIND, GPUCLUSTERING, KEY_SCALE
from gpudefrag.policies.kinds import LEAF_INFEASIBLE as INFEASIBLE

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@njit_no_nrt
def _better(a: int, b: int, leaf_score: IntArray) -> int:
    """The better of positions ``a`` and ``b`` (``a < b``, or either -1 for an empty side)."""
    if a < 0:
        return b
    if b < 0:
        return a
    if leaf_score[b] > leaf_score[a]:
        return b
    return a


@njit_no_nrt
def _node_value(
    kind: int,
    bound: int,
    n: int,
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
    scratch: IntArray,
) -> tuple[np.int64, int]:
    """(score, sharing-pod GPU or -1) of node ``n``; ``INFEASIBLE`` when the pod does not fit.
    With ``bound`` (FGD and BestFit; the pod's CPU and memory given as its tree's floor): the
    node's *bound key* instead (:mod:`gpudefrag.policies.bound_kernel`)."""
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
        return np.int64(INFEASIBLE), -1
    if kind == FGD_KIND:
        if frag_version[n] != version[n]:
            frag[n] = node_frag_milli(
                cpu_left[n], gpu_left[n], gpu_count[n], model[n], tp_cpu, tp_gpu, tp_num, tp_mask, tp_freq
            )
            frag_version[n] = version[n]
        return fgd_node_score(
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
            FGD_BOUND_SLACK_MILLI if bound else 0.0,
        )
    if bound and kind == BESTFIT:
        return np.int64(
            math.floor(
                best_fit.value(n, cpu_left, gpu_left, gpu_count, pod_cpu, pod_num, pod_milli) * KEY_SCALE
            )
        ), -1
    return baseline_score(
        kind, n, cpu_left, gpu_left, gpu_count, affinity, pod_cpu, pod_num, pod_milli, pod_tag
    ), -1


@njit(cache=True)
def refresh(
    nodes: IntArray,
    kind: int,
    bound: int,
    position: IntArray,
    tree: IntArray,
    leaf_score: IntArray,
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
    """Bring the leaves of ``nodes`` up to date (a node whose leaf already has its current
    version is skipped) and the tree above them.  Returns the best position, or -1 when no
    node is feasible."""
    size = leaf_score.shape[0]
    scratch = np.empty(gpu_left.shape[1], dtype=np.int64)
    for i in range(nodes.shape[0]):
        n = nodes[i]
        if leaf_version[n] == version[n]:
            continue
        s, g = _node_value(
            kind,
            bound,
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
        leaf_version[n] = version[n]
        leaf_gpu[n] = g
        p = position[n]
        if leaf_score[p] == s:
            continue
        leaf_score[p] = s
        j = (size + p) >> 1
        while j >= 1:
            tree[j] = _better(tree[2 * j], tree[2 * j + 1], leaf_score)
            j >>= 1
    best = tree[1]
    if best < 0 or leaf_score[best] == INFEASIBLE:
        return -1
    return best


@njit_no_nrt
def _content_hash(
    kind: int,
    n: int,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    affinity: IntArray,
) -> np.uint64:
    h = np.uint64(1469598103934665603)
    prime = np.uint64(1099511628211)
    h = (h ^ np.uint64(cpu_left[n])) * prime
    h = (h ^ np.uint64(mem_left[n])) * prime
    h = (h ^ np.uint64(model[n])) * prime
    h = (h ^ np.uint64(gpu_count[n])) * prime
    h = (h ^ np.uint64(pod_count[n] >= MAX_PODS_PER_NODE)) * prime
    for g in range(gpu_count[n]):
        h = (h ^ np.uint64(gpu_left[n, g])) * prime
    if kind == GPUCLUSTERING:
        for t in range(affinity.shape[1]):
            h = (h ^ np.uint64(affinity[n, t])) * prime
    return h


@njit_no_nrt
def _same_content(
    kind: int,
    a: int,
    b: int,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    affinity: IntArray,
) -> bool:
    """Do nodes ``a`` and ``b`` score alike for every pod (what the score and fit read)?"""
    if (
        cpu_left[a] != cpu_left[b]
        or mem_left[a] != mem_left[b]
        or model[a] != model[b]
        or gpu_count[a] != gpu_count[b]
        or (pod_count[a] >= MAX_PODS_PER_NODE) != (pod_count[b] >= MAX_PODS_PER_NODE)
    ):
        return False
    for g in range(gpu_count[a]):
        if gpu_left[a, g] != gpu_left[b, g]:
            return False
    if kind == GPUCLUSTERING:
        for t in range(affinity.shape[1]):
            if affinity[a, t] != affinity[b, t]:
                return False
    return True


@njit(cache=True)
def rebuild(
    kind: int,
    bound: int,
    position: IntArray,
    tree: IntArray,
    leaf_score: IntArray,
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
    """Score every node (one per distinct content, module docstring), rebuild the whole tree
    bottom-up and return the best position (-1: no node feasible)."""
    n_nodes = cpu_left.shape[0]
    size = leaf_score.shape[0]
    scratch = np.empty(gpu_left.shape[1], dtype=np.int64)
    slots = 1
    while slots < 2 * n_nodes:
        slots *= 2
    table = np.full(slots, -1, dtype=np.int64)
    for n in range(n_nodes):
        h = _content_hash(kind, n, cpu_left, mem_left, gpu_left, gpu_count, model, pod_count, affinity)
        j = np.int64(h >> np.uint64(1)) & (slots - 1)
        rep = -1
        while table[j] >= 0:
            if _same_content(
                kind, table[j], n, cpu_left, mem_left, gpu_left, gpu_count, model, pod_count, affinity
            ):
                rep = table[j]
                break
            j = np.int64((j + 1) & (slots - 1))
        if rep >= 0:
            s = leaf_score[position[rep]]
            g = leaf_gpu[rep]
        else:
            table[j] = n
            s, g = _node_value(
                kind,
                bound,
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
        leaf_score[position[n]] = s
        leaf_gpu[n] = g
        leaf_version[n] = version[n]
    for k in range(size - 1, 0, -1):
        tree[k] = _better(tree[2 * k], tree[2 * k + 1], leaf_score)
    best = tree[1]
    if best < 0 or leaf_score[best] == INFEASIBLE:
        return -1
    return best
