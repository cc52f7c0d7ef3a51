"""The time-driven simulator (issue 4): arrivals, a busy scheduler, completions, migrations.

**Pods.** Every arrived pod is in exactly one of PENDING, RUNNING (a migrating pod stays
RUNNING), COMPLETED or REJECTED.  A pod is rejected at arrival when it fits no node of the
cluster even when the cluster is empty.

**Events** (equal times run in this class order, then FIFO): COMPLETION, EVICT_DONE,
RESTART_DONE, RESERVATION_EXPIRY, DECISION_DONE, ARRIVAL, SESSION_START.  Whatever frees
resources happens before a decision lands, arrivals come after, and a session starts only once
every other event of its instant has been handled.

**Busy-server scheduler.** A session starts when the scheduler is idle and some pending pod is
*active* (below).  It snapshots the state (a copy), asks ``scheduler.decide`` about the active
pods (priority descending, then arrival order, at most ``scheduler.max_pending``), and the
decisions land at ``now + latency`` (DECISION_DONE), where each is revalidated against the
state of that moment: one that no longer fits is a *bind conflict* and its pod stays pending.
The latency comes from the scheduler's :class:`LatencyModel`.

**Active and parked pods** (Kubernetes' unschedulable queue).  A pod that a session considered
and did not place is *parked*: it is offered again only once resources are freed on a node it
fits (a completion, an eviction, a reservation ending), or at once if anything was freed while
its session was in flight.  For schedulers that place a pod whenever it fits somewhere (every
per-pod policy) this changes nothing but the work done.  ``park_unschedulable=False`` offers
every pending pod in every session and starts a session after an arrival, a freeing event, or
a session that bound, refused or lost anything.

**Migrations** (the defragmenter hook).  After each session that leaves pods pending,
``defragmenter.plan(view, now)`` returns moves (:class:`Move`), executed at once, in order.  Each is
revalidated first (pod running, not already migrating, not do-not-disrupt; target fits and is
not reserved; reservation well formed); the first failure aborts the rest of the plan.  A move
binds the pod on the target at once (it holds both places), unbinds it from the source
``eviction_grace_s`` later (EVICT_DONE) and resumes it ``restart_s`` after that (RESTART_DONE).
The pod keeps running on the source through the grace period; at eviction its progress falls
back to its last checkpoint (work marks ``phase + k * interval``), so its completion moves by
``lost work + restart_s``; the lost work includes the grace period's work unless a checkpoint
fell inside it.  GPU-hours lost = lost work x GPUs and restart time x GPUs, kept apart.

**Reservations.** ``Move.reserve_node`` reserves that node for ``Move.for_pod_id``.  While the
reservation holds: (1) every session first tries the reserved pod on its node (on the snapshot,
GPUs by the ``best`` rule) and, if it fits, decides it there ahead of every other pod; (2) if it
does not fit yet, the node is *masked* in the snapshot the scheduler sees (pod-count limit
reached, nothing left), so nothing else is planned there; (3) at DECISION_DONE any other pod's
placement on a reserved node is refused (``reservation_filtered``; this covers sessions
snapshotted before the reservation existed).  It ends when its pod binds (anywhere) or after
``reservation_timeout_s`` (an expiry).  Masking the whole node is simpler than a phantom pod of
the blocked pod's size and can never hand out what the blocked pod needs; the price is that
the node's remainder may idle for the reservation's short life.

**Invariants**, after every event, on the nodes and pods it touched (on all of them every
``full_check_every`` events): *capacity* (nothing negative or above capacity), *pod-sets* (each
pod in exactly one set), *resource-accounting* (per node, the running pods' requests equal
capacity minus what is left).  A violation raises :class:`InvariantError` naming the event and
the rule.

**Metrics** (:class:`TimedResult`) are taken over the window ``[warmup_s, horizon_s]``; the run
stops at ``horizon_s``.  The GPU capacity not allocated is split, time-averaged, into *whole
free GPUs* (nothing on them) and the free remainders of *shared GPUs* (partly used), so
``gpu_alloc_pct + gpu_idle_whole_pct + gpu_idle_shared_pct = 100``: a remainder on a shared
GPU can serve only pods that share GPUs, however the cluster is rearranged.  Allocation counts
GPUs that migrations waste (work redone after an eviction, a restarting pod's GPUs, the
source held through the grace period); ``gpu_useful_pct`` is ``gpu_alloc_pct`` less that GPU
time, for the moves started in the window, as a share of the window's capacity.

**Modules.**  This module holds the simulator's core (``_Sim``: state, event loop, arrivals,
completions, reservations) and :func:`run_timed`; the rest lives in
:mod:`~gpudefrag.sim.timed_types` (events, configuration, the hook's types, the result),
:mod:`~gpudefrag.sim.schedulers` (the schedulers), :mod:`~gpudefrag.sim.sessions` (sessions),
:mod:`~gpudefrag.sim.migrations` (:class:`SimView`, moves), :mod:`~gpudefrag.sim.parking` (the
unschedulable queue's shapes) and :mod:`~gpudefrag.sim.invariants` (the checks).  Their public
names are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_GPUS_PER_NODE
from gpudefrag.model.pods import PodSpec
from gpudefrag.sim.engine import EventLog, EventQueue
from gpudefrag.sim.invariants import InvariantChecks
from gpudefrag.sim.migrations import MigrationMixin, SimView, _gpus, _Run
from gpudefrag.sim.parking import _Shapes
from gpudefrag.sim.schedulers import BatchScheduler, PolicyScheduler, fit_on_node
from gpudefrag.sim.sessions import SessionMixin
from gpudefrag.sim.timed_types import (
    ARRIVAL,
    COMPLETED,
    COMPLETION,
    DECISION_DONE,
    EVENT_NAMES,
    EVICT_DONE,
    FUTURE,
    PENDING,
    REJECTED,
    RESERVATION_EXPIRY,
    RESTART_DONE,
    RUNNING,
    SESSION_START,
    STATUS_NAMES,
    Defragmenter,
    InvariantError,
    LatencyModel,
    Move,
    PendingPod,
    RunningPod,
    Scheduler,
    TimedConfig,
    TimedResult,
    percentile,
)
from gpudefrag.workloads.synthetic import SyntheticWorkload

__all__ = [
    "ARRIVAL",
    "COMPLETED",
    "COMPLETION",
    "DECISION_DONE",
    "EVENT_NAMES",
    "EVICT_DONE",
    "FUTURE",
    "PENDING",
    "REJECTED",
    "RESERVATION_EXPIRY",
    "RESTART_DONE",
    "RUNNING",
    "SESSION_START",
    "STATUS_NAMES",
    "BatchScheduler",
    "Defragmenter",
    "InvariantError",
    "LatencyModel",
    "Move",
    "PendingPod",
    "PolicyScheduler",
    "RunningPod",
    "Scheduler",
    "SimView",
    "TimedConfig",
    "TimedResult",
    "fit_on_node",
    "percentile",
    "run_timed",
]


# ----------------------------------------------------------------------------- the simulator
class _Sim(SessionMixin, MigrationMixin, InvariantChecks):
    """One run's mutable state; the handlers below are the only code that changes it."""

    def __init__(
        self, cluster: ClusterState, w: SyntheticWorkload, scheduler, defrag, config: TimedConfig, hook
    ) -> None:
        self.state = s = cluster.copy()
        self.w, self.scheduler, self.defrag, self.config, self.hook = w, scheduler, defrag, config, hook
        self.n = n = len(w)
        self.status = np.zeros(n, dtype=np.int8)
        self.n_status = [n, 0, 0, 0, 0]
        self.first_bind = np.full(n, np.nan)
        self.first_node = np.full(n, -1, dtype=np.int64)
        self.completion = np.full(n, np.nan)
        self.specs: list[PodSpec | None] = [None] * n
        self.shapes = _Shapes(s)
        self.shape_of = np.full(n, -1, dtype=np.int64)
        self.neg_prio = (-np.asarray(w.priority, dtype=np.int64)).tolist()
        self.active: set[int] = set()
        self.parked_of: dict[int, int] = {}
        self.running: dict[int, _Run] = {}
        self.reservations: dict[int, tuple[int, float, int]] = {}  # node -> (pod, expiry, id)
        self.res_of_pod: dict[int, int] = {}
        self.queue, self.log = EventQueue(), EventLog()
        self.busy = self.session_scheduled = False
        self.dirty = False
        self.free_epoch = 0
        self.sessions: dict[int, tuple] = {}
        self.next_id = 0
        self.latencies: list[float] = []
        self.c: dict[str, float] = dict.fromkeys(
            (
                "bind_conflicts",
                "reservation_filtered",
                "reservations_made",
                "reservations_fulfilled",
                "reservations_released",
                "reservation_expiries",
                "migrations_executed",
                "migrations_aborted",
                "plans_aborted",
                "migrations_overtaken",
                "gpu_hours_lost_work",
                "gpu_hours_lost_restart",
                "gpu_hours_held_twice",
                "sessions",
            ),
            0,
        )
        self.abort_reasons: dict[str, int] = {}
        slots = np.arange(MAX_GPUS_PER_NODE)[None, :]
        self.slot_cap = np.where(slots < s.gpu_count[:, None], GPU_MILLI_PER_GPU, 0).astype(np.int64)
        # what the simulator placed (plus any load the cluster came with, as background)
        self.exp_cpu = s.cpu_capacity_milli - s.cpu_milli_left
        self.exp_mem = s.memory_capacity_mib - s.memory_mib_left
        self.exp_gpu = self.slot_cap - s.gpu_milli_left
        self.whole_free_gpus = int((s.gpu_milli_left == GPU_MILLI_PER_GPU).sum())
        self.touched_nodes: set[int] = set()
        self.touched_pods: set[int] = set()
        self.handlers = (
            self._on_completion,
            self._on_evict_done,
            self._on_restart_done,
            self._on_reservation_expiry,
            self._on_decision_done,
            self._on_arrival,
            self._on_session_start,
        )

    def order_key(self, i: int) -> tuple[int, int]:
        return (self.neg_prio[i], i)

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _in_window(self, t: float) -> bool:
        return t >= self.w.warmup_s

    # ------------------------------------------------------------------ run
    def run(self) -> tuple[float, float, float]:
        """Run to the horizon; (allocated GPU milli x s, whole free GPU milli x s, window s)."""
        w, q = self.w, self.queue
        H, W = float(w.horizon_s), float(w.warmup_s)
        if self.n:
            q.push(float(w.arrival_s[0]), ARRIVAL, (0,))
        area, whole_area, last = 0.0, 0.0, W
        check = self.config.check_invariants
        while len(q) and q.peek_time() <= H:
            t, cls, payload = q.pop()
            if t > last:
                area += self.state.used_gpu_milli * (t - last)
                whole_area += self.whole_free_gpus * GPU_MILLI_PER_GPU * (t - last)
                last = t
            logged = self.handlers[cls](t, payload)
            if logged is None:  # a stale event (superseded completion, ended reservation...)
                continue
            self.log.record(t, cls, logged)
            if self.hook is not None:
                self.hook(self, t, cls, payload)
            if check:
                self._check(t, cls, payload)
            self.touched_nodes.clear()
            self.touched_pods.clear()
        if last < H:
            area += self.state.used_gpu_milli * (H - last)
            whole_area += self.whole_free_gpus * GPU_MILLI_PER_GPU * (H - last)
        return area, whole_area, H - W

    # ------------------------------------------------------------------ state changes
    def _set_status(self, i: int, status: int) -> None:
        self.n_status[self.status[i]] -= 1
        self.status[i] = status
        self.n_status[status] += 1
        self.touched_pods.add(i)

    def _whole_free(self, node: int, gpus: tuple[int, ...]) -> int:
        """How many of ``gpus`` on ``node`` are wholly free now."""
        left = self.state.gpu_milli_left
        return sum(1 for g in gpus if left[node, g] == GPU_MILLI_PER_GPU)

    def _bind(self, p: Placement) -> None:
        self.whole_free_gpus -= self._whole_free(p.node, p.gpus)
        self.state.bind(p)
        self.whole_free_gpus += self._whole_free(p.node, p.gpus)
        pod, n = p.pod, p.node
        self.exp_cpu[n] += pod.cpu_milli
        self.exp_mem[n] += pod.memory_mib
        for g in p.gpus:
            self.exp_gpu[n, g] += pod.gpu_milli
        self.touched_nodes.add(n)

    def _unbind(self, p: Placement) -> None:
        self.whole_free_gpus -= self._whole_free(p.node, p.gpus)
        self.state.unbind(p)
        self.whole_free_gpus += self._whole_free(p.node, p.gpus)
        pod, n = p.pod, p.node
        self.exp_cpu[n] -= pod.cpu_milli
        self.exp_mem[n] -= pod.memory_mib
        for g in p.gpus:
            self.exp_gpu[n, g] -= pod.gpu_milli
        self.touched_nodes.add(n)
        self._freed(n)

    def _freed(self, node: int) -> None:
        """Resources became available on ``node``: wake the parked pods that fit it now."""
        self.free_epoch += 1
        self.dirty = True
        if not self.parked_of:
            return
        sh = self.shapes
        for sid in sh.fitting(self.state, node):
            for pod in sh.members[sid]:
                del self.parked_of[pod]
                self.active.add(pod)
                self.touched_pods.add(pod)
            sh.members[sid] = {}
            sh.parked[sid] = 0

    def _park(self, pod: int) -> None:
        sid = int(self.shape_of[pod])
        self.active.discard(pod)
        self.parked_of[pod] = sid
        self.shapes.members[sid][pod] = None
        self.shapes.parked[sid] += 1

    def _unpend(self, pod: int) -> None:
        sid = self.parked_of.pop(pod, None)
        if sid is None:
            self.active.discard(pod)
        else:
            del self.shapes.members[sid][pod]
            self.shapes.parked[sid] -= 1

    def _start_pod(self, pod: int, p: Placement, t: float) -> tuple[int, int, int]:
        self._bind(p)
        self._unpend(pod)
        self._set_status(pod, RUNNING)
        self.first_bind[pod] = t
        self.first_node[pod] = p.node
        self.running[pod] = _Run(p, t)
        self.queue.push(t + float(self.w.duration_s[pod]), COMPLETION, (pod, 0))
        node = self.res_of_pod.get(pod)
        if node is not None:
            self.c["reservations_fulfilled"] += node == p.node
            self._end_reservation(node)
        return (pod, p.node, sum(1 << g for g in p.gpus))

    def _end_reservation(self, node: int) -> None:
        pod = self.reservations.pop(node)[0]
        del self.res_of_pod[pod]
        self._freed(node)  # unmasked for everybody else

    # ------------------------------------------------------------------ handlers
    def _on_arrival(self, t: float, payload: tuple) -> tuple:
        (i,) = payload
        spec = self.specs[i] = self.w.pods.pod(i)
        sid = self.shape_of[i] = self.shapes.id_of(spec)
        if self.shapes.feasible[sid]:
            self._set_status(i, PENDING)
            self.active.add(i)
            self.dirty = True
        else:
            self._set_status(i, REJECTED)
        if i + 1 < self.n:
            self.queue.push(float(self.w.arrival_s[i + 1]), ARRIVAL, (i + 1,))
        self._maybe_start_session(t)
        return (i,)

    def _on_completion(self, t: float, payload: tuple) -> tuple | None:
        pod, gen = payload
        r = self.running.get(pod)
        if r is None or r.gen != gen:
            return None
        del self.running[pod]
        if r.phase == "grace":  # finished on the source before the eviction
            self._unbind(r.source)
            if self._in_window(r.move_start):
                self.c["migrations_overtaken"] += 1
                self.c["gpu_hours_held_twice"] += (t - r.move_start) * _gpus(r) / 3600.0
        self._unbind(r.placement)
        self._set_status(pod, COMPLETED)
        self.completion[pod] = t
        self._maybe_start_session(t)
        return (pod, gen)

    def _on_reservation_expiry(self, t: float, payload: tuple) -> tuple | None:
        res_id, node = payload
        cur = self.reservations.get(node)
        if cur is None or cur[2] != res_id:
            return None
        self.c["reservation_expiries"] += 1
        self._end_reservation(node)
        self._maybe_start_session(t)
        return (res_id, node)


