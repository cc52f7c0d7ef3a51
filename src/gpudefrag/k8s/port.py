"""The decision core's :class:`~gpudefrag.model.port.ClusterPort`, read from a :class:`ClusterCache`.

What a running pod's record holds comes from the API only: its start, checkpoint interval and
the run time at its last checkpoint (:mod:`gpudefrag.k8s.checkpoints`).  It may be moved only if
it is ours (``spec.schedulerName``) and none of the checkpoints module's reasons keeps it where it
is (do-not-disrupt, gang member, no controller owner); a pod being deleted counts as migrating.

Pending pods are our pods in queue order, gang members left out (a gang is placed whole, and
the planner frees room for one pod); ``blocked`` marks those blocked by fragmentation on the
nodes they may use.  Every pod carries the nodes it may not use (``excluded_nodes``): taints it
does not tolerate, labels its node selector or required affinity rejects, and nodes not Ready
or cordoned; the planner never frees such a node for a pending pod nor moves a pod there.
Reservations are the nodes' ``gpudefrag.io/reserved-for`` annotations that have not expired.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np

from gpudefrag.defrag.blocked import blocked_by_fragmentation
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.checkpoints import CheckpointState, checkpoint_state, never_moved_reason
from gpudefrag.k8s.records import PodRecord
from gpudefrag.k8s.requests import ObjectError
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.port import PendingPod, RunningPod

log = logging.getLogger("gpudefrag.k8s")


def may_disrupt(rec: PodRecord) -> bool:
    """The controller may evict ``rec``: ours, and no reason it is never moved
    (:func:`~gpudefrag.k8s.checkpoints.never_moved_reason`)."""
    return rec.ours and rec.request is not None and never_moved_reason(rec.obj, rec.request) is None


def running_pod(
    rec: PodRecord, node: int, now_s: float, excluded_nodes: frozenset[int] = frozenset()
) -> RunningPod:
    """What the cluster knows of one counted pod (:mod:`gpudefrag.k8s.checkpoints`), with the
    nodes it may not be moved to.  A pod whose checkpoint annotations do not parse is kept where
    it is (never moved) and logged."""
    assert rec.request is not None and rec.placement is not None
    movable = may_disrupt(rec)
    try:
        ck = checkpoint_state(rec.obj, now_s)
    except ObjectError as e:
        log.warning("pod %s is not moved: %s", rec.key, e)
        ck, movable = CheckpointState(now_s, 0.0, 0.0, 0.0), False
    return RunningPod(
        pod_id=rec.pod_id,
        spec=rec.request.spec,
        node=node,
        gpus=rec.placement.gpus,
        start_s=ck.start_s,
        checkpoint_interval_s=ck.interval_s,
        run_time_s=ck.run_s,
        last_checkpoint_run_s=ck.last_checkpoint_run_s,
        do_not_disrupt=not movable,
        migrating=rec.deleting,
        excluded_nodes=excluded_nodes,
    )


class CachePort:
    """A :class:`~gpudefrag.model.port.ClusterPort` over a cache at ``now_s``."""

    def __init__(self, cache: ClusterCache, now_s: float) -> None:
        self.cache = cache
        self._now_s = now_s

    @property
    def now_s(self) -> float:
        return self._now_s

    def snapshot(self) -> ClusterState:
        state = self.cache.state.copy()
        state.mask_many(np.array(self.cache.unusable_nodes(), dtype=np.int64))
        return state

    @property
    def pending(self) -> list[PendingPod]:
        state = self.cache.state
        out = []
        for rec in self.cache.pending():
            if rec.pod_group is not None:  # gangs are placed whole; a single pod's plan cannot serve them
                continue
            req = rec.request
            assert req is not None
            off = self.cache.off_limits(rec)
            blocked = blocked_by_fragmentation(state, req.spec, off)
            out.append(PendingPod(rec.pod_id, req.spec, req.created_s, req.priority, blocked, off))
        return out

    @property
    def running(self) -> list[RunningPod]:
        cache = self.cache
        return [
            running_pod(rec, cache.index[rec.counted_on], self._now_s, cache.off_limits(rec))
            for rec in cache.pods.values()
            if rec.counted_on is not None and not rec.assumed and rec.request is not None
        ]

    @property
    def reservations(self) -> Mapping[int, int]:
        cache = self.cache
        out: dict[int, int] = {}
        for r in cache.reservations(self._now_s):
            uid = cache.by_key.get(r.pod_key)
            if uid is not None and r.node in cache.index:
                out[cache.index[r.node]] = cache.pods[uid].pod_id
        return out
