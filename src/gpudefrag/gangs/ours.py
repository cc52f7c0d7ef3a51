"""Our gang placement: the levels the constraint allows, the domain and the nodes that raise
the gang-aware fragmentation measure (:mod:`gpudefrag.gangs.objective`) least.

* A single pod goes on the node with the smallest change of the measure; ties go to the node
  with the fewest free GPUs left, then the lowest index.  A sharing pod first tries the partly
  used GPUs (best fit by free milli), which leaves every whole GPU as it is.
* A gang of ``k`` full-node pods (plus a remainder pod) tries the levels of
  :func:`~gpudefrag.gangs.policy.candidate_levels` in order; at a level, among the domains
  with ``k`` wholly free nodes (and room for the remainder), it takes the one whose measure
  grows least (ties: fewest wholly free nodes, then lowest index).  Inside that domain the
  whole nodes are chosen level by level downwards: the smallest sub-domain that holds them all,
  else the fullest sub-domains first (fewest domains used).

A gang decision reads the state's domain aggregates (:meth:`ClusterState.domain_counts`: wholly
free nodes and free-GPU histograms per domain) and the topology's member and child lists
(:mod:`gpudefrag.model.domain_index`), so it costs about the domains of the level tried plus
the sub-domains and members of the chosen domain, not a pass over every node.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.objective import Workload, domain_delta, node_deltas
from gpudefrag.gangs.policy import candidate_levels
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.domain_counts import DomainCounts
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

IntArray = npt.NDArray[np.int64]

__all__ = ["GangAware", "pick_whole_nodes"]


def pick_whole_nodes(state: ClusterState, whole_nodes: IntArray, k: int, level: int) -> IntArray:
    """``k`` of ``whole_nodes`` (all wholly free, inside one domain of level ``level + 1``),
    chosen downwards from ``level``: best-fit sub-domain if one holds k, else fullest first."""
    if whole_nodes.size < k:
        raise ValueError("not enough whole nodes")
    if level < 0 or k == 0:
        return np.sort(whole_nodes)[:k]
    dom = state.topology.domains(level)[whole_nodes]
    ids, counts = np.unique(dom, return_counts=True)
    fits = counts >= k
    if fits.any():
        best = ids[fits][np.argmin(counts[fits])]
        return pick_whole_nodes(state, whole_nodes[dom == best], k, level - 1)
    order = np.lexsort((ids, -counts))
    out: list[IntArray] = []
    need = k
    for i in order:
        take = min(need, int(counts[i]))
        out.append(pick_whole_nodes(state, whole_nodes[dom == ids[i]], take, level - 1))
        need -= take
        if need == 0:
            break
    return np.concatenate(out)


def _pick_in_domain(state: ClusterState, counts: DomainCounts, level: int, domain: int, k: int) -> IntArray:
    """:func:`pick_whole_nodes` on the wholly free nodes of the largest size in ``domain`` of
    level index ``level`` (the root for the whole cluster), going down from ``level - 1``:
    read from the aggregates and the child lists instead of grouping the nodes."""
    gpn = state.index.max_gpus_per_node
    index = state.index
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if level == 0:  # the members are nodes (also the root of a topology without levels)
        members = index.members(level, domain)
        return members[state.free_gpus[members] == gpn][:k]
    kids = index.children(level, domain)
    have = counts.free_hist[level - 1][kids, gpn]
    ids, cnt = kids[have > 0], have[have > 0]
    if cnt.sum() < k:
        raise ValueError("not enough whole nodes")
    fits = cnt >= k
    if fits.any():
        best = int(ids[fits][np.argmin(cnt[fits])])
        return _pick_in_domain(state, counts, level - 1, best, k)
    out: list[IntArray] = []
    need = k
    for i in np.lexsort((ids, -cnt)):
        take = min(need, int(cnt[i]))
        out.append(_pick_in_domain(state, counts, level - 1, int(ids[i]), take))
        need -= take
        if need == 0:
            break
    return np.concatenate(out)


class GangAware:
    """Our placement policy (see the module docstring)."""

    name = "ours"

    def __init__(self, workload: Workload) -> None:
        self.work = workload

    def _single(self, state: ClusterState, pod_gpus: int, nodes: IntArray) -> int | None:
        ok = nodes[state.free_gpus[nodes] >= pod_gpus]
        if ok.size == 0:
            return None
        delta = node_deltas(state, self.work, pod_gpus, ok)
        order = np.lexsort((ok, state.free_gpus[ok], np.round(delta, 9)))
        return int(ok[order[0]])

    def _sharing(self, state: ClusterState, job: Job) -> list[int] | None:
        fm = state.gpu_milli_left
        partly = (fm >= job.gpu_milli) & (fm < GPU_MILLI_PER_GPU)
        if partly.any():
            best = np.where(partly, fm, GPU_MILLI_PER_GPU + 1).min(axis=1)
            return [int(np.argmin(best))]
        node = self._single(state, 1, np.arange(state.topology.num_nodes, dtype=np.int64))
        return None if node is None else [node]

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        if job.is_sharing:
            return self._sharing(state, job)
        sizes = state.pods_of(job)
        if len(sizes) == 1:
            all_nodes = np.arange(state.topology.num_nodes, dtype=np.int64)
            node = self._single(state, sizes[0], all_nodes)
            return None if node is None else [node]
        for level in candidate_levels(state, job):
            nodes = self._gang_at(state, sizes, level)
            if nodes is not None:
                return nodes
        return None

    def _gang_at(self, state: ClusterState, sizes: list[int], level: int | None) -> list[int] | None:
        gpn = state.index.max_gpus_per_node
        k = sum(1 for s in sizes if s == gpn)
        rest = [s for s in sizes if s != gpn]
        if level is not None and level < 0:
            # a node-level domain is one node: it holds one whole node (k + 1 with a remainder,
            # or k >= 2 without one, never fit) and no spare node beside it
            return None
        li = state.index.root if level is None else level
        counts = state.domain_counts()
        hist = counts.free_hist[li]
        # nodes with gpn free GPUs are exactly the wholly free nodes of the largest size
        w = hist[:, gpn]
        ok = w >= k
        if rest:
            spare = hist[:, rest[0] : gpn].sum(axis=1)
            ok &= (spare > 0) | (w >= k + 1)
        cand = np.flatnonzero(ok)
        if cand.size == 0:
            return None
        if level is not None:
            taken = np.full(cand.size, k, dtype=np.int64)
            score = domain_delta(state, self.work, level, taken, domains=cand)
        else:
            score = np.zeros(cand.size)
        best = int(cand[np.lexsort((cand, w[cand], np.round(score, 9)))[0]])
        chosen = _pick_in_domain(state, counts, li, best, k)
        nodes = [int(n) for n in chosen]
        if rest:
            members = state.index.members(li, best)
            r = self._single(state, rest[0], np.setdiff1d(members, chosen))
            if r is None:
                return None
            nodes.append(r)
        return nodes
