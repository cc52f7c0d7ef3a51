"""The state of one suite 3 run (:mod:`gpudefrag.sim.capacity_sim`) and what changes it: the
nodes a job may use and its view of the state, the job lifecycle (start, end, kill, move) with
its waste accounting, the spare pool, failures and repairs, and the checks of a plan before it is
executed."""

from __future__ import annotations

import hashlib

import numpy as np

from gpudefrag.capacity.classes import BEST_EFFORT
from gpudefrag.capacity.failures import Outage
from gpudefrag.capacity.spares import may_use_spares
from gpudefrag.capacity.victims import VictimRule
from gpudefrag.gangs.invariants import InvariantError, check_job, check_state
from gpudefrag.gangs.metrics import Meter
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.gangs.running import Running
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job
from gpudefrag.model.topology import Topology
from gpudefrag.sim.capacity_model import (
    ARRIVE,
    END,
    FAIL,
    REPAIR,
    TICK,
    WAKE,
    BoolArray,
    Job3Record,
    Sim3Config,
    Sim3Result,
    Waiting,
)
from gpudefrag.sim.engine import EventQueue


class CapacityCore:
    """Everything one run shares; the elastic and preemption components and the scheduling pass
    act through its methods."""

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
        self.state = ClusterState.for_topology(topology)
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
        self.events = EventQueue()  # (time, kind, push order)
        for job in jobs:
            self.events.push(job.submit_s, ARRIVE, (job.job_id, 0))
        for o in outages:
            self.events.push(o.fail_s, FAIL, (o.node, 0))
            self.events.push(o.repair_s, REPAIR, (o.node, 0))
        if cfg.elastic is not None:
            self.events.push(cfg.elastic.tick_s, TICK, (0, 0))
        self.queue: dict[tuple[int, float, int], None] = {}  # keys in arrival order; tried sorted
        self.running: dict[int, Running] = {}
        self.suspended: dict[int, Running] = {}  # killed, waiting to restart from a checkpoint
        self.recovering: dict[int, float] = {}  # job id -> failure time, until it works again
        self.kill_cause: dict[int, str] = {}  # suspended job -> why it was killed
        self.waiting: dict[int, Waiting] = {}  # queued job -> the checkpoints it waits for
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
        self._views: dict[bytes, ClusterState] = {}
        self._views_version = -1
        self.maxima: dict[tuple[bool, bool, int], tuple[tuple[int, int], int, int, int]] = {}

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

    def view(self, allowed: BoolArray) -> ClusterState:
        """The state with every node outside ``allowed`` showing no free capacity (cached per
        mask until the state changes)."""
        if allowed.all():
            return self.state
        if self._views_version != self.state.epoch:
            self._views, self._views_version = {}, self.state.epoch
        key = allowed.tobytes()
        v = self._views.get(key)
        if v is None:
            v = self.state.copy()
            v.hide(np.flatnonzero(~allowed))
            self._views[key] = v
        return v

    def in_window(self) -> bool:
        return self.cfg.measure_start_s <= self.now < self.cfg.measure_end_s

    def count(self, name: str, k: int = 1) -> None:
        """Add ``k`` to the result's counter ``name`` if now is inside the window."""
        if self.in_window():
            setattr(self.result, name, getattr(self.result, name) + k)

    def lose(self, job: Job, lost_s: float, cause: str) -> None:
        if self.in_window():
            self.result.lost_gpu_s[cause] += job.gpu_share * lost_s

    def restart_waste(self, job: Job, sign: float, until_s: float, cause: str | None = None) -> None:
        """Charge (``sign`` 1) or give back (-1) the restart of ``job`` from now to ``until_s``
        inside the window; ``cause`` starts a restart, a give-back uses the restart's own."""
        if cause is not None:
            self.restart_cause[job.job_id] = cause
        lo, hi = max(self.now, self.cfg.measure_start_s), min(until_s, self.cfg.measure_end_s)
        if hi > lo:
            gpu_s = sign * job.gpu_share * (hi - lo)
            self.result.restart_gpu_s += gpu_s
            self.result.restart_gpu_s_by_cause[self.restart_cause[job.job_id]] += gpu_s

    def push(self, at_s: float, kind: int, who: int, token: int = 0) -> None:
        """Schedule an event; equal (time, kind) events run in the order pushed."""
        self.events.push(at_s, kind, (who, token))

    def push_end(self, run: Running) -> None:
        self.push(run.end_s, END, run.job.job_id, run.token)

    def bind(self, job: Job, nodes: list[int]) -> None:
        self.state.bind_job(job, nodes)
        check_job(self.state, job)
        if self.down[nodes].any():
            raise InvariantError(f"job {job.job_id} bound on a down node: {nodes}")

    def start(self, job: Job, nodes: list[int], committed: bool = False) -> None:
        """Start (or restart from its checkpoint) a queued job on ``nodes`` (``committed``: a
        statement has bound it already)."""
        if not committed:
            self.bind(job, nodes)
        run = self.suspended.pop(job.job_id, None)
        if run is None:
            run = Running(job, self.now, self.now)
            rec = self.records.get(job.job_id)
            if rec is not None:
                rec.start_s = self.now
        else:
            run.work_start_s = self.now + self.cfg.restart_s
            run.token += 1
            self.restart_waste(job, 1.0, run.work_start_s, self.kill_cause.pop(job.job_id))
        self.waiting.pop(job.job_id, None)
        failed_at = self.recovering.pop(job.job_id, None)
        if failed_at is not None and failed_at >= self.cfg.measure_start_s:
            self.result.restart_times_s.append((job.gpus, run.work_start_s - failed_at))
        self.running[job.job_id] = run
        self.push_end(run)
        self.hash.update(f"S{job.job_id}@{self.now:.3f}:{nodes}".encode())
        if failed_at is not None:
            self.release(job.job_id)
            self.take_spares(nodes)

    def release(self, job_id: int) -> None:
        """End the hold on a failed gang's healthy nodes (it restarted, or the hold expired)."""
        hold = self.held.pop(job_id, None)
        if hold is not None:
            self.held_mask[hold[0]] = False
            self.spare_version += 1
            self.dirty = True

    def take_spares(self, nodes: list[int]) -> None:
        """A recovering job started on spare nodes: they become regular nodes, and as many
        wholly free nodes take the spare role in their place (:meth:`_replenish`)."""
        taken = [n for n in dict.fromkeys(nodes) if self.spare[n]]
        if not taken:
            return
        for n in taken:
            self.spare[n] = False
            self.spare_debt.append(int(self._spare_domain[n]))
        self.spare_version += 1
        self.replenish()

    def replenish(self) -> None:
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
            self.count("spare_swaps")
            self.hash.update(f"P{node}@{self.now:.3f}".encode())
        if len(owed) != len(self.spare_debt):
            self.spare_version += 1
        self.spare_debt = owed

    def end(self, job_id: int, token: int) -> None:
        run = self.running.get(job_id)
        if run is None or run.token != token:
            return
        del self.running[job_id]
        self.state.unbind_job(job_id)
        rec = self.records.get(job_id)
        if rec is not None:
            rec.end_s = self.now
        self.count("completed")
        self.dirty = True
        self.replenish()

    def kill(self, job_id: int, cause: str, committed: bool = False) -> None:
        """Evict a running job: it loses the work since its last checkpoint and is requeued
        (``committed``: a statement has unbound it already)."""
        run = self.running.pop(job_id)
        iv = self.cfg.checkpoint_interval_s
        if run.work_start_s > self.now:  # still restarting: give back the unserved restart
            self.restart_waste(run.job, -1.0, run.work_start_s)
        lost = run.lost_work_s(self.now, iv)
        run.saved_work_s += run.progress_s(self.now) - lost
        run.work_start_s = self.now
        run.token += 1
        self.lose(run.job, lost, cause)
        if not committed:
            self.state.unbind_job(job_id)
        self.suspended[job_id] = run
        self.kill_cause[job_id] = cause
        job = run.job
        self.queue[(-job.priority, job.submit_s, job.job_id)] = None
        rec = self.records.get(job_id)
        if rec is not None:
            rec.kills += 1
        self.hash.update(f"K{job_id}@{self.now:.3f}:{cause}".encode())
        self.dirty = True

    def move(
        self, job_id: int, to_nodes: list[int], cause: str = "migration", committed: bool = False
    ) -> None:
        """Move a running job (already unbound) to ``to_nodes``: restart from its checkpoint
        (``committed``: a statement has bound it there already).  Its lost work and restart are
        charged to ``cause`` (``preemption`` for the moves of a preemption plan: they are part
        of what that preemption costs)."""
        run = self.running[job_id]
        if run.work_start_s > self.now:
            self.restart_waste(run.job, -1.0, run.work_start_s)
        lost = run.move(self.now, self.cfg.checkpoint_interval_s, self.cfg.restart_s)
        self.lose(run.job, lost, cause)
        self.restart_waste(run.job, 1.0, run.work_start_s, cause)
        if not committed:
            self.bind(run.job, to_nodes)
        self.push_end(run)
        self.count("moves")
        rec = self.records.get(job_id)
        if rec is not None:
            rec.moves += 1
        self.hash.update(f"M{job_id}@{self.now:.3f}:{to_nodes}".encode())

    def fail(self, node: int) -> None:
        self.count("failures")
        self.down[node] = True
        for job_id in sorted(self.state.node_jobs[node]):
            nodes = sorted({p.node for p in self.state.placements[job_id]})
            self.kill(job_id, "failure")
            self.recovering.setdefault(job_id, self.now)
            self.count("jobs_killed_by_failure")
            healthy = [n for n in nodes if not self.down[n] and not self.held_mask[n]]
            if len(nodes) > 1 and healthy and self.cfg.hold_failed_gang_s > 0:
                self.release(job_id)
                self.held[job_id] = (healthy, self.now + self.cfg.hold_failed_gang_s)
                self.held_mask[healthy] = True
                self.spare_version += 1
                # the pass after the hold's expiry releases it
                self.push(self.now + self.cfg.hold_failed_gang_s, WAKE, job_id)
        self.hash.update(f"F{node}@{self.now:.3f}".encode())
        self.dirty = True

    def repair(self, node: int) -> None:
        self.down[node] = False
        self.dirty = True
        self.replenish()

    def check(self) -> None:
        check_state(self.state)
        if any(self.state.node_jobs[n] for n in np.flatnonzero(self.down)):
            raise InvariantError("a job runs on a down node")
        queued = {k[2] for k in self.queue}
        if queued & set(self.running) or len(queued) != len(self.queue):
            raise InvariantError("a job is both queued and running, or queued twice")

    def finish(self) -> Sim3Result:
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
