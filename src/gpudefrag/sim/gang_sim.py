"""The job-level, event-driven simulator of suite 2: gangs on a topology, with a placement
policy and optionally a defragmenter.

Rules:

* Jobs arrive at ``submit_s`` and wait in a queue ordered by (priority descending, submit time,
  id).  After every batch of simultaneous events the scheduler tries the queue in order and
  starts every job its policy can place (greedy backfill, as Kueue's BestEffortFIFO and
  Volcano's allocate action do); a gang starts whole or not at all.
* A job whose shape (pod sizes, GPU share, constraint, and for a reserving policy whether the
  job owns a reservation) the policy refused in this pass is not asked again in the same pass (the state only loses room within a pass), and a pass stops
  once no GPU has any free milli left.  When the last
  events were arrivals only, only the new jobs are tried: the others were refused on a state
  with at least as much room.
* A job runs ``duration_s`` of work.  Every ``defrag_tick_s``, after that time's events and
  scheduling pass (and again if it changed anything), the defragmenter (if any) gets
  the state, the queue and each running job's checkpoint information; each plan it returns is
  replayed on a scratch copy first (moved jobs unbound, re-bound at their new nodes, then the
  blocked job bound; required constraints checked) and executed only if all of that succeeds,
  else it is refused and counted.  A moved job loses the work since its last checkpoint and
  holds its new nodes for ``restart_s`` before it resumes (:mod:`gpudefrag.gangs.running`).
* Measures are integrated over ``[measure_start_s, measure_end_s)`` and the run stops at
  ``measure_end_s``; jobs submitted in the window and not started by then are "pending at end".
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpudefrag.gangs.invariants import check_job, check_state
from gpudefrag.gangs.metrics import Meter, queue_room, snapshot
from gpudefrag.gangs.moves import DefragPlan, GangDefragmenter
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.gangs.running import Running
from gpudefrag.gangs.statements import plan_statement
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job
from gpudefrag.model.session import RunningInfo, Session
from gpudefrag.model.statement import StatementError
from gpudefrag.model.topology import Topology
from gpudefrag.sim.engine import EventQueue, run_events

__all__ = ["GangSimConfig", "GangSimResult", "JobRecord", "simulate"]

_ARRIVE, _END = 0, 1


@dataclass(frozen=True)
class GangSimConfig:
    measure_start_s: float
    measure_end_s: float
    checkpoint_interval_s: float = 1800.0
    restart_s: float = 300.0
    defrag_tick_s: float = 60.0
    check_every_event: bool = False


@dataclass
class JobRecord:
    """One job submitted inside the measurement window."""

    job: Job
    start_s: float | None = None
    end_s: float | None = None
    nodes: tuple[int, ...] = ()
    moves: int = 0


@dataclass
class GangSimResult:
    records: list[JobRecord]
    meter: Meter
    total_gpus: int
    migrations: int = 0
    gang_moves: int = 0
    plans: int = 0
    plans_refused: int = 0
    lost_gpu_s: float = 0.0
    restart_gpu_s: float = 0.0
    place_calls_s: list[float] = field(default_factory=list)
    pass_s: list[float] = field(default_factory=list)
    defrag_calls_s: list[float] = field(default_factory=list)
    batch_calls_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    event_hash: str = ""

    @property
    def allocation(self) -> float:
        """Time-averaged share of GPUs in use over the window."""
        return self.meter.alloc_gpu_s / (self.meter.span_s * self.total_gpus)

    @property
    def waste_gpu_s(self) -> float:
        return self.lost_gpu_s + self.restart_gpu_s

    @property
    def goodput(self) -> float:
        """Allocation less the GPU time moves wasted (lost work and restarts)."""
        return (self.meter.alloc_gpu_s - self.waste_gpu_s) / (self.meter.span_s * self.total_gpus)


class _Sim:
    def __init__(
        self,
        topology: Topology,
        jobs: list[Job],
        policy: GangPolicy,
        defrag: GangDefragmenter | None,
        cfg: GangSimConfig,
    ) -> None:
        self.state = ClusterState.for_topology(topology)
        self.policy, self.defrag, self.cfg = policy, defrag, cfg
        self.events = EventQueue()  # (time, kind, push order): arrivals first, then ends
        for job in jobs:
            self.events.push(job.submit_s, _ARRIVE, (job.job_id, 0))
        self.jobs = {j.job_id: j for j in jobs}
        self.queue: list[tuple[int, float, int]] = []
        self.new_jobs: list[int] = []
        self.full_pass = False
        self.running: dict[int, Running] = {}
        self.records = {
            j.job_id: JobRecord(j) for j in jobs if cfg.measure_start_s <= j.submit_s < cfg.measure_end_s
        }
        self.meter = Meter(cfg.measure_start_s, cfg.measure_end_s)
        self.result = GangSimResult([], self.meter, topology.total_gpus)
        self.hash = hashlib.sha256()
        self.now = 0.0
        self.rooms_version = 0
        self.queued_gangs = 0  # queued jobs larger than one node (multi-node gangs)
        self.queued_milli: dict[tuple[int, bool], int] = {}  # (GPU milli asked, sharing) -> jobs queued
        self.shapes: dict[int, tuple[object, ...]] = {}

    # ---- events ----------------------------------------------------------------------------
    def _push_end(self, run: Running) -> None:
        self.events.push(run.end_s, _END, (run.job.job_id, run.token))

    def _is_gang(self, job: Job) -> bool:
        return job.gpus > self.state.topology.max_gpus_per_node

    def _start(self, job: Job, nodes: list[int]) -> None:
        """Start a queued job (every caller starts one from the queue)."""
        self.queued_gangs -= self._is_gang(job)
        self._count_queued(job, -1)
        self.state.bind_job(job, nodes)
        check_job(self.state, job)
        self._started(job, nodes)

    def _started(self, job: Job, nodes: list[int]) -> None:
        """The bookkeeping of a start, once ``job`` is bound on ``nodes``."""
        run = Running(job, self.now, self.now)
        self.running[job.job_id] = run
        self._push_end(run)
        rec = self.records.get(job.job_id)
        if rec is not None:
            rec.start_s, rec.nodes = self.now, tuple(nodes)
        self.hash.update(f"S{job.job_id}@{self.now:.3f}:{nodes}".encode())

    def _count_queued(self, job: Job, delta: int) -> None:
        key = (round(job.gpu_share * 1000), job.is_sharing)
        left = self.queued_milli.get(key, 0) + delta
        if left:
            self.queued_milli[key] = left
        else:
            del self.queued_milli[key]

    def _end(self, job_id: int, token: int) -> None:
        run = self.running.get(job_id)
        if run is None or run.token != token:
            return
        del self.running[job_id]
        self.state.unbind_job(job_id)
        rec = self.records.get(job_id)
        if rec is not None:
            rec.end_s, rec.moves = self.now, run.moves
        self.full_pass = True

    # ---- scheduling ------------------------------------------------------------------------
    def _key(self, job: Job) -> tuple[int, float, int]:
        return (-job.priority, job.submit_s, job.job_id)

    def _shape(self, job: Job) -> tuple[object, ...]:
        shape = self.shapes.get(job.job_id)
        if shape is None:
            shape = self.shapes[job.job_id] = (tuple(self.state.pods_of(job)), job.gpu_milli, job.constraint)
        owner_key = getattr(self.policy, "owner_key", None)  # reservations: owners see more nodes
        return shape if owner_key is None else (*shape, owner_key(job))

    def _pass(self) -> None:
        t0 = time.perf_counter()
        if self.full_pass:
            order = [k[2] for k in self.queue]
        else:
            order = sorted(self.new_jobs, key=lambda j: self._key(self.jobs[j]))
        self.full_pass, self.new_jobs = False, []
        started = self._batch(order)
        refused: set[tuple[object, ...]] = set()
        free_total = int(self.state.free_gpus.sum())
        room = bool(self.state.gpu_milli_left.any())
        for job_id in order:
            if not room:  # every GPU is fully used: nothing else can start in this pass
                break
            job = self.jobs[job_id]
            shape = self._shape(job)
            if job_id in started or shape in refused or (not job.is_sharing and job.gpus > free_total):
                continue
            c0 = time.perf_counter()
            nodes = self.policy.place(self.state, job)
            self.result.place_calls_s.append(time.perf_counter() - c0)
            if nodes is None:
                refused.add(shape)
                continue
            self._start(job, nodes)
            started.add(job_id)
            free_total = int(self.state.free_gpus.sum())
            room = free_total > 0 or bool(self.state.gpu_milli_left.any())
        if started:
            self.queue = [k for k in self.queue if k[2] not in started]
        self.result.pass_s.append(time.perf_counter() - t0)

    def _batch(self, order: list[int]) -> set[int]:
        """A policy with ``place_batch`` places the pass's first jobs that could fit jointly."""
        place_batch = getattr(self.policy, "place_batch", None)
        if place_batch is None:
            return set()
        free_total = int(self.state.free_gpus.sum())
        jobs = [self.jobs[j] for j in order if self.jobs[j].gpus <= free_total]
        if len(jobs) < 2:
            return set()
        c0 = time.perf_counter()
        plan: dict[int, list[int]] = place_batch(self.state, jobs)
        self.result.batch_calls_s.append(time.perf_counter() - c0)
        for job_id, nodes in plan.items():
            self._start(self.jobs[job_id], nodes)
        return set(plan)

    # ---- defragmentation -------------------------------------------------------------------
    def _running_info(self) -> dict[int, RunningInfo]:
        iv = self.cfg.checkpoint_interval_s
        return {
            j: RunningInfo(r.job, r.first_start_s, last_s, last_s + iv)
            for j, r in self.running.items()
            for last_s in (r.last_checkpoint_s(self.now, iv),)
        }

    def _execute(self, plan: DefragPlan) -> None:
        """Commit the plan's statement (the moves, then the blocked job's start) and count it."""
        queued = {k[2] for k in self.queue}
        blocked = self.jobs[plan.job_id]
        try:
            if plan.job_id not in queued:
                raise StatementError(f"job {plan.job_id} is not queued")
            plan_statement(self.state, blocked, plan.nodes, plan.moves).commit()
        except StatementError:
            self.result.plans_refused += 1
            return
        iv, rs = self.cfg.checkpoint_interval_s, self.cfg.restart_s
        for m in plan.moves:
            run = self.running[m.job_id]
            self._unwaste_restart(run)
            lost = run.move(self.now, iv, rs)
            self._push_end(run)
            self.result.migrations += 1
            self.result.gang_moves += len(self.state.pods_of(run.job)) > 1
            self._waste(run.job, lost)
            self.hash.update(f"M{m.job_id}@{self.now:.3f}:{m.to_nodes}".encode())
        self.queue = [k for k in self.queue if k[2] != plan.job_id]
        self.queued_gangs -= self._is_gang(blocked)
        self._count_queued(blocked, -1)
        self._started(blocked, list(plan.nodes))
        self.result.plans += 1
        self.full_pass = True

    def _waste(self, job: Job, lost_s: float) -> None:
        """Count the waste of one move: the lost work if the move is inside the window, and the
        part of the restart (from now) that falls inside it."""
        cfg = self.cfg
        if cfg.measure_start_s <= self.now < cfg.measure_end_s:
            self.result.lost_gpu_s += job.gpu_share * lost_s
        lo, hi = max(self.now, cfg.measure_start_s), min(self.now + cfg.restart_s, cfg.measure_end_s)
        if hi > lo:
            self.result.restart_gpu_s += job.gpu_share * (hi - lo)

    def _unwaste_restart(self, run: Running) -> None:
        """A job moved again while still restarting: the part of its earlier restart after now
        (counted as waste when that move was made) is not served; take it back."""
        cfg = self.cfg
        lo, hi = max(self.now, cfg.measure_start_s), min(run.work_start_s, cfg.measure_end_s)
        if hi > lo and run.moves > 0:
            self.result.restart_gpu_s -= run.job.gpu_share * (hi - lo)

    def _defrag(self) -> None:
        if self.defrag is None:
            return
        pending = [self.jobs[k[2]] for k in self.queue]
        c0 = time.perf_counter()
        plans = self.defrag.plan(Session(self.now, self.state, pending, self._running_info()))
        self.result.defrag_calls_s.append(time.perf_counter() - c0)
        for plan in plans:
            self._execute(plan)
        version = getattr(self.defrag, "rooms_version", 0)
        if version != self.rooms_version:  # nodes reserved or released: try every queued job
            self.rooms_version, self.full_pass = version, True

    # ---- main loop -------------------------------------------------------------------------
    def run(self) -> GangSimResult:
        """The run on the event loop: a step at every event time and every defragmentation
        tick; at each, the arrivals and ends, then a scheduling pass, then (at a tick) the
        defragmenter and, if it started jobs or changed reservations, another pass."""
        cfg = self.cfg
        tick = [cfg.measure_start_s if self.defrag is not None else float("inf")]
        snap, waiting, room = snapshot(self.state), False, queue_room(self.state, self.queued_milli)

        def advance(t: float) -> None:
            self.meter.advance(self.now, t, snap, waiting, room)
            self.now = t

        def on_event(t: float, kind: int, payload: tuple[int, int]) -> None:
            job_id, token = payload
            if kind == _ARRIVE:
                job = self.jobs[job_id]
                self.queue.append(self._key(job))
                self.new_jobs.append(job_id)
                self.queued_gangs += self._is_gang(job)
                self._count_queued(job, +1)
            else:
                self._end(job_id, token)

        def after_events(t: float) -> None:
            nonlocal snap, waiting, room
            self.queue.sort()
            self._pass()
            if t == tick[0]:  # after the events and the pass: it sees only jobs still blocked
                self._defrag()
                tick[0] += cfg.defrag_tick_s
                if self.full_pass:
                    self._pass()
            if cfg.check_every_event:
                check_state(self.state)
            snap, waiting = snapshot(self.state), self.queued_gangs > 0
            room = queue_room(self.state, self.queued_milli)

        run_events(self.events, cfg.measure_end_s, on_event, advance, after_events, lambda: tick[0])
        check_state(self.state)
        return self._finish()

    def _finish(self) -> GangSimResult:
        self.result.records = sorted(self.records.values(), key=lambda r: r.job.job_id)
        for rec in self.result.records:
            run = self.running.get(rec.job.job_id)
            if run is not None:
                rec.moves = run.moves
        self.result.event_hash = self.hash.hexdigest()[:16]
        return self.result


def simulate(
    topology: Topology,
    jobs: Iterable[Job],
    policy: GangPolicy,
    cfg: GangSimConfig,
    defrag: GangDefragmenter | None = None,
) -> GangSimResult:
    """Run one scenario; deterministic for deterministic policies."""
    t0 = time.perf_counter()
    job_list = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
    if len({j.job_id for j in job_list}) != len(job_list):
        raise ValueError("job ids must be unique")
    too_big = [j for j in job_list if j.gpus > topology.total_gpus]
    if too_big:
        raise ValueError(
            f"job {too_big[0].job_id} asks {too_big[0].gpus} GPUs, the cluster has {topology.total_gpus}"
        )
    result = _Sim(topology, job_list, policy, defrag, cfg).run()
    result.wall_s = time.perf_counter() - t0
    return result
