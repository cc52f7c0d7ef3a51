"""The time-driven simulator: arrivals, a busy scheduler, completions, migrations.

Pods arrive (ARRIVAL), wait in the :class:`~gpudefrag.sim.waitqueue.WaitQueue`, are placed by
scheduling sessions (:mod:`~gpudefrag.sim.sessions`), run, and complete (COMPLETION).  After a
session that leaves pods pending, the defragmenter may move running pods
(:mod:`~gpudefrag.sim.migrations`) and reserve the nodes it frees
(:mod:`~gpudefrag.sim.reservations`).  Deciders see the run only through the port
(:mod:`gpudefrag.model.port`, implemented in :mod:`~gpudefrag.sim.views`).

:class:`Simulator` wires the components through their constructors and owns what is shared:
the event engine and log, the pods' specs and lifecycle (:mod:`~gpudefrag.sim.lifecycle`), the
running pods (:mod:`~gpudefrag.sim.running`), the ledger (:mod:`~gpudefrag.sim.ledger`, the only
path to bind and unbind) and the typed counters.  Events of equal time run in the order of
:class:`~gpudefrag.sim.events.Event`, then first in, first out; each processed event is hashed
into the event log, then shown to the optional hook and to the invariant checker
(:mod:`~gpudefrag.sim.invariants`).  A stale event (a superseded completion, an ended
reservation) is dropped unlogged.  Metrics: :mod:`~gpudefrag.sim.results`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.port import Defragmenter, Scheduler
from gpudefrag.sim.config import TimedConfig
from gpudefrag.sim.core import SimCore
from gpudefrag.sim.engine import run_events
from gpudefrag.sim.events import ARRIVAL, Event, Payload, PlacementLog
from gpudefrag.sim.invariants import InvariantChecker
from gpudefrag.sim.lifecycle import COMPLETED, PENDING, REJECTED
from gpudefrag.sim.migrations import Migrations
from gpudefrag.sim.results import TimedResult, build_result
from gpudefrag.sim.sessions import Sessions
from gpudefrag.sim.views import ClusterView, TrueRuntimes
from gpudefrag.workloads.synthetic import SyntheticWorkload

Hook = Callable[["Simulator", float, int, Payload], None]
Handler = Callable[[float, Any], Payload | None]


class Simulator:
    """One run (module docstring): build it, then ``run(defragmenter)`` once.

    The components are reachable for tests and hooks: ``core`` and, the same objects,
    ``ledger``, ``waitq``, ``lifecycle``, ``reservations``, ``counters``, ``running``.
    """

    def __init__(
        self,
        cluster: ClusterState,
        workload: SyntheticWorkload,
        scheduler: Scheduler,
        config: TimedConfig | None = None,
        hook: Hook | None = None,
    ) -> None:
        self.config = config = config or TimedConfig()
        self.core = core = SimCore(cluster, workload, config)
        self.scheduler, self.hook = scheduler, hook
        self.ledger, self.waitq, self.lifecycle = core.ledger, core.waitq, core.lifecycle
        self.reservations, self.counters, self.running = core.reservations, core.counters, core.running
        self.true_runtimes = TrueRuntimes(core)
        """The oracle run-time estimator (true run times), for experiments only."""
        self.migrations = Migrations(core)
        self.defragmenter: Defragmenter | None = None
        self.sessions = Sessions(core, scheduler, self._defrag_turn)
        self._check = InvariantChecker(core, config.full_check_every) if config.check_invariants else None

    # ------------------------------------------------------------------ run
    def run(self, defragmenter: Defragmenter | None = None) -> TimedResult:
        """Simulate to the horizon with ``defragmenter`` acting after sessions."""
        self.defragmenter = defragmenter
        self.scheduler.reset()
        started = time.perf_counter()
        area, whole_area, span = self._loop(self._handlers())
        wall = time.perf_counter() - started
        return build_result(
            self.core, self.scheduler.name, self.sessions.latencies_s, area, whole_area, span, wall
        )

    def _defrag_turn(self, t: float) -> tuple[PlacementLog, ...]:
        """The defragmenter's turn after a session that leaves pods pending: its actions, run."""
        if self.defragmenter is None:
            return ()
        return self.migrations.execute(self.defragmenter.plan(ClusterView(self.core, t)), t)

    def _handlers(self) -> tuple[Handler, ...]:
        """The handler of each event class, indexed by the class."""
        by_event: dict[Event, Handler] = {
            Event.COMPLETION: self._on_completion,
            Event.EVICT_DONE: self._then_session(self.migrations.on_evict_done),
            Event.RESTART_DONE: self.migrations.on_restart_done,
            Event.RESERVATION_EXPIRY: self._on_reservation_expiry,
            Event.DECISION_DONE: self.sessions.on_done,
            Event.ARRIVAL: self._on_arrival,
            Event.SESSION_START: self.sessions.on_start,
        }
        return tuple(by_event[e] for e in Event)

    def _then_session(self, handler: Handler) -> Handler:
        """``handler``, then a session if one may start (not after a stale event)."""
        maybe_start = self.sessions.maybe_start

        def wrapped(t: float, payload: Any) -> Payload | None:
            logged = handler(t, payload)
            if logged is not None:
                maybe_start(t)
            return logged

        return wrapped

    def _loop(self, handlers: tuple[Handler, ...]) -> tuple[float, float, float]:
        """The run on the event loop (every event up to the horizon, those at it included);
        (allocated GPU milli x s, whole free GPU milli x s, window s)."""
        core = self.core
        w, q, ledger, touched = core.workload, core.events, core.ledger, core.touched
        state = ledger.state
        H, W = float(w.horizon_s), float(w.warmup_s)
        if core.n_pods:
            q.push(float(w.arrival_s[0]), ARRIVAL, (0,))
        areas = [0.0, 0.0, W]  # allocated, whole free, the time they were counted to

        def advance(t: float) -> None:
            last = areas[2]
            if t > last:
                areas[0] += state.used_gpu_milli * (t - last)
                areas[1] += ledger.whole_free_gpus * GPU_MILLI_PER_GPU * (t - last)
                areas[2] = t

        def on_event(t: float, cls: int, payload: Any) -> None:
            logged = handlers[cls](t, payload)
            if logged is None:  # a stale event
                return
            core.log.record(t, cls, logged)
            if self.hook is not None:
                self.hook(self, t, cls, logged)
            if self._check is not None:
                self._check(t, cls, payload)
            touched.clear()

        run_events(q, H, on_event, advance, events_at_end=True)
        return areas[0], areas[1], H - W

    # ------------------------------------------------------------------ handlers
    def _on_arrival(self, t: float, payload: tuple[int]) -> tuple[int]:
        (i,) = payload
        core = self.core
        spec = core.workload.pods.pod(i)
        core.arrive(i, spec)
        sid = core.waitq.shape_of[i] = core.waitq.shapes.id_of(spec)
        if core.waitq.shapes.feasible[sid]:
            core.lifecycle.move(i, PENDING)
            core.waitq.add(i)
        else:
            core.lifecycle.move(i, REJECTED)
        if i + 1 < core.n_pods:
            core.events.push(float(core.workload.arrival_s[i + 1]), ARRIVAL, (i + 1,))
        self.sessions.maybe_start(t)
        return (i,)

    def _on_completion(self, t: float, payload: tuple[int, int]) -> tuple[int, int] | None:
        pod, gen = payload
        core = self.core
        r = core.running.get(pod)
        if r is None or r.gen != gen:
            return None
        del core.running[pod]
        core.leave(pod, r.placement.node)
        if r.source is not None:  # finished on the source during the grace period
            core.ledger.unbind(r.source)
            if core.in_window(r.move_start):
                core.counters.migrations_overtaken += 1
                core.counters.gpu_hours_held_twice += (t - r.move_start) * r.gpus_held / 3600.0
        core.ledger.unbind(r.placement)
        core.lifecycle.move(pod, COMPLETED)
        core.completion[pod] = t
        self.sessions.maybe_start(t)
        return (pod, gen)

    def _on_reservation_expiry(self, t: float, payload: tuple[int, int]) -> tuple[int, int] | None:
        res_id, node = payload
        core = self.core
        cur = core.reservations.by_node.get(node)
        if cur is None or cur.res_id != res_id:
            return None
        core.reservations.end(node, "expired", t)
        self.sessions.maybe_start(t)
        return (res_id, node)


def run_timed(
    cluster: ClusterState,
    workload: SyntheticWorkload,
    scheduler: Scheduler,
    defragmenter: Defragmenter | None = None,
    config: TimedConfig | None = None,
    *,
    hook: Hook | None = None,
) -> TimedResult:
    """Simulate ``workload`` on a copy of ``cluster`` until ``workload.horizon_s``.

    Pods already bound on ``cluster`` stay as background load.  ``hook(sim, t, cls, logged)``
    runs after each logged event with what the event log recorded of it, before the invariant
    checks (for tests and event-log files).
    """
    return Simulator(cluster, workload, scheduler, config, hook).run(defragmenter)
