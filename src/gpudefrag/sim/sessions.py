"""Scheduling sessions of the time-driven simulator (the busy server; see the
:mod:`gpudefrag.sim.timed` docstring).

:class:`SessionMixin` holds the ``_Sim`` methods that start a session on a snapshot (reserved
pods first, reserved nodes masked) and land its decisions at DECISION_DONE (revalidation,
parking, then the defragmenter).
"""

from __future__ import annotations

import numpy as np

from gpudefrag.model.cluster import Placement
from gpudefrag.sim.schedulers import fit_on_node
from gpudefrag.sim.timed_types import DECISION_DONE, PENDING, SESSION_START


class SessionMixin:
    """The simulator's session handlers (mixed into :class:`gpudefrag.sim.timed._Sim`)."""

    def _maybe_start_session(self, t: float) -> None:
        if self.busy or self.session_scheduled or not self.active:
            return
        if not self.config.park_unschedulable and not self.dirty:
            return
        self.session_scheduled = True
        self.queue.push(t, SESSION_START, (self._new_id(),))

    def _on_session_start(self, t: float, payload: tuple) -> tuple:
        (sid,) = payload
        self.session_scheduled = False
        self.busy, self.dirty = True, False
        view = self.state.copy()
        first: list[tuple[int, Placement]] = []
        for node in sorted(self.reservations):
            pod = self.reservations[node][0]
            gpus = fit_on_node(view, node, self.specs[pod])
            if gpus is None:
                view.mask(node)
            else:
                first.append((pod, Placement(node, gpus, self.specs[pod])))
                view.bind(first[-1][1])
        skip = {pod for pod, _ in first}
        cands = sorted((i for i in self.active if i not in skip), key=self.order_key)
        limit = getattr(self.scheduler, "max_pending", None)
        if limit is not None:
            cands = cands[:limit]
        pending = [self.specs[i] for i in cands]
        if getattr(self.scheduler, "wants_blocked", False):
            blocked = [self.specs[i] for i in sorted(self.parked_of, key=self.order_key)]
            placements, latency = self.scheduler.decide(view, pending, t, blocked=blocked)
        else:
            placements, latency = self.scheduler.decide(view, pending, t)
        name = getattr(self.scheduler, "name", type(self.scheduler).__name__)
        if len(placements) != len(cands):
            raise ValueError(f"scheduler {name} returned {len(placements)} placements for {len(cands)} pods")
        if not (latency >= 0 and np.isfinite(latency)):
            raise ValueError(f"scheduler {name} returned latency {latency!r}; need a finite value >= 0")
        self.sessions[sid] = (self.free_epoch, cands, list(placements), first)
        self.c["sessions"] += 1
        if self._in_window(t):
            self.latencies.append(float(latency))
        self.queue.push(t + float(latency), DECISION_DONE, (sid,))
        return (sid, len(cands), len(first))

    def _on_decision_done(self, t: float, payload: tuple) -> tuple:
        (sid,) = payload
        epoch0, cands, placements, first = self.sessions.pop(sid)
        self.busy = False
        binds, unplaced, changed = [], [], False
        for pod, p in first:
            if self.state.why_not_fits(p.node, p.pod, p.gpus) is None:
                binds.append(self._start_pod(pod, p, t))
        for pod, p in zip(cands, placements):
            if self.status[pod] != PENDING:
                continue
            if p is None:
                unplaced.append(pod)
                continue
            if p.pod != self.specs[pod]:
                raise ValueError(
                    f"scheduler {self.scheduler.name} returned a placement of "
                    f"{p.pod.name!r} for pod {self.specs[pod].name!r}"
                )
            res = self.reservations.get(p.node)
            if res is not None and res[0] != pod:
                self.c["reservation_filtered"] += 1
                changed = True
            elif self.state.why_not_fits(p.node, p.pod, p.gpus) is not None:
                self.c["bind_conflicts"] += 1
                changed = True
            else:
                binds.append(self._start_pod(pod, p, t))
        if self.config.park_unschedulable and self.free_epoch == epoch0:
            for pod in unplaced:  # nothing was freed since the snapshot: they cannot fit yet
                self._park(pod)
        if binds or changed:
            self.dirty = True
        moves: tuple = ()
        if self.defrag is not None and (self.active or self.parked_of):
            moves = self._run_plan(t)
        self._maybe_start_session(t)
        return (sid, tuple(binds), moves)
