"""One scheduling cycle on the cache: the decision core, fed from the informer cache.

Rules:

* The state decided on is the cache's, with every node that is not Ready or is cordoned masked;
  for each pod, every node whose taints it does not tolerate (runs of pods that tolerate the
  same nodes are decided together); and every node reserved by the defragmentation controller,
  for all pods but the one it is reserved for (which is decided first, alone: on its reserved node when it fits there,
  else anywhere outside the other reservations).
* The pending pods are taken in queue order (priority, then creation time).  Runs of single pods
  go to the configured :class:`~gpudefrag.model.port.Scheduler` (a per-pod policy such as FGD,
  or the CP-SAT batch placer) as one cycle; a gang (pods sharing a PodGroup) is placed all or
  nothing with :func:`~gpudefrag.k8s.gangplace.place_gang` once its members already bound or
  assumed plus those pending and schedulable now (not gated, not being deleted) make
  ``minMember``: all of those pending members are placed together, and the members already
  bound (after a restart) pin its domain.
* Each decision is applied to the state decided on before the next one is made, so one cycle
  never places two pods in the same room.  The result is a list of (pod, placement) to assume
  and bind.
* That state is the cache's :class:`~gpudefrag.k8s.decision_view.DecisionView` (unusable and
  reserved nodes masked), synced with the nodes that changed since the last cycle, and (with
  ``index``, for a scheduler that indexes: :class:`~gpudefrag.model.port.IndexingScheduler`)
  the scheduler is attached to it: a cycle
  costs what changed, not a scan or a copy of every node.  Pods with nodes of their own excluded
  beyond those already masked (taints they do not tolerate on usable nodes, selectors) and
  reservation owners decide on a copy, scanned in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.gangplace import place_gang
from gpudefrag.k8s.records import PodRecord
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import PendingPod, RunningPod, Scheduler, indexing
from gpudefrag.model.topology import Topology
from gpudefrag.policies.base import Policy


@dataclass
class Cycle:
    """A :class:`~gpudefrag.model.port.SchedulingCycle` over a list of pending pods.  It shows no
    running pods: the driver's decision core (:mod:`gpudefrag.k8s.policy`) has no run-time
    estimator, so its schedulers never weigh how long nodes stay busy."""

    now_s: float
    state: ClusterState
    pending: Sequence[PendingPod]
    blocked: Sequence[PendingPod]

    def running_on(self, node: int) -> Sequence[RunningPod]:
        """None shown (class docstring)."""
        return ()


@dataclass
class CycleResult:
    binds: list[tuple[PodRecord, Placement]]
    unplaced: list[PodRecord]
    gangs_waiting: list[str]
    """PodGroups with fewer than ``minMember`` pods so far."""


def _pending_pod(rec: PodRecord) -> PendingPod:
    req = rec.request
    assert req is not None
    return PendingPod(rec.pod_id, req.spec, req.created_s, req.priority, False)


def decide_cycle(
    cache: ClusterCache,
    pending: Sequence[PodRecord],
    scheduler: Scheduler,
    policy: Policy,
    topology: Topology | None,
    now_s: float,
    index: bool = True,
) -> CycleResult:
    """Placements for ``pending`` (in queue order) on the cache's state (module docstring).
    ``index``: attach ``scheduler`` to the decision view when it indexes (a what-if cycle on
    a throwaway cache passes False: it would build trees for one cycle)."""
    reservations = {r.node: r.pod_key for r in cache.reservations(now_s)}
    reserved_idx = np.array([cache.index[n] for n in reservations if n in cache.index], dtype=np.int64)
    unusable = cache.node_sets.unusable_array()
    # ascending and distinct; the same object from cycle to cycle while nothing is reserved
    masked = np.union1d(unusable, reserved_idx) if reserved_idx.size else unusable
    work = cache.decision_view.sync(masked)
    indexed = indexing(scheduler) if index else None
    if indexed is not None:
        indexed.attach(work)
    result = CycleResult([], [], [])
    owners = {pod: node for node, pod in reservations.items()}
    rest: list[PodRecord] = []
    # reservation owners decide on the cache's state with only the unusable nodes masked
    owned: ClusterState | None = None
    for rec in pending:
        node = owners.get(rec.key)
        if node is None or rec.pod_group is not None:
            rest.append(rec)
            continue
        assert rec.request is not None
        if owned is None:
            owned = cache.state.copy()
            owned.mask_many(unusable)
        allowed = _without(owned, cache.excluded_for(rec))
        p = _select_owner(allowed, policy, rec.request.spec, cache.index[node], reserved_idx)
        if p is None:
            result.unplaced.append(rec)
        else:
            owned.bind(p)
            if not np.isin(p.node, masked):  # on a masked node it is invisible to the rest anyway
                work.bind(p)
            result.binds.append((rec, p))
    singles: list[PodRecord] = []
    excluded = np.zeros(0, dtype=np.int64)
    done_groups: set[str] = set()
    gang_pending: dict[str, list[PodRecord]] | None = None
    for rec in rest:
        if rec.pod_group is None:
            off = _beyond(cache.excluded_for(rec), masked)
            if singles and not np.array_equal(off, excluded):
                _flush(singles, scheduler, work, excluded, now_s, result)
                singles = []
            excluded = off
            singles.append(rec)
            continue
        group = _group_key(rec)
        if group in done_groups:
            continue
        done_groups.add(group)
        _flush(singles, scheduler, work, excluded, now_s, result)
        singles = []
        if gang_pending is None:
            gang_pending = _pending_by_group(cache)
        _place_group(cache, group, gang_pending.get(group, []), policy, topology, work, masked, result)
    _flush(singles, scheduler, work, excluded, now_s, result)
    return result


def _group_key(rec: PodRecord) -> str:
    return f"{rec.key.split('/', 1)[0]}/{rec.pod_group}"


def _pending_by_group(cache: ClusterCache) -> dict[str, list[PodRecord]]:
    """Every pending gang member that may be scheduled now (not only this cycle's eligible
    ones: a gang is placed whole or not at all), by ``namespace/podgroup``."""
    out: dict[str, list[PodRecord]] = {}
    for rec in cache.pending():
        if rec.pod_group is not None:
            out.setdefault(_group_key(rec), []).append(rec)
    return out


_LAST_BEYOND: list[np.ndarray] = []
"""The last (excluded, masked, result) of :func:`_beyond`: both inputs are kept arrays, the same
objects from cycle to cycle while nothing changes."""


def _beyond(excluded: np.ndarray, masked: np.ndarray) -> np.ndarray:
    """The nodes of ``excluded`` not already masked (both ascending and distinct): a cordoned or
    NotReady node carries a taint few pods tolerate, and needs no copy to be kept from them."""
    if excluded.size == 0 or masked.size == 0:
        return excluded
    if _LAST_BEYOND and _LAST_BEYOND[0] is excluded and _LAST_BEYOND[1] is masked:
        return _LAST_BEYOND[2]
    out = np.setdiff1d(excluded, masked, assume_unique=True)
    _LAST_BEYOND[:] = [excluded, masked, out]
    return out


def _without(work: ClusterState, nodes: np.ndarray) -> ClusterState:
    """``work`` itself when ``nodes`` is empty, else a copy with ``nodes`` masked."""
    if nodes.size == 0:
        return work
    view = work.copy()
    view.mask_many(nodes)
    return view


def _select_owner(
    work: ClusterState, policy: Policy, spec: PodSpec, node: int, reserved_idx: np.ndarray
) -> Placement | None:
    """A reservation's owner goes to its reserved node when it fits there, else wherever the
    policy puts it outside the other reservations."""
    only = work.copy()
    only.mask_many(np.setdiff1d(np.arange(work.num_nodes, dtype=np.int64), [node]))
    p = policy.select(only, spec)
    if p is not None:
        return p
    own = work.copy()
    own.mask_many(np.setdiff1d(reserved_idx, [node]))
    return policy.select(own, spec)


def _flush(
    singles: list[PodRecord],
    scheduler: Scheduler,
    work: ClusterState,
    excluded: np.ndarray,
    now_s: float,
    result: CycleResult,
) -> None:
    """Decide a run of single pods that tolerate the same nodes; binds go onto ``work``."""
    if not singles:
        return
    by_id = {r.pod_id: r for r in singles}
    decision = scheduler.decide(
        Cycle(now_s, _without(work, excluded), [_pending_pod(r) for r in singles], [])
    )
    bound: set[int] = set()
    for b in decision.binds:
        work.bind(b.placement)
        result.binds.append((by_id[b.pod_id], b.placement))
        bound.add(b.pod_id)
    result.unplaced += [r for r in singles if r.pod_id not in bound]


def _place_group(
    cache: ClusterCache,
    group: str,
    waiting: Sequence[PodRecord],
    policy: Policy,
    topology: Topology | None,
    work: ClusterState,
    masked: np.ndarray,
    result: CycleResult,
) -> None:
    """Place ``waiting`` (every pending member of ``group`` that may be scheduled now) all or
    nothing, once they and the members already bound or assumed make ``minMember``; ``masked``:
    the nodes masked on ``work``."""
    members = cache.members(group)
    placed_before = [r for r in members if r.counted_on is not None]
    need = cache.pod_groups.get(group)
    if need is None or len(placed_before) + len(waiting) < need:
        result.gangs_waiting.append(group)
        return
    pinned = [cache.index[r.counted_on] for r in placed_before if r.counted_on in cache.index]
    req = waiting[0].request
    assert req is not None
    specs = [r.request.spec for r in waiting if r.request is not None]
    off = _beyond(cache.excluded_for(waiting[0]), masked)
    placed = place_gang(_without(work, off), specs, policy, topology, req.constraint, pinned)
    if placed is None:
        result.unplaced += waiting
        return
    for rec, p in zip(waiting, placed):
        work.bind(p)
        result.binds.append((rec, p))
