"""Kueue's Topology Aware Scheduling algorithm (:func:`tas_assign`) on per-node pod capacities:
any PodSet, slices, an optional leader; BestFit and LeastFreeCapacity domain selection.
:class:`~gpudefrag.gangs.kueue_tas.KueueTAS` maps a job onto it.

Upstream: kubernetes-sigs/kueue at commit ff69552e79ad21652c36caa97038382e55625cf7
(2026-08-22):

* ``pkg/cache/scheduler/tas_flavor_snapshot.go`` -- ``FindTopologyAssignmentsForFlavor``
  (PodSet groups: a one-replica leader PodSet placed with its workers),
  ``findTopologyAssignment`` (phase 1 ``fillInCounts``; phase 2a
  ``findLevelWithFitDomains``; phase 2b the descent with ``updateCountsToMinimumGeneric``),
  ``fillLeafCounts`` / ``fillInCountsHelper``, ``sortedDomains`` /
  ``sortedDomainsWithLeader``, ``findBestFitDomainBy``, ``prioritizeLeaderDomain``,
  ``consumeWithLeadersGeneric``;
* ``pkg/features/kube_features.go`` -- ``TASProfileMixed`` (Beta, on by default since
  v0.15: LeastFreeCapacity for unconstrained requests, BestFit otherwise),
  ``TASBalancedPlacement`` (Alpha, off), ``TASRespectNodeAffinityPreferred`` (Alpha, off);
* ``keps/2724-topology-aware-scheduling/README.md`` -- "Computing the assignment",
  "Selecting the algorithm" and the two-level (slice) example used in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudefrag.gangs.topo_search import BoolArray, IntArray, TopoIndex

__all__ = ["MODES", "TasAssignment", "tas_assign"]

MODES = ("required", "preferred", "unconstrained")
_BIG = np.iinfo(np.int64).max // 4


@dataclass(frozen=True, slots=True)
class TasAssignment:
    """Pods per node of the worker PodSet (``workers[n]``) and the leader's node (-1: none)."""

    workers: IntArray
    leader: int


