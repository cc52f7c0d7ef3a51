"""FGD (Fragmentation Gradient Descent, Weng et al., ATC '23) extended to gangs on a topology.

**The measure** (FGD's, on this model: whole GPUs per node, no CPU).  The workload is a
distribution of job sizes ``{gpus: probability}``; a size above the nodes' GPU count counts as a
full-node pod (``gpus_per_node`` GPUs), and a size below 1 (``0.5``) as a sharing pod of that
share of one GPU.  Each size is a *typical pod* ``(k GPUs, m milli per GPU)``.  For a node whose
GPUs have ``free[g]`` milli free::

    F(node) = sum_t p_t * ( sum(free[g] for g with free[g] < m_t)   if #{g: free[g] >= m_t} >= k_t
                            sum(free)                              otherwise )

i.e. the expected free GPU capacity a typical pod cannot use: all of it when the pod does not
fit on the node, else the partly free GPUs too small for it (FGD's ``q1 + q2 + q4``: with no
CPU dimension ``q4`` never occurs; a whole-GPU typical pod has ``m = 1000``, so every partly
used GPU is fragmented for it).  A wholly free node and a full node both measure 0.

**Placement.**  A pod goes on the node whose ``F`` grows least (``F(after) - F(before)``,
computed for every node at once from per-node counts); a sharing pod is costed on the GPU
:meth:`ClusterState.bind` will give it (best fit among partly used GPUs, else a free one).  Ties
go to the lowest node index, as FGD's reference breaks ties by node order.

**Gangs and topology.**  A job of more than ``gpus_per_node`` GPUs is ``full`` full-node pods plus
a remainder pod.  The levels are tried in :func:`~gpudefrag.gangs.policy.candidate_levels`
order (Kueue TAS: ``required`` only its level; ``preferred`` its level, then up to the whole
cluster); at the first level where some domain can host every pod, the domain is the one whose
*whole placement* raises ``F`` least.  A full-node pod takes a wholly free node and always
changes ``F`` by 0 (free and full nodes measure 0), so the placement's increase is the
remainder pod's (or the lone pod's) best increase in the domain, on the nodes the full-node
pods leave; ties go to the domain with the fewest free GPUs (packing), then the lowest index.
Inside the chosen domain the full-node pods take its lowest-numbered wholly free nodes and the
remainder pod the node FGD picks among the rest.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.policy import candidate_levels
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = ["FgdGang", "TypicalPods"]

_MILLI = GPU_MILLI_PER_GPU


class TypicalPods:
    """The workload's typical pods on nodes of ``gpus_per_node`` GPUs: ``k`` GPUs of ``m`` milli
    each, probability ``p``; ``um`` the distinct ``m`` values and ``ui`` each pod's index there."""

    def __init__(self, dist: dict[float, float], gpus_per_node: int) -> None:
        merged: dict[tuple[int, int], float] = {}
        for size, prob in dist.items():
            if prob < 0:
                raise ValueError(f"negative probability for size {size}")
            if prob == 0:
                continue
            if 0 < size < 1:
                key = (1, round(size * _MILLI))
            elif size >= 1 and float(size).is_integer():
                key = (min(int(size), gpus_per_node), _MILLI)
            else:
                raise ValueError(f"job size {size}: expected a whole number of GPUs or a share below 1")
            merged[key] = merged.get(key, 0.0) + float(prob)
        total = sum(merged.values())
        if total <= 0:
            raise ValueError("the size distribution needs a positive probability")
        keys = sorted(merged)
        self.k: IntArray = np.array([k for k, _ in keys], dtype=np.int64)
        self.m: IntArray = np.array([m for _, m in keys], dtype=np.int64)
        self.p: FloatArray = np.array([merged[x] / total for x in keys], dtype=np.float64)
        self.um: IntArray = np.unique(self.m)
        self.ui: IntArray = np.searchsorted(self.um, self.m).astype(np.int64)

    def features(self, free: IntArray) -> tuple[IntArray, IntArray, IntArray]:
        """Per node (rows of ``free``, milli per GPU): GPUs with at least ``um[u]`` free
        ``cnt[u]``, free milli on the other GPUs ``frag[u]``, and all free milli ``total``."""
        ge = free[None, :, :] >= self.um[:, None, None]
        cnt = ge.sum(axis=2)
        frag = np.where(ge, 0, free[None, :, :]).sum(axis=2)
        return cnt, frag, free.sum(axis=1)

    def measure(self, cnt: IntArray, frag: IntArray, total: IntArray) -> FloatArray:
        """``F`` per node from :meth:`features` (milli-GPU)."""
        fits = cnt[self.ui] >= self.k[:, None]
        out: FloatArray = (self.p[:, None] * np.where(fits, frag[self.ui], total[None, :])).sum(axis=0)
        return out


