"""Running pods, the defragmenter's view, and migrations in the time-driven simulator.

:class:`_Run` is a running pod's record (progress, move phase); :class:`SimView` is what the
defragmenter reads; :class:`MigrationMixin` holds the ``_Sim`` methods that execute a plan
and carry each move through its eviction (EVICT_DONE) and restart (RESTART_DONE).  See the
:mod:`gpudefrag.sim.timed` docstring for the rules.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.sim.timed_types import (
    COMPLETION,
    EVICT_DONE,
    PENDING,
    RESERVATION_EXPIRY,
    RESTART_DONE,
    Move,
    PendingPod,
    RunningPod,
)

if TYPE_CHECKING:
    from gpudefrag.sim.timed import _Sim


# ----------------------------------------------------------------------------- running pods
class _Run:
    """A running pod.  ``placement`` is where it is (the target once a move started);
    ``source`` is the place it still holds during the grace period."""

    __slots__ = (
        "gen",
        "move_id",
        "move_start",
        "phase",
        "placement",
        "progress",
        "resumed_at",
        "source",
        "start_s",
    )

    def __init__(self, placement: Placement, now: float) -> None:
        self.placement = placement
        self.source: Placement | None = None
        self.start_s = now
        self.progress = 0.0  # work done at ``resumed_at``
        self.resumed_at = now
        self.phase = "run"  # run | grace | restart
        self.gen = 0
        self.move_id = -1
        self.move_start = 0.0

    def work_done(self, now: float) -> float:
        return self.progress if self.phase == "restart" else self.progress + (now - self.resumed_at)


def _last_checkpoint(work: float, interval: float, phase: float) -> float:
    """The last checkpoint mark (``phase + k * interval``) at or before ``work``; 0 if none."""
    if work < phase or interval <= 0:
        return 0.0
    return phase + np.floor((work - phase) / interval) * interval


# ----------------------------------------------------------------------------- the view
class SimView:
    """Read access for the defragmenter (lists built on first use; ``state`` is a copy of the
    simulator's, which the defragmenter may change while it plans)."""

    def __init__(self, sim: _Sim, now_s: float) -> None:
        self._sim = sim
        self.now_s = now_s
        self.config = sim.config
        self.workload = sim.w
        self.reservations: dict[int, int] = {n: r[0] for n, r in sim.reservations.items()}

    @cached_property
    def state(self) -> ClusterState:
        return self._sim.state.copy()

    @cached_property
    def pending(self) -> list[PendingPod]:
        sim = self._sim
        ids = sorted(list(sim.active) + list(sim.parked_of), key=sim.order_key)
        return [
            PendingPod(i, sim.specs[i], float(sim.w.arrival_s[i]), int(sim.w.priority[i]), i in sim.parked_of)
            for i in ids
        ]

    @cached_property
    def running(self) -> list[RunningPod]:
        sim, w, now = self._sim, self._sim.w, self.now_s
        out = []
        for i, r in sim.running.items():
            done = r.work_done(now)
            interval, phase = float(w.checkpoint_interval_s[i]), float(w.checkpoint_phase_s[i])
            out.append(
                RunningPod(
                    i,
                    r.placement.pod,
                    r.placement.node,
                    r.placement.gpus,
                    r.start_s,
                    float(w.duration_s[i]) - done,
                    done - _last_checkpoint(done, interval, phase),
                    interval,
                    phase,
                    bool(w.do_not_disrupt[i]),
                    r.phase != "run",
                )
            )
        return out


def _gpus(r: _Run) -> float:
    return r.placement.pod.total_gpu_milli / GPU_MILLI_PER_GPU


# ----------------------------------------------------------------------------- migrations
class MigrationMixin:
    """The simulator's migration handlers (mixed into :class:`gpudefrag.sim.timed._Sim`)."""

    def _on_evict_done(self, t: float, payload: tuple) -> tuple | None:
        pod, move_id = payload
        r = self.running.get(pod)
        if r is None or r.move_id != move_id or r.phase != "grace":
            return None
        self._unbind(r.source)
        done = r.work_done(t)
        ckpt = _last_checkpoint(
            done, float(self.w.checkpoint_interval_s[pod]), float(self.w.checkpoint_phase_s[pod])
        )
        if self._in_window(r.move_start):
            g = _gpus(r)
            self.c["gpu_hours_lost_work"] += (done - ckpt) * g / 3600.0
            self.c["gpu_hours_held_twice"] += (t - r.move_start) * g / 3600.0
        r.progress, r.phase, r.source = ckpt, "restart", None
        r.gen += 1  # the completion scheduled before the move is void
        self.touched_pods.add(pod)
        self.queue.push(t + self.config.restart_s, RESTART_DONE, (pod, move_id))
        self._maybe_start_session(t)
        return (pod, move_id)

    def _on_restart_done(self, t: float, payload: tuple) -> tuple | None:
        pod, move_id = payload
        r = self.running.get(pod)
        if r is None or r.move_id != move_id or r.phase != "restart":
            return None
        r.phase, r.resumed_at = "run", t
        if self._in_window(r.move_start):
            self.c["gpu_hours_lost_restart"] += self.config.restart_s * _gpus(r) / 3600.0
        self.touched_pods.add(pod)
        self.queue.push(t + float(self.w.duration_s[pod]) - r.progress, COMPLETION, (pod, r.gen))
        return (pod, move_id)

    def _run_plan(self, t: float) -> tuple:
        plan = list(self.defrag.plan(SimView(self, t), t) or ())
        done = []
        reserved_before = set(self.reservations)
        for k, mv in enumerate(plan):
            why = self._why_not_move(mv)
            if why is not None:
                if self._in_window(t):
                    self.c["migrations_aborted"] += len(plan) - k
                    self.c["plans_aborted"] += 1
                    self.abort_reasons[why] = self.abort_reasons.get(why, 0) + 1
                # The plan will not free its node: release any reservation it made.
                for node in set(self.reservations) - reserved_before:
                    self.c["reservations_released"] += 1
                    self._end_reservation(node)
                break
            done.append(self._start_move(mv, t))
        return tuple(done)

    def _why_not_move(self, mv: Move) -> str | None:
        r = self.running.get(mv.pod_id)
        if r is None:
            return "not_running"
        if r.phase != "run":
            return "already_migrating"
        if self.w.do_not_disrupt[mv.pod_id]:
            return "do_not_disrupt"
        if mv.to_node in self.reservations:
            return "target_reserved"
        if self.state.why_not_fits(mv.to_node, r.placement.pod, tuple(mv.to_gpus)) is not None:
            return "target_does_not_fit"
        if mv.reserve_node is not None:
            b = mv.for_pod_id
            if b is None or not 0 <= b < self.n or self.status[b] != PENDING:
                return "reservation_pod_not_pending"
            if not 0 <= mv.reserve_node < self.state.num_nodes:
                return "reservation_node_out_of_range"
            if self.reservations.get(mv.reserve_node, (b,))[0] != b:
                return "node_reserved_for_another_pod"
            if self.res_of_pod.get(b, mv.reserve_node) != mv.reserve_node:
                return "pod_reserved_elsewhere"
        return None

    def _start_move(self, mv: Move, t: float) -> tuple[int, int, int]:
        pod = int(mv.pod_id)
        r = self.running[pod]
        target = Placement(int(mv.to_node), tuple(int(g) for g in mv.to_gpus), r.placement.pod)
        self._bind(target)
        r.source, r.placement, r.phase, r.move_start = r.placement, target, "grace", t
        r.move_id = self._new_id()
        self.touched_pods.add(pod)
        self.queue.push(t + self.config.eviction_grace_s, EVICT_DONE, (pod, r.move_id))
        if self._in_window(t):
            self.c["migrations_executed"] += 1
        if mv.reserve_node is not None and int(mv.reserve_node) not in self.reservations:
            node, blocked, rid = int(mv.reserve_node), int(mv.for_pod_id), self._new_id()
            self.reservations[node] = (blocked, t + self.config.reservation_timeout_s, rid)
            self.res_of_pod[blocked] = node
            self.c["reservations_made"] += 1
            self.queue.push(t + self.config.reservation_timeout_s, RESERVATION_EXPIRY, (rid, node))
        return (pod, target.node, sum(1 << g for g in target.gpus))
