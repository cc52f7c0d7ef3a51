"""The job-level simulator of suite 3: gangs on a topology while capacity changes (failures,
repairs, spare nodes, elastic nodes), with priorities and preemption.

Rules (times in seconds; a job's *key* is ``(-priority, submit_s, job_id)``, the queue order):

* **Scheduling.** After every batch of simultaneous events the queue is tried in order; a job
  is placed by the placement policy on a *view* of the state in which the nodes it may not use
  are hidden (down, powered off, or spare when it may not use spares,
  :func:`~gpudefrag.capacity.spares.may_use_spares`).  A gang starts whole or not at all.
* **Failures** (:mod:`gpudefrag.capacity.failures`).  When a node fails, every job with a pod on
  it is killed: it loses the work since its last checkpoint, frees all its nodes (a gang loses
  every member) and goes back to the queue as *recovering* with the work up to that checkpoint
  saved.  The node serves nothing until its repair time.  A failed gang's healthy nodes are
  *held* for its restart (no other job may use them) until it starts again or
  ``hold_failed_gang_s`` pass (an event at that time ends the hold), as a training job keeps its
  allocation while a spare replaces the broken node.
* **Restarts.**  A job killed (by a failure or a preemption) or moved holds its new nodes for
  ``restart_s`` before its work resumes from the checkpoint; its *restart time* after a failure
  is from the failure to that moment.
* **Preemption.**  A job of priority above the lowest that the policy cannot place asks the
  victim rule (:mod:`gpudefrag.capacity.victims`) for a plan on its view, with the running jobs
  of lower priority whose pods all sit on nodes it may use.  The plan is replayed on a scratch
  copy (victims unbound, moved jobs re-bound, the preemptor bound, every node one it may use)
  and executed only if that succeeds; killed victims are requeued like failed jobs (lost work
  counted as preemption), moved ones restart at once on their new nodes (counted as
  preemption too: a move of a preemption plan is part of what it costs).
* **Waiting for checkpoints** (``checkpoint_wait_s > 0``).  A blocked job below production
  may wait, ``checkpoint_wait_s`` in all from the first time it does, for its victims' next
  checkpoints: the rule is told how much of that time is left (``may_wait_s``), and a plan
  whose ``not_before_s`` is later than now is not executed: the job stays queued (it still
  starts at once wherever room appears), asks no rule until ``not_before_s``, and then asks
  again (an event wakes it).  Production jobs never wait.
* **Pooled spares.**  A recovering job that still finds no room may evict best-effort jobs that
  have a pod on a spare node: it is placed on a view without them, and exactly the evicted jobs
  with a pod on its chosen nodes are killed (counted as preemption).
* **The spare role moves.**  A spare node that a recovering job starts on becomes a regular
  node, and a wholly free, up node takes the spare role in its place (in the same leaf for the
  spread reserves, else anywhere; when none is free, the first that frees up or comes back from
  repair; never a held node), so the reserve keeps its size instead of filling with restarted
  work, as an operator swaps a spare in and sends the broken node to repair.
* **Accounting** over ``[measure_start_s, measure_end_s)``: GPUs in use (bound pods, restarts
  included), GPU-seconds lost by cause (``failure``, ``preemption``, ``migration``: the work
  thrown away, counted when it is thrown away inside the window) and restart GPU-seconds (the
  part of each restart inside the window; a restart cut short gives back its unserved part),
  each restart charged to the cause that made it (the kill before it, or the move);
  *goodput* = in use - lost - restarts.  The result's counters (completions, failures, kills,
  moves, plans, power-ons and -offs, drains, spare swaps) and the restart times count what
  happens inside the window; a job that failed inside it and is not working again at the end
  gets the time from its failure to the end as its restart time (``restart_censored``).  Every
  job ends completed, running or queued.
* **Elastic mode** (``elastic``): every node starts on except the ``standby_nodes``
  highest-numbered ones, which start powered off (the room an elastic cluster has to grow
  beyond the fixed one it is compared with).  Each ``tick_s``, after that time's
  events and scheduling pass: nodes idle (no pod) for ``idle_off_s`` while no job waits are
  powered off, except a *warm pool* of
  ``ceil(warm_fraction x (nodes - standby_nodes))`` idle nodes that stay on (the most recently idle; so an
  arriving job seldom waits for provisioning); when jobs wait, a blocked job first
  asks the victim rule for a plan that only *moves* jobs (any priority) and takes it if it costs
  at most ``job GPUs x provision_s`` (what waiting for new nodes would cost), else nodes are
  powered on (the lowest-numbered off nodes: one per waiting whole-GPU pod, sharing pods packed
  by their GPU shares, less the nodes already provisioning), each usable ``provision_s`` later; and nodes with at most ``drain_max_used_gpus`` GPUs
  in use whose jobs (none still restarting) can all move to busy nodes that are not drain
  candidates themselves, at a cost of at most ``drain_max_cost_gpu_s``, are drained (moves
  priced by checkpoints) and powered off at once.  Node-hours count every node
  that is on or being provisioned.
* The invariants of :mod:`gpudefrag.gangs.invariants` are checked for every job bound and, with
  ``check_every_event``, on the whole state after every event, plus: no pod on a down node.
"""

