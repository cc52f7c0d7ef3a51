"""The wait queue of the time-driven simulator: active and parked pending pods.

Queue order is priority descending, then arrival order (pod index).  A pod that a session
considered and did not place is *parked* (Kubernetes' unschedulable queue): it is offered again
only once resources are freed on a node it fits now (:meth:`WaitQueue.freed`).  Parked pods are
grouped by shape (:class:`~gpudefrag.sim.parking.Shapes`), so one kernel call finds those a
node now fits.  ``free_epoch`` counts freeing events (a session's unplaced pods are parked
only if nothing was freed while it was in flight) and ``dirty`` says that something changed
since the last session started.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudefrag.model.cluster import ClusterState
from gpudefrag.sim.events import Touched
from gpudefrag.sim.parking import Shapes


class WaitQueue:
    def __init__(self, state: ClusterState, priority: Sequence[int], touched: Touched) -> None:
        self.shapes = Shapes(state)
        self._state = state
        self._neg_prio = [-int(p) for p in priority]
        self.shape_of = [-1] * len(priority)
        self.active: set[int] = set()
        self.parked_of: dict[int, int] = {}
        self.free_epoch = 0
        self.dirty = False
        self._touched = touched

    def order_key(self, i: int) -> tuple[int, int]:
        return (self._neg_prio[i], i)

    def __len__(self) -> int:
        return len(self.active) + len(self.parked_of)

    def add(self, pod: int) -> None:
        self.active.add(pod)
        self.dirty = True

    def park(self, pod: int) -> None:
        sid = self.shape_of[pod]
        self.active.discard(pod)
        self.parked_of[pod] = sid
        self.shapes.members[sid][pod] = None
        self.shapes.parked[sid] += 1

    def remove(self, pod: int) -> None:
        """``pod`` leaves the queue (it binds)."""
        sid = self.parked_of.pop(pod, None)
        if sid is None:
            self.active.discard(pod)
        else:
            del self.shapes.members[sid][pod]
            self.shapes.parked[sid] -= 1

    def freed(self, node: int) -> None:
        """Resources became available on ``node``: wake the parked pods that fit it now."""
        self.free_epoch += 1
        self.dirty = True
        if not self.parked_of:
            return
        sh = self.shapes
        for sid in sh.fitting(self._state, node):
            for pod in sh.members[sid]:
                del self.parked_of[pod]
                self.active.add(pod)
                self._touched.pods.add(pod)
            sh.members[sid] = {}
            sh.parked[sid] = 0

    def in_order(self, pods: set[int] | dict[int, int]) -> list[int]:
        return sorted(pods, key=self.order_key)