class FgdGang:
    """FGD for jobs and gangs (see the module docstring).  ``size_dist`` maps job sizes (GPUs;
    a share below 1 for sharing jobs) to their probability in the workload; it is normalised."""

    name = "fgd"

    def __init__(self, size_dist: dict[float, float] | dict[int, float]) -> None:
        self.size_dist: dict[float, float] = {float(k): float(v) for k, v in size_dist.items()}
        TypicalPods(self.size_dist, 1 << 30)  # validate now
        self._typical: dict[int, TypicalPods] = {}

    def typical(self, gpus_per_node: int) -> TypicalPods:
        tp = self._typical.get(gpus_per_node)
        if tp is None:
            tp = TypicalPods(self.size_dist, gpus_per_node)
            self._typical[gpus_per_node] = tp
        return tp

    def fragmentation(self, state: ClusterState) -> FloatArray:
        """``F`` of every node (milli-GPU)."""
        tp = self.typical(state.topology.max_gpus_per_node)
        return tp.measure(*tp.features(state.gpu_milli_left))

    def deltas(self, state: ClusterState, job: Job, pod_gpus: int) -> FloatArray:
        """``F`` increase of placing one pod of ``job`` (``pod_gpus`` GPUs) on each node; ``inf``
        where it does not fit."""
        tp = self.typical(state.topology.max_gpus_per_node)
        free = state.gpu_milli_left
        cnt, frag, total = tp.features(free)
        before = tp.measure(cnt, frag, total)
        if job.is_sharing:
            m0 = job.gpu_milli
            partly = (free >= m0) & (free < _MILLI)
            vp = np.where(partly, free, _MILLI + 1).min(axis=1)
            has_full = (free == _MILLI).any(axis=1)
            v = np.where(vp <= _MILLI, vp, np.where(has_full, _MILLI, -1))
            fits = v >= 0
            w = v - m0
            um = tp.um[:, None]
            cnt2 = cnt - (v[None, :] >= um) + (w[None, :] >= um)
            frag2 = frag - np.where(v[None, :] < um, v[None, :], 0) + np.where(w[None, :] < um, w[None, :], 0)
            after = tp.measure(cnt2, frag2, total - m0)
        else:
            fits = state.free_gpus >= pod_gpus
            after = tp.measure(cnt - pod_gpus, frag, total - pod_gpus * _MILLI)
        return np.where(fits, after - before, np.inf)

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        topo = state.topology
        n = topo.num_nodes
        gmax = topo.max_gpus_per_node
        pods = state.pods_of(job)
        if len(pods) > 1:
            nfull = sum(1 for g in pods if g == gmax)
            rest = pods[-1] if pods[-1] != gmax else 0
        else:
            nfull, rest = 0, pods[0]
        whole = (state.free_gpus == topo.gpus_per_node) & (topo.gpus_per_node >= gmax)
        delta = self.deltas(state, job, rest) if rest else None
        free_gpus = state.free_gpus
        for level in candidate_levels(state, job):
            if level is None:
                dom = np.zeros(n, dtype=np.int64)
                nd = 1
            else:
                dom = topo.domains(level)
                nd = topo.num_domains(level)
            taken = np.zeros(n, dtype=bool)
            ok = np.ones(nd, dtype=bool)
            if nfull:
                widx = np.flatnonzero(whole)
                wdom = dom[widx]
                ok &= np.bincount(wdom, minlength=nd) >= nfull
                order = np.argsort(wdom, kind="stable")
                sd = wdom[order]
                starts = np.searchsorted(sd, sd, side="left")
                rank = np.empty(widx.size, dtype=np.int64)
                rank[order] = np.arange(widx.size) - starts
                taken[widx[rank < nfull]] = True
            cost = np.zeros(nd, dtype=np.float64)
            cand: FloatArray | None = None
            if delta is not None:
                cand = np.where(taken | ~ok[dom], np.inf, delta)
                cost = np.full(nd, np.inf)
                np.minimum.at(cost, dom, cand)
                ok &= np.isfinite(cost)
            if not ok.any():
                continue
            dom_free = np.bincount(dom, weights=free_gpus, minlength=nd)
            ids = np.flatnonzero(ok)
            best = int(ids[np.lexsort((ids, dom_free[ids], cost[ids]))[0]])
            inside = dom == best
            nodes = [int(x) for x in np.flatnonzero(taken & inside)]
            if cand is not None:
                nodes.append(int(np.argmin(np.where(inside, cand, np.inf))))
            return nodes
        return None