class _Run:
    """One ``findTopologyAssignment`` call: per-position domain states (position 0 = nodes,
    ``p`` = level index ``p - 1``; Kueue numbers the same levels top-down)."""

    def __init__(
        self,
        ix: TopoIndex,
        count: int,
        slice_size: int,
        slice_pos: int,
        leader: bool,
        unconstrained: bool,
        least_free: bool,
    ) -> None:
        self.ix = ix
        self.count = count
        self.slice_size = slice_size
        self.slice_pos = slice_pos
        self.leader_count = 1 if leader else 0
        self.unconstrained = unconstrained
        self.lfc = unconstrained and least_free  # useLeastFreeCapacityAlgorithm
        self.pc: list[IntArray] = []
        self.pcl: list[IntArray] = []
        self.lc: list[IntArray] = []
        self.sc: list[IntArray] = []
        self.scl: list[IntArray] = []

    # ---- phase 1: capacities ---------------------------------------------------------------
    def fill_in_counts(
        self, pod_count: IntArray, leader_fits: BoolArray | None, pcl_leaf: IntArray | None
    ) -> None:
        """``fillLeafCounts`` then ``fillInCountsHelper`` bottom-up."""
        s = self.slice_size
        pc = pod_count.astype(np.int64)
        if leader_fits is not None and pcl_leaf is not None:
            lc = leader_fits.astype(np.int64)
            pcl = np.where(leader_fits, pcl_leaf, pc).astype(np.int64)
        else:
            lc = np.zeros_like(pc)
            pcl = pc
        if self.slice_pos == 0:
            sc, scl = pc // s, pcl // s
        else:
            sc = np.zeros_like(pc)
            scl = sc
        self.pc, self.pcl, self.lc, self.sc, self.scl = [pc], [pcl], [lc], [sc], [scl]
        leader_required = self.leader_count > 0
        for p in range(1, self.ix.num_levels + 1):
            up = self.ix.up[p - 1]
            k = self.ix.ndom[p]
            c_pc, c_pcl, c_lc, c_sc, c_scl = pc, pcl, lc, sc, scl
            pc = np.bincount(up, weights=c_pc, minlength=k).astype(np.int64)
            sc_sum = np.bincount(up, weights=c_sc, minlength=k).astype(np.int64)
            if leader_required:
                contrib = c_lc > 0
                has = np.bincount(up, weights=contrib, minlength=k) > 0
                min_pd = np.full(k, _BIG, dtype=np.int64)
                min_sd = np.full(k, _BIG, dtype=np.int64)
                np.minimum.at(min_pd, up[contrib], (c_pc - c_pcl)[contrib])
                np.minimum.at(min_sd, up[contrib], (c_sc - c_scl)[contrib])
                pcl = np.where(has, pc - min_pd, 0)
                scl = np.where(has, sc_sum - min_sd, 0)
                lc = np.zeros(k, dtype=np.int64)
                np.maximum.at(lc, up, c_lc)
            else:
                pcl, scl, lc = pc, sc_sum, np.zeros(k, dtype=np.int64)
            if p == self.slice_pos:
                sc, scl = pc // s, pcl // s
            else:
                sc = sc_sum
            self.pc.append(pc)
            self.pcl.append(pcl)
            self.lc.append(lc)
            self.sc.append(sc)
            self.scl.append(scl)
        # the states are mutated below: give every level its own arrays
        for arrs in (self.pc, self.pcl, self.lc, self.sc, self.scl):
            for i, a in enumerate(arrs):
                arrs[i] = a.copy()

    # ---- ordering --------------------------------------------------------------------------
    def sorted_domains(self, p: int, ids: IntArray) -> IntArray:
        """``sortedDomains``: sliceCount (desc for BestFit, asc for LeastFreeCapacity), then
        podCount asc, then the domain path."""
        sc = self.sc[p][ids]
        order = np.lexsort((self.ix.lex_rank[p][ids], self.pc[p][ids], sc if self.lfc else -sc))
        return ids[order]

    def sorted_domains_with_leader(self, p: int, ids: IntArray) -> IntArray:
        """``sortedDomainsWithLeader``: leaderCount desc first, then as :meth:`sorted_domains`
        on the with-leader counts."""
        scl = self.scl[p][ids]
        keys = (self.ix.lex_rank[p][ids], self.pcl[p][ids], scl if self.lfc else -scl, -self.lc[p][ids])
        return ids[np.lexsort(keys)]

    def best_fit(self, p: int, ids: IntArray, needed: int, leader_count: int, slices: bool) -> int:
        """``findBestFitDomain`` / ``ForSlices``: the first domain with the smallest count
        that is >= ``needed`` (with-leader counts when a leader is asked for), among those
        that can hold the leaders; else the first domain."""
        if slices:
            cnt = (self.scl if leader_count > 0 else self.sc)[p][ids]
        else:
            cnt = (self.pcl if leader_count > 0 else self.pc)[p][ids]
        ok = (self.lc[p][ids] >= leader_count) & (cnt >= needed)
        if not ok.any():
            return int(ids[0])
        return int(ids[int(np.argmin(np.where(ok, cnt, _BIG)))])

    def prioritize_leader_domain(
        self, p: int, ids: IntArray, count: int, leader_count: int, slices: bool
    ) -> IntArray:
        """``prioritizeLeaderDomain``: move the first leader-capable domain whose leader
        penalty leaves enough capacity to the front."""
        if leader_count == 0 or ids.size < 2:
            return ids
        if slices:
            required = count // self.slice_size
            cnt, cntl = self.sc[p][ids], self.scl[p][ids]
        else:
            required = count
            cnt, cntl = self.pc[p][ids], self.pcl[p][ids]
        ok = (self.lc[p][ids] >= leader_count) & (int(cnt.sum()) - (cnt - cntl) >= required)
        if not ok.any():
            return ids
        i = int(np.argmax(ok))
        if i == 0:
            return ids
        return np.concatenate((ids[i : i + 1], ids[:i], ids[i + 1 :]))

    # ---- phase 2a --------------------------------------------------------------------------
    def find_level_with_fit_domains(self, p: int, required: bool) -> tuple[int, IntArray] | None:
        ids = self.sorted_domains_with_leader(p, np.arange(self.ix.ndom[p], dtype=np.int64))
        lcount = self.leader_count
        slice_count = self.count // self.slice_size
        lc, sc, scl = self.lc[p], self.sc[p], self.scl[p]
        top = int(ids[0])
        if not self.lfc and scl[top] >= slice_count and lc[top] >= lcount:
            top = self.best_fit(p, ids, slice_count, lcount, slices=True)
        if self.lfc:
            cap = scl[ids] if lcount > 0 else sc[ids]
            ok = (lc[ids] >= lcount) & (cap >= slice_count)
            if ok.any():
                return p, ids[int(np.argmax(ok)) : int(np.argmax(ok)) + 1]
            if required:
                return None
        if scl[top] >= slice_count and lc[top] >= lcount:
            return p, np.array([top], dtype=np.int64)
        if required:
            return None
        if p < self.ix.num_levels and not self.unconstrained:
            return self.find_level_with_fit_domains(p + 1, required)
        # spread over several domains of the top level (or of the unconstrained level)
        ids = self.prioritize_leader_domain(p, ids, self.count, lcount, slices=True)
        rem, rem_l = slice_count, lcount
        chosen: list[int] = []
        i = 0
        while rem_l > 0 and i < ids.size and lc[ids[i]] > 0:
            d = int(ids[i])
            if not self.lfc and scl[d] >= rem:
                d = self.best_fit(p, ids[i:], rem, rem_l, slices=True)
            chosen.append(d)
            rem_l -= int(lc[d])
            rem -= int(scl[d])
            i += 1
        if rem_l > 0:
            return None
        tail = self.sorted_domains(p, ids[i:])
        if rem > 0:
            picked = self._greedy_tail(p, tail, rem, sc, slices=True)
            if picked is None:
                return None
            chosen.extend(int(d) for d in picked)
        return p, np.asarray(chosen, dtype=np.int64)

    def _greedy_tail(
        self, p: int, ids: IntArray, rem: int, cnt_arr: IntArray, slices: bool
    ) -> IntArray | None:
        """Take domains in order until ``rem`` is covered; with BestFit the domain that
        covers the rest is swapped for the tightest fitting one after it.  None: not enough."""
        cnt = cnt_arr[ids]
        before = np.cumsum(cnt) - cnt
        cover = cnt >= rem - before
        if not cover.any():
            return None
        j = int(np.argmax(cover))
        last = int(ids[j])
        if not self.lfc:
            last = self.best_fit(p, ids[j:], int(rem - before[j]), 0, slices=slices)
        return np.concatenate((ids[:j], [last])).astype(np.int64)

    # ---- phase 2b --------------------------------------------------------------------------
    def update_counts_to_minimum(
        self, p: int, ids: IntArray, count: int, leader_count: int, slice_size: int, slices: bool
    ) -> IntArray | None:
        """``updateCountsToMinimumGeneric``: keep the fewest domains (in order, BestFit
        optimising the last one) that hold ``count`` pods (or slices) and the leaders, and set
        their counts to what they get."""
        ids = self.prioritize_leader_domain(p, ids, count, leader_count, slices)
        pc, lc = self.pc[p], self.lc[p]
        if slices:
            prim, with_l = self.sc[p], self.scl[p]
        else:
            prim, with_l = pc, self.pcl[p]
        rem = count // slice_size if slices else count
        rem_l = leader_count
        out: list[int] = []
        i = 0
        while rem_l > 0 and i < ids.size:  # consumeWithLeadersGeneric
            d = int(ids[i])
            if not self.lfc and with_l[d] >= rem and lc[d] >= rem_l:
                d = self.best_fit(p, ids[i:], rem, rem_l, slices)
            out.append(d)
            i += 1
            if with_l[d] >= rem and lc[d] >= rem_l:
                prim[d] = rem
                lc[d] = rem_l
                pc[d] = rem * slice_size
                return np.asarray(out, dtype=np.int64)
            if with_l[d] > rem:
                with_l[d] = rem
            if lc[d] > rem_l:
                lc[d] = rem_l
            prim[d] = with_l[d]
            pc[d] = with_l[d] * slice_size
            rem_l -= int(lc[d])
            rem -= int(with_l[d])
        if rem_l > 0:
            return None
        tail = ids[i:]
        picked = self._greedy_tail(p, tail, rem, prim, slices) if rem > 0 else np.zeros(0, dtype=np.int64)
        if picked is None:
            return None
        if picked.size:
            full, last = picked[:-1], int(picked[-1])
            lc[picked] = 0
            if slices:
                pc[full] = prim[full] * slice_size
            rem_last = rem - int(prim[full].sum())
            prim[last] = rem_last
            pc[last] = rem_last * slice_size if slices else rem_last
        return np.concatenate((np.asarray(out, dtype=np.int64), picked))

    def children(self, p: int, ids: IntArray) -> IntArray:
        ch = self.ix.children[p]
        return np.concatenate([ch[int(d)] for d in ids]) if ids.size else np.zeros(0, dtype=np.int64)