from __future__ import annotations

import hashlib
import heapq
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpudefrag.capacity.classes import BEST_EFFORT, PREEMPTIBLE, PRODUCTION
from gpudefrag.capacity.failures import Outage
from gpudefrag.capacity.spares import may_use_spares
from gpudefrag.capacity.victims import RunningJob, VictimPlan, VictimRule
from gpudefrag.gangs.invariants import InvariantError, check_job, check_state
from gpudefrag.gangs.metrics import Meter, snapshot
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.gangs.running import Running
from gpudefrag.model.gang_state import GangState, PlacementError
from gpudefrag.model.jobs import Job
from gpudefrag.model.topology import Topology

__all__ = ["CAUSES", "ElasticConfig", "Job3Record", "Sim3Config", "Sim3Result", "simulate3"]

BoolArray = npt.NDArray[np.bool_]
CAUSES = ("failure", "preemption", "migration")
_FAIL, _REPAIR, _POWERED, _ARRIVE, _END, _TICK, _WAKE = 0, 1, 2, 3, 4, 5, 6  # order at equal times
# _WAKE: a failed gang's hold ends, or a job waiting for checkpoints asks again: a scheduling pass


STARTED, REFUSED, WAITING = "started", "refused", "waiting"  # what a preemption attempt did


@dataclass(frozen=True, slots=True)
class _Waiting:
    """A queued job waiting for its victims' checkpoints: it asks the rule again at
    ``asks_at_s``; its wait ends at ``ends_s``; until ``asks_at_s``, ``victims`` are not offered
    to other jobs below production."""

    asks_at_s: float
    ends_s: float
    victims: frozenset[int]


@dataclass(frozen=True)
class ElasticConfig:
    """Elastic mode's settings (module docstring)."""

    tick_s: float = 60.0
    idle_off_s: float = 1800.0
    warm_fraction: float = 0.05
    provision_s: float = 600.0
    drain_max_used_gpus: int = 2
    drain_max_cost_gpu_s: float = 2 * 3600.0


@dataclass(frozen=True)
class Sim3Config:
    """Window, checkpoints and restarts, spare policy, and safety checks."""

    measure_start_s: float
    measure_end_s: float
    checkpoint_interval_s: float = 1800.0
    restart_s: float = 300.0
    spare_policy: str = "none"
    hold_failed_gang_s: float = 3600.0
    check_every_event: bool = False
    elastic: ElasticConfig | None = None
    standby_nodes: int = 0  # elastic mode: the highest-numbered nodes that start powered off
    checkpoint_wait_s: float = 0.0  # how long a job below production may wait for checkpoints

    def __post_init__(self) -> None:
        if self.standby_nodes < 0 or (self.standby_nodes and self.elastic is None):
            raise ValueError("standby_nodes must be >= 0, and only elastic mode has them")
        if not (0.0 <= self.checkpoint_wait_s < self.checkpoint_interval_s):
            raise ValueError(
                f"checkpoint_wait_s={self.checkpoint_wait_s}: must be >= 0 and below the checkpoint "
                f"interval ({self.checkpoint_interval_s} s)"
            )


@dataclass
class Job3Record:
    """One job submitted inside the window: first start, end, and what happened to it."""

    job: Job
    start_s: float | None = None
    end_s: float | None = None
    kills: int = 0
    moves: int = 0


@dataclass
class Sim3Result:
    records: list[Job3Record]
    meter: Meter
    total_gpus: int  # the capacity shares are measured against: every node but the standby ones
    lost_gpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    restart_gpu_s: float = 0.0
    restart_gpu_s_by_cause: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    failures: int = 0
    jobs_killed_by_failure: int = 0
    restart_times_s: list[tuple[int, float]] = field(default_factory=list)  # (job GPUs, failure -> working)
    restart_censored: int = 0  # of restart_times_s: jobs still not working at the end (end - failure)
    preemptions: int = 0
    preempted_jobs: int = 0
    preemption_waits: int = 0  # plans a blocked job chose to wait for (checkpoint_wait_s)
    moves: int = 0
    spare_evictions: int = 0
    plans_refused: int = 0
    victim_calls_s: list[float] = field(default_factory=list)
    node_s: float = 0.0  # node-seconds powered (on or provisioning) inside the window
    powered_on: int = 0
    powered_off: int = 0
    drains: int = 0
    spare_swaps: int = 0  # nodes given the spare role in place of spares a failed job took
    wall_s: float = 0.0
    event_hash: str = ""
    pending_at_end: int = 0
    running_at_end: int = 0
    completed: int = 0

    @property
    def span_gpu_s(self) -> float:
        return self.meter.span_s * self.total_gpus

    @property
    def allocation(self) -> float:
        return self.meter.alloc_gpu_s / self.span_gpu_s

    @property
    def node_hours(self) -> float:
        return self.node_s / 3600.0

    @property
    def goodput(self) -> float:
        """Useful GPU time as a share of capacity: in use, less lost work and restarts."""
        waste = sum(self.lost_gpu_s.values()) + self.restart_gpu_s
        return (self.meter.alloc_gpu_s - waste) / self.span_gpu_s


