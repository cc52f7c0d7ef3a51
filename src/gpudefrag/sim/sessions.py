"""Scheduling sessions of the time-driven simulator (a busy server).

A session starts when the scheduler is idle and some pending pod is active.  It decides the
reserved pods itself first: each tries its reserved node (GPUs by the ``best`` rule) and, if it
fits, is decided there ahead of every other pod; otherwise the node is masked in the state the
scheduler decides on (with ``hold_reserved_pods`` the pod is not offered elsewhere
meanwhile).  That state is the simulator's own, for the time of the decision: the masked nodes
masked and the reserved-first pods bound on it, both undone as soon as the scheduler has
returned (it binds on the state while it decides and unbinds before it returns).  So a session
copies nothing, and a scheduler that keeps an index
(:class:`~gpudefrag.model.port.IndexingScheduler`) stays attached to that one state: a session
costs what changed, not a pass over every node.  The scheduler decides the other active pods
in queue order through :class:`~gpudefrag.sim.views.SessionCycle`, and the decisions land
``latency`` later (DECISION_DONE), where each is revalidated against the state of that moment:
one that no longer fits is a *bind conflict*, one on a node reserved for another pod is *filtered*, and
its pod stays pending.  Pods the scheduler considered and did not place are parked, unless
something was freed while the session was in flight.  Then the defragmenter may act.

With ``park_unschedulable=False`` every pending pod is offered in every session, and a session
starts only after something changed (an arrival, a freeing event, or a session that bound,
refused or lost anything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import Scheduler, SchedulingDecision, indexing
from gpudefrag.policies.gpu_choice import choose_gpus_best
from gpudefrag.sim.core import SimCore
from gpudefrag.sim.events import DECISION_DONE, SESSION_START, Payload, PlacementLog
from gpudefrag.sim.lifecycle import PENDING
from gpudefrag.sim.views import SessionCycle


class _InFlight(NamedTuple):
    free_epoch: int
    considered: list[int]
    placements: list[Placement | None]
    first: list[tuple[int, Placement]]


def fit_on_node(state: ClusterState, node: int, pod: PodSpec) -> tuple[int, ...] | None:
    """GPUs (``best`` rule) for ``pod`` on ``node`` if it fits there, else ``None``."""
    try:
        gpus = choose_gpus_best(state.gpu_milli_left[node], int(state.gpu_count[node]), pod)
    except ValueError:
        return None
    return gpus if state.why_not_fits(node, pod, gpus) is None else None


class Sessions:
    def __init__(
        self, core: SimCore, scheduler: Scheduler, act: Callable[[float], tuple[PlacementLog, ...]]
    ) -> None:
        """``act(t)`` runs after a session that leaves pods pending (the defragmenter's turn)."""
        self._core = core
        self.scheduler = scheduler
        self._act = act
        self.busy = False
        self.scheduled = False
        self._in_flight: dict[int, _InFlight] = {}
        self.latencies_s: list[float] = []
        self._indexed = indexing(scheduler)
        self._saved: ClusterState | None = None  # the masked nodes' rows while masked

    def maybe_start(self, t: float) -> None:
        core = self._core
        if self.busy or self.scheduled or not core.waitq.active:
            return
        if not core.config.park_unschedulable and not core.waitq.dirty:
            return
        if core.config.hold_reserved_pods and not core.waitq.dirty and self._only_held_pods():
            return  # nothing to offer, and nothing freed that a held pod could now take
        self.scheduled = True
        core.events.push(t, SESSION_START, (core.new_id(),))

    def _only_held_pods(self) -> bool:
        held = self._core.reservations.node_of_pod
        return all(i in held for i in self._core.waitq.active)

    def _reserved_first(self) -> tuple[list[tuple[int, Placement]], list[int]]:
        """(reserved pods that fit their node now, with their placements; the other reserved
        nodes, ascending).  A node's fit depends on that node alone, so each is judged on the
        simulator's state."""
        core = self._core
        state = core.ledger.state
        first: list[tuple[int, Placement]] = []
        masked: list[int] = []
        for node in sorted(core.reservations.by_node):
            pod = core.reservations.by_node[node].pod
            spec = core.specs[pod]
            gpus = fit_on_node(state, node, spec)
            if gpus is None:
                masked.append(node)
            else:
                first.append((pod, Placement(node, gpus, spec)))
        return first, masked

    def _decide(
        self, t: float, first: list[tuple[int, Placement]], masked: list[int], offered: list[int]
    ) -> SchedulingDecision:
        """The scheduler's decision on the simulator's state with ``masked`` masked and
        ``first`` bound, both undone before this returns (module docstring)."""
        core = self._core
        state = core.ledger.state
        if self._indexed is not None:
            self._indexed.attach(state)  # once: attaching the state already indexed is a no-op
        hidden = np.array(masked, dtype=np.int64)
        if hidden.size:
            if self._saved is None or self._saved.num_nodes != state.num_nodes:
                self._saved = state.copy()
            self._saved.take_rows(state, hidden)
            state.mask_many(hidden)
        bound: list[Placement] = []
        try:
            for _, p in first:
                state.bind(p)
                bound.append(p)
            return self.scheduler.decide(SessionCycle(core, t, state, offered))
        finally:
            for p in reversed(bound):
                state.unbind(p)
            if hidden.size:
                assert self._saved is not None
                state.take_rows(self._saved, hidden)

    def on_start(self, t: float, payload: tuple[int]) -> tuple[int, int, int]:
        (sid,) = payload
        core = self._core
        self.scheduled = False
        self.busy, core.waitq.dirty = True, False
        first, masked = self._reserved_first()
        if core.config.hold_reserved_pods:
            skip: set[int] | dict[int, int] = core.reservations.node_of_pod
        else:
            skip = {pod for pod, _ in first}
        offered = core.waitq.in_order({i for i in core.waitq.active if i not in skip})
        decision = self._decide(t, first, masked, offered)
        considered = offered[: decision.considered]
        placements = self._aligned(decision, offered)
        latency = core.config.latency.latency(decision.considered, decision.deterministic_s)
        self._in_flight[sid] = _InFlight(core.waitq.free_epoch, considered, placements, first)
        core.counters.sessions += 1
        if core.in_window(t):
            self.latencies_s.append(float(latency))
        core.events.push(t + float(latency), DECISION_DONE, (sid,))
        return (sid, len(considered), len(first))

    def _aligned(self, decision: SchedulingDecision, offered: list[int]) -> list[Placement | None]:
        """The decision's placements aligned with the considered pods; a malformed decision
        raises ``ValueError`` naming the scheduler."""
        name = self.scheduler.name
        if not 0 <= decision.considered <= len(offered):
            raise ValueError(f"scheduler {name} considered {decision.considered} of {len(offered)} pods")
        if not (decision.deterministic_s >= 0 and np.isfinite(decision.deterministic_s)):
            raise ValueError(f"scheduler {name} reported work {decision.deterministic_s!r} s")
        considered = offered[: decision.considered]
        out: list[Placement | None] = [None] * decision.considered
        k = 0  # binds usually come in queue order: one pass; out of order, a lookup
        position: dict[int, int] | None = None
        for b in decision.binds:
            while k < len(considered) and considered[k] != b.pod_id:
                k += 1
            if k == len(considered):
                position = position or {pod: j for j, pod in enumerate(considered)}
                k = position.get(b.pod_id, -1)
            if k < 0 or out[k] is not None:
                raise ValueError(f"scheduler {name} returned a bind for pod {b.pod_id}, not offered")
            if b.placement.pod != self._core.specs[b.pod_id]:
                raise ValueError(
                    f"scheduler {name} returned a placement of {b.placement.pod.name!r} for pod "
                    f"{self._core.specs[b.pod_id].name!r}"
                )
            out[k] = b.placement
        return out

    def on_done(self, t: float, payload: tuple[int]) -> Payload:
        (sid,) = payload
        core = self._core
        flight = self._in_flight.pop(sid)
        self.busy = False
        binds = [core.start_pod(pod, p, t) for pod, p in flight.first if core.fits(p)]
        unplaced, changed = self._land(flight, binds, t)
        if core.config.park_unschedulable and core.waitq.free_epoch == flight.free_epoch:
            for pod in unplaced:  # nothing was freed since the snapshot: they cannot fit yet
                core.waitq.park(pod)
        if binds or changed:
            core.waitq.dirty = True
        moves: tuple[PlacementLog, ...] = ()
        if len(core.waitq):
            moves = self._act(t)
        self.maybe_start(t)
        return (sid, tuple(binds), moves)

    def _land(self, flight: _InFlight, binds: list[PlacementLog], t: float) -> tuple[list[int], bool]:
        """Revalidate and bind the considered pods' placements; (unplaced pods, anything refused)."""
        core = self._core
        phase = core.lifecycle.phase
        unplaced: list[int] = []
        changed = False
        for pod, p in zip(flight.considered, flight.placements):
            if phase[pod] != PENDING:
                continue
            if p is None:
                unplaced.append(pod)
                continue
            res = core.reservations.by_node.get(p.node)
            if res is not None and res.pod != pod:
                core.counters.reservation_filtered += 1
                changed = True
            elif not core.fits(p):
                core.counters.bind_conflicts += 1
                changed = True
            else:
                binds.append(core.start_pod(pod, p, t))
        return unplaced, changed
