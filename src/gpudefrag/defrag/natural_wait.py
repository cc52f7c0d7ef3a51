"""How long a blocked pod would wait for room if nobody moved anything: sampled, not averaged.

:mod:`gpudefrag.defrag.benefit` prices a plan by the blocked pod's *natural wait*: the time
until running pods, finishing on their own, leave room for it (on the plan's node ``X`` or,
when ``competing`` pods want such room, until the ``competing``-th room appears elsewhere).
Computed from each pod's *expected* remaining run time, that wait is the minimum of means.
For heavy-tailed run times the mean residual life of every pod is long, yet among hundreds of
running pods some finish within seconds: the expected minimum is far below the minimum of the
means, and plans made on the latter are mostly overtaken by a natural completion.

This module takes the expectation over ``K`` joint draws instead.  Draw ``k`` gives every
running pod a remaining run time (``draws_s[i, k]``, independent across pods; see
:func:`remaining_draws_s`).  In that draw each node releases its pods in the order they finish,
and a *room* appears whenever the number of copies of the blocked pod the node could host
rises (a node freeing four GPUs holds four one-GPU pods: four rooms).  With ``T_X`` the first
room on ``X`` and ``T_D`` the ``competing``-th earliest room on the other nodes:

    wait beyond the grace = mean over k of max(0, min(T_D, T_X) - start_delay_s)

and the plan's benefit is the blocked pod's GPUs times that.  Rooms held by pods that are not
listed never appear; waits are capped at :data:`NEVER_S`.  Arrivals are ignored, as in the
averaged estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from numba import njit

from gpudefrag.defrag.cost import MovablePod
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import MAX_PODS_PER_NODE
from gpudefrag.model.pods import PodSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NEVER_S = 30 * 86_400.0
"""A room that never appears in a draw counts as appearing after this many seconds."""


def stratified_levels(n_pods: int, draws: int, rng: np.random.Generator) -> FloatArray:
    """Probability levels ``(n_pods, draws)`` for :func:`remaining_draws_s`: each row holds
    ``(j + 0.5) / draws`` for ``j < draws`` in its own random order (every pod's draws cover
    its distribution evenly; pods are paired at random)."""
    if draws < 1:
        raise ValueError(f"draws must be at least 1, got {draws}")
    base = (np.arange(draws, dtype=np.float64) + 0.5) / draws
    return rng.permuted(np.tile(base, (n_pods, 1)), axis=1)


@njit(cache=True)
def _gpu_slots(gpu_left: IntArray, n: int, milli: int) -> int:
    """Room on node ``n``'s GPUs for ``milli``-sized pieces: sum of ``left // milli``."""
    slots = 0
    for g in range(gpu_left.shape[1]):
        slots += gpu_left[n, g] // milli
    return slots


@njit(cache=True)
def _keep_smaller(heap: FloatArray, t: float) -> None:
    """Replace the largest value of the max-heap ``heap`` (its top, ``heap[0]``) by the smaller
    ``t`` and restore the heap: ``heap`` keeps the ``heap.size`` smallest values seen."""
    i = 0
    n = heap.size
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] > heap[child]:
            child += 1
        if heap[child] <= t:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = t