# ----------------------------------------------------------------------------- entry point
def run_timed(
    cluster: ClusterState,
    workload: SyntheticWorkload,
    scheduler: Scheduler,
    defragmenter: Defragmenter | None = None,
    config: TimedConfig | None = None,
    *,
    hook: Callable[[Any, float, int, tuple], None] | None = None,
) -> TimedResult:
    """Simulate ``workload`` on a copy of ``cluster`` until ``workload.horizon_s``.

    Pods already bound on ``cluster`` stay as background load.  ``hook(sim, t, cls, payload)``
    runs after each event, before the invariant checks (for tests).
    """
    config = config or TimedConfig()
    if hasattr(scheduler, "reset"):
        scheduler.reset()
    started = time.perf_counter()
    sim = _Sim(cluster, workload, scheduler, defragmenter, config, hook)
    area, whole_area, span = sim.run()
    return _result(sim, area, whole_area, span, time.perf_counter() - started)


def _result(sim: _Sim, area: float, whole_area: float, span: float, wall: float) -> TimedResult:
    w, st = sim.w, sim.status
    H, W = float(w.horizon_s), float(w.warmup_s)
    window = (w.arrival_s >= W) & (w.arrival_s <= H) & (st != FUTURE) & (st != REJECTED)
    bound = ~np.isnan(sim.first_bind)
    wait = np.where(bound, sim.first_bind - w.arrival_s, H - w.arrival_s)
    waits = wait[window]
    eight = window & (w.pods.num_gpu == 8)
    stranded = eight & ((wait > sim.config.stranded_wait_s) | (st == PENDING))
    cap = sim.state.gpu_capacity_milli
    window_milli_s = span * cap

    def pct(milli_s: float) -> float:  # share of the window's GPU capacity
        return 100.0 * milli_s / window_milli_s if window_milli_s > 0 else 0.0

    c = sim.c
    wasted_gpu_h = c["gpu_hours_lost_work"] + c["gpu_hours_lost_restart"] + c["gpu_hours_held_twice"]
    alloc_pct = pct(area)
    return TimedResult(
        scheduler=getattr(sim.scheduler, "name", type(sim.scheduler).__name__),
        horizon_s=H,
        warmup_s=W,
        arrived=int(sum(sim.n_status[1:])),
        rejected=sim.n_status[REJECTED],
        completed=sim.n_status[COMPLETED],
        running_at_end=sim.n_status[RUNNING],
        pending_at_end=sim.n_status[PENDING],
        gpu_alloc_pct=alloc_pct,
        gpu_idle_whole_pct=pct(whole_area),
        gpu_idle_shared_pct=pct(window_milli_s - area - whole_area),
        gpu_useful_pct=alloc_pct - pct(3600.0 * GPU_MILLI_PER_GPU * wasted_gpu_h),
        wait_p50_s=percentile(waits, 50),
        wait_p95_s=percentile(waits, 95),
        wait_p99_s=percentile(waits, 99),
        waits_counted=int(window.sum()),
        eight_gpu_arrived=int(eight.sum()),
        stranded_8gpu=int(stranded.sum()),
        sessions=int(c["sessions"]),
        decision_latency_p99_s=percentile(np.array(sim.latencies), 99),
        bind_conflicts=int(c["bind_conflicts"]),
        reservation_filtered=int(c["reservation_filtered"]),
        reservations_made=int(c["reservations_made"]),
        reservations_fulfilled=int(c["reservations_fulfilled"]),
        reservation_expiries=int(c["reservation_expiries"]),
        migrations_executed=int(c["migrations_executed"]),
        migrations_aborted=int(c["migrations_aborted"]),
        plans_aborted=int(c["plans_aborted"]),
        migrations_overtaken=int(c["migrations_overtaken"]),
        gpu_hours_lost_work=float(c["gpu_hours_lost_work"]),
        gpu_hours_lost_restart=float(c["gpu_hours_lost_restart"]),
        gpu_hours_held_twice=float(c["gpu_hours_held_twice"]),
        event_hash=sim.log.hexdigest(),
        events_processed=sim.log.count,
        wall_s=wall,
        abort_reasons=dict(sim.abort_reasons),
        first_bind_s=sim.first_bind,
        first_node=sim.first_node,
        completion_s=sim.completion,
        end_status=st.copy(),
        final_state=sim.state,
    )