def tas_assign(
    ix: TopoIndex,
    pod_count: IntArray,
    count: int,
    level: int,
    mode: str,
    slice_size: int = 1,
    slice_level: int = -1,
    leader_fits: BoolArray | None = None,
    pod_count_with_leader: IntArray | None = None,
    least_free_capacity: bool = True,
) -> TasAssignment | None:
    """Kueue's ``findTopologyAssignment`` for one PodSet (plus an optional one-pod leader
    PodSet of the same group) on per-node capacities.

    ``pod_count[n]``: worker pods node n can take; ``count``: worker pods asked for;
    ``level``: the requested level index (-1: the node / hostname level); ``mode``:
    ``required``, ``preferred`` or ``unconstrained`` (implied TAS or
    ``podset-unconstrained-topology``; also a slice-only request, which asks at the top
    level); ``slice_size`` / ``slice_level``: ``podset-slice-size`` and
    ``podset-slice-required-topology`` (default: single pods at the node level);
    ``leader_fits[n]`` / ``pod_count_with_leader[n]``: whether node n can take the leader and
    how many workers it can take besides it; ``least_free_capacity``: the default
    ``TASProfileMixed`` (LeastFreeCapacity for unconstrained requests; False = the deprecated
    ``TASProfileBestFit``).  None: no assignment (the workload waits).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    if count <= 0 or slice_size <= 0 or count % slice_size:
        raise ValueError("count must be a positive multiple of slice_size")
    p_req, p_slice = level + 1, slice_level + 1
    if p_req < p_slice:
        raise ValueError("the slice level must be at or below the requested level")
    leader = leader_fits is not None
    run = _Run(ix, count, slice_size, p_slice, leader, mode == "unconstrained", least_free_capacity)
    run.fill_in_counts(pod_count, leader_fits, pod_count_with_leader)
    found = run.find_level_with_fit_domains(p_req, mode == "required")
    if found is None:
        return None
    p, fit = found
    cur_opt: IntArray | None = run.update_counts_to_minimum(
        p, fit, count, run.leader_count, slice_size, slices=True
    )
    # pooled descent down to the slice level (``lowerLevelDomains`` of all chosen domains)
    while cur_opt is not None and p > max(0, p_slice):
        lower = run.sorted_domains(p - 1, run.children(p, cur_opt))
        p -= 1
        cur_opt = run.update_counts_to_minimum(p, lower, count, run.leader_count, slice_size, slices=True)
    # below the slice level: each chosen domain distributes its own pods among its children
    while cur_opt is not None and p > 0:
        nxt: list[IntArray] = []
        for d in cur_opt:
            lower = run.sorted_domains(p - 1, run.ix.children[p][int(d)])
            got = run.update_counts_to_minimum(
                p - 1, lower, int(run.pc[p][d]), int(run.lc[p][d]), 1, slices=False
            )
            if got is None:
                return None
            nxt.append(got)
        p -= 1
        cur_opt = np.concatenate(nxt) if nxt else np.zeros(0, dtype=np.int64)
    if cur_opt is None:
        return None
    workers = np.zeros(ix.topology.num_nodes, dtype=np.int64)
    workers[cur_opt] = np.maximum(run.pc[0][cur_opt], 0)
    lead = -1
    if leader:
        with_leader = cur_opt[run.lc[0][cur_opt] > 0]
        if with_leader.size == 0:
            return None
        lead = int(with_leader[0])
    if int(workers.sum()) != count:
        return None
    return TasAssignment(workers, lead)
