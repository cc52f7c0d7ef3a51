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
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.objective import Workload, domain_delta, node_deltas
from gpudefrag.gangs.policy import candidate_levels
from gpudefrag.model.gang_state import GangState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

IntArray = npt.NDArray[np.int64]

__all__ = ["GangAware", "pick_whole_nodes"]


def pick_whole_nodes(state: GangState, whole_nodes: IntArray, k: int, level: int) -> IntArray:
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


class GangAware:
    """Our placement policy (see the module docstring)."""

    name = "ours"

    def __init__(self, workload: Workload) -> None:
        self.work = workload

    def _single(self, state: GangState, pod_gpus: int, nodes: IntArray) -> int | None:
        ok = nodes[state.free_gpus[nodes] >= pod_gpus]
        if ok.size == 0:
            return None
        delta = node_deltas(state, self.work, pod_gpus, ok)
        order = np.lexsort((ok, state.free_gpus[ok], np.round(delta, 9)))
        return int(ok[order[0]])

    def _sharing(self, state: GangState, job: Job) -> list[int] | None:
        fm = state.free_milli
        partly = (fm >= job.gpu_milli) & (fm < GPU_MILLI_PER_GPU)
        if partly.any():
            best = np.where(partly, fm, GPU_MILLI_PER_GPU + 1).min(axis=1)
            return [int(np.argmin(best))]
        node = self._single(state, 1, np.arange(state.topology.num_nodes, dtype=np.int64))
        return None if node is None else [node]

    def place(self, state: GangState, job: Job) -> list[int] | None:
        if job.is_sharing:
            return self._sharing(state, job)
        sizes = state.pods_of(job)
        all_nodes = np.arange(state.topology.num_nodes, dtype=np.int64)
        if len(sizes) == 1:
            node = self._single(state, sizes[0], all_nodes)
            return None if node is None else [node]
        for level in candidate_levels(state, job):
            nodes = self._gang_at(state, sizes, level)
            if nodes is not None:
                return nodes
        return None

    def _gang_at(self, state: GangState, sizes: list[int], level: int | None) -> list[int] | None:
        topo = state.topology
        gpn = topo.max_gpus_per_node
        k = sum(1 for s in sizes if s == gpn)
        rest = [s for s in sizes if s != gpn]
        whole = state.whole_free_nodes() & (topo.gpus_per_node >= gpn)
        top = len(topo.levels) - 1
        if level is None:
            dom = np.zeros(topo.num_nodes, dtype=np.int64)
            n_dom, below = 1, top
        else:
            dom = topo.domains(level)
            n_dom, below = topo.num_domains(level), level - 1
        w = np.bincount(dom, weights=whole.astype(np.float64), minlength=n_dom).astype(np.int64)
        ok = w >= k
        if rest:
            spare = np.bincount(dom, weights=(state.free_gpus >= rest[0]) & ~whole, minlength=n_dom)
            ok &= (spare > 0) | (w >= k + 1)
        if not ok.any():
            return None
        cand = np.flatnonzero(ok)
        taken = np.where(ok, k, 0).astype(np.int64)
        score = (
            domain_delta(state, self.work, level, taken)[cand] if level is not None else np.zeros(cand.size)
        )
        best = int(cand[np.lexsort((cand, w[cand], np.round(score, 9)))[0]])
        members = np.flatnonzero(dom == best)
        chosen = pick_whole_nodes(state, members[whole[members]], k, below)
        nodes = [int(n) for n in chosen]
        if rest:
            r = self._single(state, rest[0], np.setdiff1d(members, chosen))
            if r is None:
                return None
            nodes.append(r)
        return nodes
