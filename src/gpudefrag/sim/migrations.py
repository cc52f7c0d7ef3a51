"""Migrations in the time-driven simulator: executing a defragmenter's actions, then each
move's eviction (EVICT_DONE) and restart (RESTART_DONE).

Actions run at once, in order (:mod:`gpudefrag.model.port` states their meaning).  Each move is
revalidated first (pod running, not already migrating, not do-not-disrupt; target fits and is
not reserved), together with the reservation it starts, if any (its pod pending, its node in
range and not reserved for another pod, its pod not reserved elsewhere); the first failure
aborts the rest of the list and releases the reservations the list made.  A move binds the pod
on the target at once (it holds both places), unbinds it from the source ``eviction_grace_s``
later and resumes it ``restart_s`` after that.  At eviction its progress falls back to its
last checkpoint, so its completion moves by ``lost work + restart_s``; the lost work includes
the grace period's work unless a checkpoint fell inside it.  GPU-hours lost (work, restart,
the source held twice) are counted for moves started in the metrics window.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudefrag.model.cluster import Placement
from gpudefrag.model.migration import last_checkpoint_work_s
from gpudefrag.model.port import Action, Bind, Move, Release, Reserve
from gpudefrag.sim.core import SimCore
from gpudefrag.sim.events import COMPLETION, EVICT_DONE, RESERVATION_EXPIRY, RESTART_DONE, PlacementLog
from gpudefrag.sim.running import GRACE, RESTART, RUN


class Migrations:
    def __init__(self, core: SimCore) -> None:
        self._core = core

    def execute(self, actions: Sequence[Action], t: float) -> tuple[PlacementLog, ...]:
        """Run a defragmenter's actions; the moves started, as logged ``(pod, node, GPU mask)``."""
        core = self._core
        done: list[PlacementLog] = []
        reserved_before = set(core.reservations.by_node)
        total_moves = sum(1 for a in actions if isinstance(a, Move))
        reserve: Reserve | None = None
        for a in actions:
            if isinstance(a, Reserve):
                if reserve is not None:
                    raise ValueError(f"{reserve} is not followed by the Move actions that free its node")
                reserve = a
            elif isinstance(a, Release):
                if a.node in core.reservations:
                    core.reservations.end(a.node, "released", t)
            elif isinstance(a, Bind):
                raise ValueError("a defragmenter returns Move, Reserve and Release actions, not Bind")
            else:
                why = self._why_not(a, reserve)
                if why is not None:
                    self._abort(why, total_moves - len(done), reserved_before, t)
                    break
                done.append(self._start(a, reserve, t))
                reserve = None
        else:
            if reserve is not None:
                raise ValueError(f"{reserve} is not followed by the Move actions that free its node")
        return tuple(done)

    def _abort(self, why: str, not_run: int, reserved_before: set[int], t: float) -> None:
        core = self._core
        if core.in_window(t):
            core.counters.abort(why, not_run)
        # The list will not free its nodes: release the reservations it made.
        for node in set(core.reservations.by_node) - reserved_before:
            core.reservations.end(node, "released", t)

    def _why_not(self, mv: Move, reserve: Reserve | None) -> str | None:
        core = self._core
        r = core.running.get(mv.pod_id)
        if r is None:
            return "not_running"
        if r.phase != RUN:
            return "already_migrating"
        if core.workload.do_not_disrupt[mv.pod_id]:
            return "do_not_disrupt"
        if mv.to_node in core.reservations:
            return "target_reserved"
        if core.ledger.state.why_not_fits(mv.to_node, r.placement.pod, tuple(mv.to_gpus)) is not None:
            return "target_does_not_fit"
        if reserve is None:
            return None
        b = reserve.pod_id
        if not 0 <= b < core.n_pods or not core.lifecycle.is_pending(b):
            return "reservation_pod_not_pending"
        if not 0 <= reserve.node < core.ledger.state.num_nodes:
            return "reservation_node_out_of_range"
        return core.reservations.why_not(reserve.node, b)

    def _start(self, mv: Move, reserve: Reserve | None, t: float) -> PlacementLog:
        core = self._core
        pod = int(mv.pod_id)
        r = core.running[pod]
        target = Placement(int(mv.to_node), tuple(int(g) for g in mv.to_gpus), r.placement.pod)
        core.ledger.bind(target)
        core.leave(pod, r.placement.node)
        core.run_on(pod, target.node)
        r.source, r.placement, r.phase, r.move_start = r.placement, target, GRACE, t
        r.move_id = core.new_id()
        core.touched.pods.add(pod)
        core.events.push(t + core.config.migration.eviction_grace_s, EVICT_DONE, (pod, r.move_id))
        if core.in_window(t):
            core.counters.migrations_executed += 1
        if reserve is not None and int(reserve.node) not in core.reservations:
            node, rid = int(reserve.node), core.new_id()
            expiry = core.reservations.make(node, int(reserve.pod_id), t, rid)
            core.events.push(expiry, RESERVATION_EXPIRY, (rid, node))
        return (pod, target.node, sum(1 << g for g in target.gpus))

    def on_evict_done(self, t: float, payload: tuple[int, int]) -> tuple[int, int] | None:
        pod, move_id = payload
        core = self._core
        r = core.running.get(pod)
        if r is None or r.move_id != move_id or r.phase != GRACE or r.source is None:
            return None
        core.ledger.unbind(r.source)
        done = r.work_done(t)
        w = core.workload
        ckpt = last_checkpoint_work_s(
            done, float(w.checkpoint_interval_s[pod]), float(w.checkpoint_phase_s[pod])
        )
        if core.in_window(r.move_start):
            g = r.gpus_held
            core.counters.gpu_hours_lost_work += (done - ckpt) * g / 3600.0
            core.counters.gpu_hours_held_twice += (t - r.move_start) * g / 3600.0
        r.progress, r.phase, r.source = ckpt, RESTART, None
        r.gen += 1  # the completion scheduled before the move is void
        core.touched.pods.add(pod)
        core.events.push(t + core.config.migration.restart_s, RESTART_DONE, (pod, move_id))
        return (pod, move_id)

    def on_restart_done(self, t: float, payload: tuple[int, int]) -> tuple[int, int] | None:
        pod, move_id = payload
        core = self._core
        r = core.running.get(pod)
        if r is None or r.move_id != move_id or r.phase != RESTART:
            return None
        r.phase, r.resumed_at = RUN, t
        if core.in_window(r.move_start):
            core.counters.gpu_hours_lost_restart += core.config.migration.restart_s * r.gpus_held / 3600.0
        core.touched.pods.add(pod)
        core.events.push(t + float(core.workload.duration_s[pod]) - r.progress, COMPLETION, (pod, r.gen))
        return (pod, move_id)