class _Sim3:
    def __init__(
        self,
        topology: Topology,
        jobs: list[Job],
        policy: GangPolicy,
        victims: VictimRule | None,
        outages: list[Outage],
        spares: BoolArray,
        cfg: Sim3Config,
    ) -> None:
        self.topology, self.policy, self.victims, self.cfg = topology, policy, victims, cfg
        self.state = GangState(topology)
        n = topology.num_nodes
        self.down = np.zeros(n, dtype=bool)
        self.off = np.zeros(n, dtype=bool)  # powered off or still provisioning (elastic mode)
        self.powered = np.ones(n, dtype=bool)  # billed: on or provisioning
        if cfg.standby_nodes:
            if cfg.standby_nodes >= n:
                raise ValueError(f"standby_nodes={cfg.standby_nodes}: the topology has only {n} nodes")
            self.off[n - cfg.standby_nodes :] = True
            self.powered[n - cfg.standby_nodes :] = False
        self.idle_since = np.zeros(n, dtype=np.float64)
        self.spare = spares.astype(bool)  # the spare role: moves when a recovering job takes a spare
        self.spare_debt: list[int] = []  # domains owed a spare node (see _replenish)
        self.held: dict[int, tuple[list[int], float]] = {}  # failed gang -> (its healthy nodes, until)
        self.held_mask = np.zeros(n, dtype=bool)
        self.spare_version = 0
        spread = cfg.spare_policy in ("dedicated", "pooled-leaf") and bool(topology.levels)
        self._spare_domain = topology.domains(0).astype(np.int64) if spread else np.zeros(n, dtype=np.int64)
        self.jobs = {j.job_id: j for j in jobs}
        self.events: list[tuple[float, int, int, int, int]] = []
        for seq, job in enumerate(jobs):
            self.events.append((job.submit_s, _ARRIVE, seq, job.job_id, 0))
        self.seq = len(jobs)
        for o in outages:
            self.seq += 1
            self.events.append((o.fail_s, _FAIL, self.seq, o.node, 0))
            self.seq += 1
            self.events.append((o.repair_s, _REPAIR, self.seq, o.node, 0))
        if cfg.elastic is not None:
            self.seq += 1
            self.events.append((cfg.elastic.tick_s, _TICK, self.seq, 0, 0))
        heapq.heapify(self.events)
        self.queue: dict[tuple[int, float, int], None] = {}  # keys in arrival order; tried sorted
        self.running: dict[int, Running] = {}
        self.suspended: dict[int, Running] = {}  # killed, waiting to restart from a checkpoint
        self.recovering: dict[int, float] = {}  # job id -> failure time, until it works again
        self.kill_cause: dict[int, str] = {}  # suspended job -> why it was killed
        self.waiting: dict[int, _Waiting] = {}  # queued job -> the checkpoints it waits for
        self.restart_cause: dict[int, str] = {}  # job -> the cause its latest restart is charged to
        self.records = {
            j.job_id: Job3Record(j) for j in jobs if cfg.measure_start_s <= j.submit_s < cfg.measure_end_s
        }
        self.meter = Meter(cfg.measure_start_s, cfg.measure_end_s)
        # capacity: the nodes that start on (standby nodes add room, not capacity to be measured by)
        base_gpus = int(topology.gpus_per_node[: n - cfg.standby_nodes].sum())
        self.result = Sim3Result([], self.meter, base_gpus)
        self.hash = hashlib.sha256()
        self.now = 0.0
        self.dirty = True
        self._views: dict[bytes, GangState] = {}
        self._views_version = -1
        self._maxima: dict[tuple[bool, bool, int], tuple[tuple[int, int], int, int, int]] = {}
        self._running_cache: dict[tuple[bytes, int], dict[int, RunningJob]] = {}
        self._running_stamp: tuple[int, float] = (-1, -1.0)

    # ---- views -----------------------------------------------------------------------------
    def allowed(self, job: Job) -> BoolArray:
        """Nodes ``job`` may use now."""
        ok = ~self.down & ~self.off
        if self.held:
            own = np.zeros_like(ok)
            hold = self.held.get(job.job_id)
            if hold is not None:
                own[hold[0]] = True
            ok &= ~self.held_mask | own
        if self.spare.any() and not may_use_spares(
            self.cfg.spare_policy, job.job_id in self.recovering, job.priority == BEST_EFFORT
        ):
            ok &= ~self.spare
        return ok

    def view(self, allowed: BoolArray) -> GangState:
        """The state with every node outside ``allowed`` showing no free capacity (cached per
        mask until the state changes)."""
        if allowed.all():
            return self.state
        if self._views_version != self.state.version:
            self._views, self._views_version = {}, self.state.version
        key = allowed.tobytes()
        v = self._views.get(key)
        if v is None:
            v = self.state.copy()
            v.hide(np.flatnonzero(~allowed))
            self._views[key] = v
        return v

    # ---- waste accounting ------------------------------------------------------------------
    def _in_window(self) -> bool:
        return self.cfg.measure_start_s <= self.now < self.cfg.measure_end_s

    def _count(self, name: str, k: int = 1) -> None:
        """Add ``k`` to the result's counter ``name`` if now is inside the window."""
        if self._in_window():
            setattr(self.result, name, getattr(self.result, name) + k)

    def _lose(self, job: Job, lost_s: float, cause: str) -> None:
        if self._in_window():
            self.result.lost_gpu_s[cause] += job.gpu_share * lost_s

    def _restart_waste(self, job: Job, sign: float, until_s: float, cause: str | None = None) -> None:
        """Charge (``sign`` 1) or give back (-1) the restart of ``job`` from now to ``until_s``
        inside the window; ``cause`` starts a restart, a give-back uses the restart's own."""
        if cause is not None:
            self.restart_cause[job.job_id] = cause
        lo, hi = max(self.now, self.cfg.measure_start_s), min(until_s, self.cfg.measure_end_s)
        if hi > lo:
            gpu_s = sign * job.gpu_share * (hi - lo)
            self.result.restart_gpu_s += gpu_s
            self.result.restart_gpu_s_by_cause[self.restart_cause[job.job_id]] += gpu_s

    # ---- job lifecycle ---------------------------------------------------------------------
    def _push(self, at_s: float, kind: int, who: int, token: int = 0) -> None:
        """Schedule an event; ``seq`` keeps equal (time, kind) events in the order pushed."""
        self.seq += 1
        heapq.heappush(self.events, (at_s, kind, self.seq, who, token))

    def _push_end(self, run: Running) -> None:
        self._push(run.end_s, _END, run.job.job_id, run.token)

    def _bind(self, job: Job, nodes: list[int]) -> None:
        self.state.bind(job, nodes)
        check_job(self.state, job)
        if self.down[nodes].any():
            raise InvariantError(f"job {job.job_id} bound on a down node: {nodes}")

    def _start(self, job: Job, nodes: list[int]) -> None:
        """Start (or restart from its checkpoint) a queued job on ``nodes``."""
        self._bind(job, nodes)
        run = self.suspended.pop(job.job_id, None)
        if run is None:
            run = Running(job, self.now, self.now)
            rec = self.records.get(job.job_id)
            if rec is not None:
                rec.start_s = self.now
        else:
            run.work_start_s = self.now + self.cfg.restart_s
            run.token += 1
            self._restart_waste(job, 1.0, run.work_start_s, self.kill_cause.pop(job.job_id))
        self.waiting.pop(job.job_id, None)
        failed_at = self.recovering.pop(job.job_id, None)
        if failed_at is not None and failed_at >= self.cfg.measure_start_s:
            self.result.restart_times_s.append((job.gpus, run.work_start_s - failed_at))
        self.running[job.job_id] = run
        self._push_end(run)
        self.hash.update(f"S{job.job_id}@{self.now:.3f}:{nodes}".encode())
        if failed_at is not None:
            self._release(job.job_id)
            self._take_spares(nodes)

    def _release(self, job_id: int) -> None:
        """End the hold on a failed gang's healthy nodes (it restarted, or the hold expired)."""
        hold = self.held.pop(job_id, None)
        if hold is not None:
            self.held_mask[hold[0]] = False
            self.spare_version += 1
            self.dirty = True

    # ---- the spare pool --------------------------------------------------------------------
    def _take_spares(self, nodes: list[int]) -> None:
        """A recovering job started on spare nodes: they become regular nodes, and as many
        wholly free nodes take the spare role in their place (:meth:`_replenish`)."""
        taken = [n for n in dict.fromkeys(nodes) if self.spare[n]]
        if not taken:
            return
        for n in taken:
            self.spare[n] = False
            self.spare_debt.append(int(self._spare_domain[n]))
        self.spare_version += 1
        self._replenish()

    def _replenish(self) -> None:
        """Give the spare role to wholly free, up and powered nodes, one per node owed: in the
        owed node's domain (the leaf, for the spread reserves) when one is free there, else
        anywhere; the highest-numbered first.  What cannot be paid now waits for a node to
        free up or come back from repair."""
        if not self.spare_debt:
            return
        gpn = self.topology.gpus_per_node
        free = (self.state.free_gpus == gpn) & ~self.down & ~self.off & ~self.spare & ~self.held_mask
        owed: list[int] = []
        for dom in self.spare_debt:
            cands = np.flatnonzero(free & (self._spare_domain == dom))
            if cands.size == 0:
                cands = np.flatnonzero(free)
            if cands.size == 0:
                owed.append(dom)
                continue
            node = int(cands[-1])
            free[node] = False
            self.spare[node] = True
            self._count("spare_swaps")
            self.hash.update(f"P{node}@{self.now:.3f}".encode())
        if len(owed) != len(self.spare_debt):
            self.spare_version += 1
        self.spare_debt = owed

    def _end(self, job_id: int, token: int) -> None:
        run = self.running.get(job_id)
        if run is None or run.token != token:
            return
        del self.running[job_id]
        self.state.unbind(job_id)
        rec = self.records.get(job_id)
        if rec is not None:
            rec.end_s = self.now
        self._count("completed")
        self.dirty = True
        self._replenish()

    def _kill(self, job_id: int, cause: str) -> None:
        """Evict a running job: it loses the work since its last checkpoint and is requeued."""
        run = self.running.pop(job_id)
        iv = self.cfg.checkpoint_interval_s
        if run.work_start_s > self.now:  # still restarting: give back the unserved restart
            self._restart_waste(run.job, -1.0, run.work_start_s)
        lost = run.lost_work_s(self.now, iv)
        run.saved_work_s += run.progress_s(self.now) - lost
        run.work_start_s = self.now
        run.token += 1
        self._lose(run.job, lost, cause)
        self.state.unbind(job_id)
        self.suspended[job_id] = run
        self.kill_cause[job_id] = cause
        job = run.job
        self.queue[(-job.priority, job.submit_s, job.job_id)] = None
        rec = self.records.get(job_id)
        if rec is not None:
            rec.kills += 1
        self.hash.update(f"K{job_id}@{self.now:.3f}:{cause}".encode())
        self.dirty = True

    def _move(self, job_id: int, to_nodes: list[int], cause: str = "migration") -> None:
        """Move a running job (already unbound) to ``to_nodes``: restart from its checkpoint.
        Its lost work and restart are charged to ``cause`` (``preemption`` for the moves of a
        preemption plan: they are part of what that preemption costs)."""
        run = self.running[job_id]
        if run.work_start_s > self.now:
            self._restart_waste(run.job, -1.0, run.work_start_s)
        lost = run.move(self.now, self.cfg.checkpoint_interval_s, self.cfg.restart_s)
        self._lose(run.job, lost, cause)
        self._restart_waste(run.job, 1.0, run.work_start_s, cause)
        self._bind(run.job, to_nodes)
        self._push_end(run)
        self._count("moves")
        rec = self.records.get(job_id)
        if rec is not None:
            rec.moves += 1
        self.hash.update(f"M{job_id}@{self.now:.3f}:{to_nodes}".encode())

    # ---- capacity events -------------------------------------------------------------------
    def _fail(self, node: int) -> None:
        self._count("failures")
        self.down[node] = True
        for job_id in sorted(self.state.node_jobs[node]):
            nodes = sorted({p.node for p in self.state.placements[job_id]})
            self._kill(job_id, "failure")
            self.recovering.setdefault(job_id, self.now)
            self._count("jobs_killed_by_failure")
            healthy = [n for n in nodes if not self.down[n] and not self.held_mask[n]]
            if len(nodes) > 1 and healthy and self.cfg.hold_failed_gang_s > 0:
                self._release(job_id)
                self.held[job_id] = (healthy, self.now + self.cfg.hold_failed_gang_s)
                self.held_mask[healthy] = True
                self.spare_version += 1
                # the pass after the hold's expiry releases it
                self._push(self.now + self.cfg.hold_failed_gang_s, _WAKE, job_id)
        self.hash.update(f"F{node}@{self.now:.3f}".encode())
        self.dirty = True

    def _repair(self, node: int) -> None:
        self.down[node] = False
        self.dirty = True
        self._replenish()

    # ---- elastic mode ----------------------------------------------------------------------
    def _powered_on(self, node: int) -> None:
        self.off[node] = False
        self.idle_since[node] = self.now
        self.dirty = True

    def _tick(self) -> None:
        e = self.cfg.elastic
        assert e is not None
        self._push(self.now + e.tick_s, _TICK, 0)
        busy = np.array([bool(s) for s in self.state.node_jobs])
        self.idle_since[busy] = self.now
        if not self.queue:
            on_idle = self.powered & ~self.off & ~self.down & ~busy & ~self.held_mask
            idle = on_idle & (self.now - self.idle_since >= e.idle_off_s)
            keep = int(np.ceil(e.warm_fraction * (self.topology.num_nodes - self.cfg.standby_nodes)))
            if keep and idle.any():  # the warm pool: the most recently idle nodes stay on
                cands = np.flatnonzero(idle)
                spare_on = int(on_idle.sum()) - keep
                order = cands[np.lexsort((cands, self.idle_since[cands]))]
                idle = np.zeros_like(idle)
                idle[order[: max(0, spare_on)]] = True
            if idle.any():
                self.off[idle] = True
                self.powered[idle] = False
                self._count("powered_off", int(idle.sum()))
                self.hash.update(f"O{np.flatnonzero(idle).tolist()}@{self.now:.3f}".encode())
            self._drain(busy)
            return
        first = self.jobs[min(self.queue)[2]]
        if self._moves_for(first, e.provision_s):
            return
        self._power_on()

    def _moves_for(self, job: Job, provision_s: float) -> bool:
        """A moves-only plan for a blocked job, taken if it costs at most waiting for nodes."""
        if self.victims is None:
            return False
        allowed = self.allowed(job)
        probe = Job(
            job.job_id, job.submit_s, job.duration_s, job.gpus, job.gpu_milli, 1 << 30, job.constraint
        )
        running = self._running_jobs(allowed, probe.priority)
        if not running:
            return False
        plan = self.victims.choose(
            self.view(allowed).copy(), probe, running, self.policy, self.now, self.cfg.restart_s
        )
        if plan is None or plan.evict or not plan.moves or plan.cost_gpu_s > job.gpu_share * provision_s:
            return False
        if not self._replay(job, plan, allowed, running):
            self._count("plans_refused")
            return False
        for m in plan.moves:
            self.state.unbind(m.job_id)
        for m in plan.moves:
            self._move(m.job_id, list(m.to_nodes))
        del self.queue[(-job.priority, job.submit_s, job.job_id)]
        self._start(job, list(plan.nodes))
        return True

    def _power_on(self) -> None:
        """Power on nodes for the waiting jobs (each blocked after the pass): a pod of whole GPUs
        gets a node of its own, sharing pods share nodes by their GPU shares; nodes already
        provisioning count.  (Free GPUs scattered over busy nodes do not: they did not serve.)"""
        e = self.cfg.elastic
        assert e is not None
        gpn = self.topology.max_gpus_per_node
        provisioning = int((self.powered & self.off).sum())
        whole_pods, shared = 0, 0.0
        for k in self.queue:
            job = self.jobs[k[2]]
            if job.is_sharing:
                shared += job.gpu_share
            else:
                whole_pods += len(self.state.pods_of(job))
        count = max(0, whole_pods + int(np.ceil(shared / gpn)) - provisioning)
        candidates = np.flatnonzero(~self.powered & ~self.down)[:count]
        for node in candidates:
            self.powered[node] = True
            self._push(self.now + e.provision_s, _POWERED, int(node))
        self._count("powered_on", int(candidates.size))

    def _drain(self, busy: BoolArray) -> None:
        """Move the jobs off lightly used nodes so they fall idle (module docstring).  Jobs go
        only to nodes that are busy and not themselves drain candidates (moving a job onto an
        idle node consolidates nothing), and a job still restarting is not moved."""
        e = self.cfg.elastic
        assert e is not None
        used = self.topology.gpus_per_node - self.state.free_gpus
        light = busy & ~self.off & ~self.down & (used <= e.drain_max_used_gpus)
        no_target = light | (self.state.free_gpus == self.topology.gpus_per_node)
        cands = np.flatnonzero(light)
        iv, rs = self.cfg.checkpoint_interval_s, self.cfg.restart_s
        for node in cands[:2]:
            job_ids = sorted(self.state.node_jobs[int(node)])
            if any(len(self.state.placements[j]) > 1 for j in job_ids):
                continue
            if any(self.running[j].work_start_s > self.now for j in job_ids):
                continue
            scratch = self.state.copy()
            for j in job_ids:
                scratch.unbind(j)
            moves: list[tuple[int, list[int]]] = []
            cost = 0.0
            for j in job_ids:
                run = self.running[j]
                hidden = ~self.allowed(run.job) | no_target
                view = scratch.copy()
                view.hide(np.flatnonzero(hidden))
                dest = self.policy.place(view, run.job)
                if dest is None:
                    break
                scratch.bind(run.job, dest)
                moves.append((j, dest))
                cost += run.job.gpu_share * (run.lost_work_s(self.now, iv) + rs)
            if len(moves) != len(job_ids) or cost > e.drain_max_cost_gpu_s:
                continue
            for j, _ in moves:
                self.state.unbind(j)
            for j, dest in moves:
                self._move(j, dest)
            self._count("drains")
            # released at once, as a consolidation deletes the node it emptied: left on, an
            # empty node would take the next job and be drained again
            self.off[node] = True
            self.powered[node] = False
            self._count("powered_off")
            self.hash.update(f"D{int(node)}@{self.now:.3f}".encode())

    # ---- scheduling ------------------------------------------------------------------------
    def _running_jobs(self, allowed: BoolArray, below: int) -> dict[int, RunningJob]:
        """Running jobs of priority below ``below`` whose pods all sit on allowed nodes (cached
        until the state or the time changes)."""
        stamp = (self.state.version, self.now)
        if self._running_stamp != stamp:
            self._running_cache, self._running_stamp = {}, stamp
        key = (allowed.tobytes(), below)
        cached = self._running_cache.get(key)
        if cached is not None:
            return cached
        iv = self.cfg.checkpoint_interval_s
        out: dict[int, RunningJob] = {}
        for job_id, run in self.running.items():
            job = run.job
            if job.priority >= below:
                continue
            nodes = [p.node for p in self.state.placements[job_id]]
            if not allowed[nodes].all():
                continue
            last_s = run.last_checkpoint_s(self.now, iv)
            out[job_id] = RunningJob(job, run.first_start_s, last_s, job.priority in PREEMPTIBLE, last_s + iv)
        self._running_cache[key] = out
        return out

    def _replay(
        self, job: Job, plan: VictimPlan, allowed: BoolArray, running: Mapping[int, RunningJob]
    ) -> bool:
        if plan.job_id != job.job_id or (not plan.evict and not plan.moves):
            return False
        touched = list(plan.evict) + [m.job_id for m in plan.moves]
        if len(set(touched)) != len(touched) or any(j not in running for j in touched):
            return False
        if not allowed[list(plan.nodes)].all():
            return False
        scratch = self.state.copy()
        try:
            for j in touched:
                scratch.unbind(j)
            for m in plan.moves:
                moved = self.jobs[m.job_id]
                if not self.allowed(moved)[list(m.to_nodes)].all():
                    return False
                scratch.bind(moved, list(m.to_nodes))
                check_job(scratch, moved)
            scratch.bind(job, list(plan.nodes))
            check_job(scratch, job)
        except (PlacementError, InvariantError):
            return False
        return True

    def _may_wait_s(self, job: Job) -> float | None:
        """How long ``job`` may still wait for its victims' checkpoints (module docstring);
        None while it waits for a plan it was given (it asks no rule before then)."""
        if self.cfg.checkpoint_wait_s <= 0 or job.priority >= PRODUCTION:
            return 0.0
        waiting = self.waiting.get(job.job_id)
        if waiting is None:
            return self.cfg.checkpoint_wait_s
        if self.now < waiting.asks_at_s:
            return None
        return max(0.0, waiting.ends_s - self.now)

    def _preempt(self, job: Job, allowed: BoolArray) -> str:
        """Preempt for a blocked job (module docstring): ``STARTED``, ``REFUSED`` (no plan) or
        ``WAITING`` (it waits for checkpoints; the jobs behind it may still preempt)."""
        if self.victims is None or job.priority <= BEST_EFFORT:
            return REFUSED
        may_wait_s = self._may_wait_s(job)
        if may_wait_s is None:
            return WAITING
        running = self._running_jobs(allowed, job.priority)
        if self.waiting and job.priority < PRODUCTION:  # victims another job still waits for are its
            claimed = {
                v
                for j, w in self.waiting.items()
                if j != job.job_id and w.asks_at_s > self.now
                for v in w.victims
            }
            running = {j: r for j, r in running.items() if j not in claimed}
        if not running:
            return REFUSED
        c0 = time.perf_counter()
        plan = self.victims.choose(
            self.view(allowed).copy(), job, running, self.policy, self.now, self.cfg.restart_s, may_wait_s
        )
        self.result.victim_calls_s.append(time.perf_counter() - c0)
        if plan is None:
            return REFUSED
        if plan.not_before_s > self.now:
            if plan.not_before_s > self.now + may_wait_s + 1e-6:
                self._count("plans_refused")
                return REFUSED
            before = self.waiting.get(job.job_id)
            ends_s = before.ends_s if before is not None else self.now + self.cfg.checkpoint_wait_s
            victims = frozenset([*plan.evict, *(m.job_id for m in plan.moves)])
            self.waiting[job.job_id] = _Waiting(plan.not_before_s, ends_s, victims)
            self._push(plan.not_before_s, _WAKE, job.job_id)
            self._count("preemption_waits")
            self.hash.update(f"W{job.job_id}@{self.now:.3f}:{plan.not_before_s:.3f}".encode())
            return WAITING
        if not self._replay(job, plan, allowed, running):
            self._count("plans_refused")
            return REFUSED
        for j in plan.evict:
            self._kill(j, "preemption")
            self._count("preempted_jobs")
        for m in plan.moves:
            self.state.unbind(m.job_id)
        for m in plan.moves:
            self._move(m.job_id, list(m.to_nodes), "preemption")
        self._count("preemptions")
        del self.queue[(-job.priority, job.submit_s, job.job_id)]
        self._start(job, list(plan.nodes))
        return STARTED

    def _evict_spare_best_effort(self, job: Job, allowed: BoolArray) -> bool:
        """Pooled spares: room for a recovering job by evicting best-effort jobs off spares."""
        if not self.cfg.spare_policy.startswith("pooled") or job.job_id not in self.recovering:
            return False
        candidates = [
            j
            for j, run in self.running.items()
            if run.job.priority == BEST_EFFORT and any(self.spare[p.node] for p in self.state.placements[j])
        ]
        if not candidates:
            return False
        scratch = self.state.copy()
        for j in candidates:
            scratch.unbind(j)
        scratch.hide(np.flatnonzero(~allowed))
        nodes = self.policy.place(scratch, job)
        if nodes is None:
            return False
        chosen = set(nodes)
        for j in candidates:
            if any(p.node in chosen for p in self.state.placements[j]):
                self._kill(j, "preemption")
                self._count("spare_evictions")
        del self.queue[(-job.priority, job.submit_s, job.job_id)]
        self._start(job, nodes)
        return True

    def _fits_somewhere(self, job: Job, allowed: BoolArray, flags: tuple[bool, bool, int]) -> bool:
        """A necessary condition for placing ``job`` on its view: a node with room for its
        largest pod (or, for a sharing pod, a GPU with its milli free) and, for a gang, as
        many free GPUs in all.  Read from maxima kept per view until the state changes."""
        cached = self._maxima.get(flags)
        if cached is None or cached[0] != (self.state.version, self.spare_version):
            view = self.view(allowed)
            cached = (
                (self.state.version, self.spare_version),
                int(view.free_gpus.max(initial=0)),
                int(view.free_milli.max(initial=0)),
                int(view.free_gpus.sum()),
            )
            self._maxima[flags] = cached
        _, max_free_gpus, max_free_milli, free_gpus = cached
        if job.is_sharing:
            return max_free_milli >= job.gpu_milli
        sizes = self.state.pods_of(job)
        return max(sizes) <= max_free_gpus and sum(sizes) <= free_gpus

    def _pass(self) -> None:
        """Try every queued job in key order (module docstring); a job whose shape, priority and
        recovery status were already refused in this pass is skipped."""
        self.dirty = False
        for job_id in [j for j, (_, until) in self.held.items() if until <= self.now]:
            self._release(job_id)
        self._replenish()  # nodes freed by kills, moves or released holds since the last pass
        refused: set[tuple[object, ...]] = set()
        masks: dict[tuple[bool, bool, int, int], BoolArray] = {}
        self._maxima = {}
        for key in sorted(self.queue):
            if key not in self.queue:  # started by an earlier step of this pass
                continue
            job = self.jobs[key[2]]
            recovering = job.job_id in self.recovering
            flags = (recovering, job.priority == BEST_EFFORT, job.job_id if job.job_id in self.held else -1)
            shape = (tuple(self.state.pods_of(job)), job.gpu_milli, job.constraint, job.priority, *flags)
            if shape in refused:
                continue
            allowed = masks.get((*flags, self.spare_version))
            if allowed is None:
                allowed = masks[(*flags, self.spare_version)] = self.allowed(job)
            if self._fits_somewhere(job, allowed, flags):
                nodes = self.policy.place(self.view(allowed), job)
                if nodes is not None:
                    del self.queue[key]
                    self._start(job, nodes)
                    continue
            if self._evict_spare_best_effort(job, allowed):
                continue
            outcome = self._preempt(job, allowed)
            if outcome == REFUSED:  # a waiting job's shape is not refused: others take other victims
                refused.add(shape)

    # ---- main loop -------------------------------------------------------------------------
    def run(self) -> Sim3Result:
        cfg = self.cfg
        snap = snapshot(self.state)
        while True:
            t_event = self.events[0][0] if self.events else float("inf")
            t = min(t_event, cfg.measure_end_s)
            self.meter.advance(self.now, t, snap, False)
            lo, hi = max(self.now, cfg.measure_start_s), min(t, cfg.measure_end_s)
            if hi > lo:
                self.result.node_s += float(self.powered.sum()) * (hi - lo)
            self.now = t
            if t >= cfg.measure_end_s:
                break
            tick = False
            while self.events and self.events[0][0] == t:
                _, kind, _, who, token = heapq.heappop(self.events)
                if kind == _FAIL:
                    self._fail(who)
                elif kind == _REPAIR:
                    self._repair(who)
                elif kind == _POWERED:
                    self._powered_on(who)
                elif kind == _TICK:
                    tick = True
                elif kind == _WAKE:
                    self.dirty = True
                elif kind == _ARRIVE:
                    job = self.jobs[who]
                    self.queue[(-job.priority, job.submit_s, job.job_id)] = None
                    self.dirty = True
                else:
                    self._end(who, token)
            for _ in range(8):  # kills requeue jobs: try again until nothing changes
                if not self.dirty:
                    break
                self._pass()
            if tick:  # elastic decisions see the queue the pass left: the jobs really blocked
                self._tick()
                for _ in range(8):
                    if not self.dirty:
                        break
                    self._pass()
            if cfg.check_every_event:
                self._check()
            snap = snapshot(self.state)
        self._check()
        return self._finish()

    def _check(self) -> None:
        check_state(self.state)
        if any(self.state.node_jobs[n] for n in np.flatnonzero(self.down)):
            raise InvariantError("a job runs on a down node")
        queued = {k[2] for k in self.queue}
        if queued & set(self.running) or len(queued) != len(self.queue):
            raise InvariantError("a job is both queued and running, or queued twice")

    def _finish(self) -> Sim3Result:
        r = self.result
        r.records = sorted(self.records.values(), key=lambda x: x.job.job_id)
        in_window = set(self.records)
        for job_id, failed_at in sorted(self.recovering.items()):
            if failed_at >= self.cfg.measure_start_s:  # failed inside the window, not working yet
                r.restart_times_s.append((self.jobs[job_id].gpus, self.cfg.measure_end_s - failed_at))
                r.restart_censored += 1
        r.pending_at_end = sum(1 for k in self.queue if k[2] in in_window)
        r.running_at_end = sum(1 for j in self.running if j in in_window)
        r.event_hash = self.hash.hexdigest()[:16]
        return r


def simulate3(
    topology: Topology,
    jobs: Iterable[Job],
    policy: GangPolicy,
    cfg: Sim3Config,
    outages: list[Outage] | None = None,
    spares: BoolArray | None = None,
    victims: VictimRule | None = None,
) -> Sim3Result:
    """Run one suite 3 scenario (module docstring); deterministic for deterministic inputs."""
    t0 = time.perf_counter()
    job_list = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
    if len({j.job_id for j in job_list}) != len(job_list):
        raise ValueError("job ids must be unique")
    mask = np.zeros(topology.num_nodes, dtype=bool) if spares is None else spares
    result = _Sim3(topology, job_list, policy, victims, outages or [], mask, cfg).run()
    result.wall_s = time.perf_counter() - t0
    return result