@njit(cache=True)
def _mean_wait_beyond_s(
    nodes: IntArray,
    has_target: bool,
    cpu_left: IntArray,
    mem_left: IntArray,
    pod_count: IntArray,
    gpu_left: IntArray,
    first: IntArray,
    p_cpu: IntArray,
    p_mem: IntArray,
    p_milli: IntArray,
    p_gpus: IntArray,
    order: IntArray,
    draws_s: FloatArray,
    req: IntArray,
    competing: int,
    start_delay_s: float,
    never_s: float,
) -> float:
    """The module's formula over ``nodes`` (``nodes[0]`` is ``X`` when ``has_target``).  The
    node arrays are indexed by node; node ``n`` holds pods ``first[n]:first[n+1]`` of the pod
    arrays (``p_gpus``: a bitmask of GPU indices), and ``order[first[n]:first[n+1], k]`` lists
    them by finish time in draw ``k``.

    The copies of the request ``req = (cpu, mem, num_gpu, gpu_milli)`` a node holds are the
    least of its pod-count room, ``cpu // req_cpu``, ``mem // req_mem`` and (GPU pods)
    ``sum over GPUs of (left // gpu_milli) // num_gpu``; a release never lowers them."""
    req_cpu, req_mem, req_num, req_milli = req[0], req[1], req[2], req[3]
    big = MAX_PODS_PER_NODE
    # the earliest rooms elsewhere: a max-heap, so best[0] is the competing-th earliest
    best = np.empty(competing, dtype=np.float64)
    gl = np.empty(gpu_left.shape[1], dtype=np.int64)
    # each node's GPU slots and copies of the request now: the same in every draw
    slots_now = np.zeros(nodes.size, dtype=np.int64)
    copies_now = np.empty(nodes.size, dtype=np.int64)
    for i in range(nodes.size):
        n = nodes[i]
        c = big - pod_count[n]
        if req_cpu > 0:
            c = min(c, cpu_left[n] // req_cpu)
        if req_mem > 0:
            c = min(c, mem_left[n] // req_mem)
        if req_milli > 0:
            slots_now[i] = _gpu_slots(gpu_left, n, req_milli)
            c = min(c, slots_now[i] // req_num)
        copies_now[i] = c
    total = 0.0
    for k in range(draws_s.shape[1]):
        t_x = never_s
        for b in range(competing):
            best[b] = never_s
        for i in range(nodes.size):
            n = nodes[i]
            is_x = has_target and i == 0
            cutoff = t_x if is_x else min(t_x, best[0])
            lo = first[n]
            if copies_now[i] <= 0 and (lo == first[n + 1] or draws_s[order[lo, k], k] >= cutoff):
                continue  # no room now and none before the cutoff: the loop below would find none
            cpu, mem, pods = cpu_left[n], mem_left[n], pod_count[n]
            slots = slots_now[i]
            if req_milli > 0:
                for g in range(gl.size):
                    gl[g] = gpu_left[n, g]
            have = 0
            new = 0
            t = 0.0
            j = lo
            while True:
                c = big - pods
                if req_cpu > 0:
                    c = min(c, cpu // req_cpu)
                if req_mem > 0:
                    c = min(c, mem // req_mem)
                if req_milli > 0:
                    c = min(c, slots // req_num)
                new = c - have
                if new > 0:
                    have = c
                    if is_x:
                        t_x = t
                        break
                    for _ in range(new):
                        if t >= best[0]:
                            break
                        _keep_smaller(best, t)
                    cutoff = min(t_x, best[0])
                if j == first[n + 1]:
                    break
                p = order[j, k]
                j += 1
                t = draws_s[p, k]
                if t >= cutoff:
                    break
                cpu += p_cpu[p]
                mem += p_mem[p]
                pods -= 1
                if req_milli > 0:
                    bits, milli = p_gpus[p], p_milli[p]
                    g = 0
                    while bits:
                        if bits & 1:
                            slots += (gl[g] + milli) // req_milli - gl[g] // req_milli
                            gl[g] += milli
                        bits >>= 1
                        g += 1
        total += max(min(best[0], t_x) - start_delay_s, 0.0)
    return total / float(draws_s.shape[1])


@njit(cache=True)
def _order_by_finish(first: IntArray, draws_s: FloatArray) -> IntArray:
    """``out[first[n]:first[n+1], k]``: node ``n``'s rows sorted by ``draws_s[:, k]``."""
    out = np.empty(draws_s.shape, dtype=np.int64)
    for k in range(draws_s.shape[1]):
        for n in range(first.size - 1):
            lo = first[n]
            for j in range(lo, first[n + 1]):  # insertion sort: nodes hold few pods
                t = draws_s[j, k]
                q = j
                while q > lo and draws_s[out[q - 1, k], k] > t:
                    out[q, k] = out[q - 1, k]
                    q -= 1
                out[q, k] = j
    return out


@dataclass(frozen=True)
class RunningDraws:
    """The running pods as :func:`mean_wait_beyond_s` reads them: grouped by node (node ``n``
    holds rows ``first[n]:first[n+1]``), with what each holds and ``K`` draws of its further
    run time.  Built once per controller tick (:meth:`build`); the pods' nodes and requests
    must not change while it is in use."""

    first: IntArray
    cpu_milli: IntArray
    memory_mib: IntArray
    gpu_milli: IntArray
    gpu_bits: IntArray
    draws_s: FloatArray
    order: IntArray
    """``order[first[n]:first[n+1], k]``: node ``n``'s rows by finish time in draw ``k``."""
    memo: dict[tuple[object, ...], float] = field(default_factory=dict, compare=False, repr=False)
    """:func:`mean_wait_beyond_s`'s answers over these draws, keyed by the state's node
    versions (equal versions, equal contents) and the call's other arguments."""

    @classmethod
    def build(cls, num_nodes: int, running: Sequence[MovablePod], draws_s: FloatArray) -> RunningDraws:
        """``draws_s[i]``: the draws of ``running[i]`` (shape ``(len(running), K)``, ``K >= 1``)."""
        draws_s = np.asarray(draws_s, dtype=np.float64)
        if draws_s.ndim != 2 or draws_s.shape[0] != len(running) or draws_s.shape[1] < 1:
            raise ValueError(f"draws_s must have shape ({len(running)}, K >= 1), got {draws_s.shape}")
        node = np.asarray([p.node for p in running], dtype=np.int64)
        rows = np.argsort(node, kind="stable")
        first = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=num_nodes)[:num_nodes], out=first[1:])
        by_node = [running[i] for i in rows]
        draws = np.ascontiguousarray(draws_s[rows])
        return cls(
            first,
            np.asarray([p.spec.cpu_milli for p in by_node], dtype=np.int64),
            np.asarray([p.spec.memory_mib for p in by_node], dtype=np.int64),
            np.asarray([max(p.spec.gpu_milli, 0) for p in by_node], dtype=np.int64),
            np.asarray([sum(1 << g for g in p.gpus) for p in by_node], dtype=np.int64),
            draws,
            _order_by_finish(first, draws),
        )


def mean_wait_beyond_s(
    state: ClusterState,
    running: RunningDraws,
    pod: PodSpec,
    target_node: int | None,
    nodes: Sequence[int],
    start_delay_s: float,
    competing: int = 1,
) -> float:
    """Mean over the draws of ``max(0, min(T_D, T_X) - start_delay_s)`` (module docstring).

    ``T_D`` counts rooms on ``nodes`` other than ``target_node``.  With ``target_node=None``
    it is the mean of ``max(0, T_D - start_delay_s)`` over all of ``nodes``: an upper bound of
    the value for any target among them (if ``X`` holds one of the ``competing`` earliest rooms,
    ``T_X`` is at most the ``competing``-th; otherwise ``T_D`` is the ``competing``-th).
    Answers are memoised on ``running`` (see :attr:`RunningDraws.memo`).
    """
    if competing < 1:
        raise ValueError(f"competing must be at least 1, got {competing}")
    rest = [n for n in nodes if n != target_node]
    req = (pod.cpu_milli, pod.memory_mib, max(pod.num_gpu, 1), pod.gpu_milli)
    key = (state.version.tobytes(), target_node, tuple(rest), req, competing, float(start_delay_s))
    found = running.memo.get(key)
    if found is not None:
        return found
    order = np.asarray(rest if target_node is None else [target_node, *rest], dtype=np.int64)
    found = float(
        _mean_wait_beyond_s(
            order,
            target_node is not None,
            state.cpu_milli_left,
            state.memory_mib_left,
            state.pod_count,
            state.gpu_milli_left,
            running.first,
            running.cpu_milli,
            running.memory_mib,
            running.gpu_milli,
            running.gpu_bits,
            running.order,
            running.draws_s,
            np.asarray(req, dtype=np.int64),
            competing,
            float(start_delay_s),
            NEVER_S,
        )
    )
    running.memo[key] = found
    return found
