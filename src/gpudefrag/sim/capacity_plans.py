"""The plans of a suite 3 run (:mod:`gpudefrag.sim.capacity_sim`): the running jobs a victim
rule may take, the statement of a plan (:mod:`gpudefrag.model.statement`), whether a plan may
run now, and its execution (the statement committed, then the lifecycle of every job it
touched)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpudefrag.capacity.classes import PREEMPTIBLE
from gpudefrag.capacity.victims import VictimPlan
from gpudefrag.gangs.invariants import InvariantError, check_job
from gpudefrag.gangs.statements import GangStatement
from gpudefrag.model.jobs import Job
from gpudefrag.model.session import RunningInfo
from gpudefrag.model.statement import JobLedger, Ledger, Statement
from gpudefrag.sim.capacity_core import CapacityCore
from gpudefrag.sim.capacity_model import BoolArray


class CapacityPlans:
    """Plans on one run's core."""

    def __init__(self, core: CapacityCore) -> None:
        self.core = core
        self._running_cache: dict[tuple[bytes, int], dict[int, RunningInfo]] = {}
        self._running_stamp: tuple[int, float] = (-1, -1.0)

    def running_jobs(self, allowed: BoolArray, below: int) -> dict[int, RunningInfo]:
        """Running jobs of priority below ``below`` whose pods all sit on allowed nodes (cached
        until the state or the time changes)."""
        c = self.core
        stamp = (c.state.epoch, c.now)
        if self._running_stamp != stamp:
            self._running_cache, self._running_stamp = {}, stamp
        key = (allowed.tobytes(), below)
        cached = self._running_cache.get(key)
        if cached is not None:
            return cached
        iv = c.cfg.checkpoint_interval_s
        out: dict[int, RunningInfo] = {}
        for job_id, run in c.running.items():
            job = run.job
            if job.priority >= below:
                continue
            nodes = [p.node for p in c.state.placements[job_id]]
            if not allowed[nodes].all():
                continue
            last_s = run.last_checkpoint_s(c.now, iv)
            out[job_id] = RunningInfo(
                job, run.first_start_s, last_s, last_s + iv, job.priority in PREEMPTIBLE
            )
        self._running_cache[key] = out
        return out

    def statement(self) -> GangStatement:
        """An empty statement on the run's state: every job it binds is checked as
        :meth:`CapacityCore.bind` checks it (its gang whole, its constraint kept, no down node)."""
        c = self.core
        return Statement(JobLedger(c.state), self._check_bound)

    def _check_bound(self, ledger: Ledger[Job, Sequence[int]], job: Job) -> None:
        c = self.core
        assert isinstance(ledger, JobLedger)
        check_job(ledger.state, job)
        nodes = [p.node for p in ledger.state.placements[job.job_id]]
        if c.down[nodes].any():
            raise InvariantError(f"job {job.job_id} bound on a down node: {nodes}")

    def plan_statement(self, job: Job, plan: VictimPlan) -> GangStatement:
        """The statement of a victim plan: evict, move, then start ``job``."""
        stmt = self.statement()
        for j in plan.evict:
            stmt.evict(j)
        for m in plan.moves:
            stmt.move(m.job_id, m.to_nodes)
        return stmt.bind(job.job_id, job, plan.nodes)

    def execute(
        self, stmt: GangStatement, kill_cause: str = "preemption", move_cause: str = "migration"
    ) -> None:
        """Commit ``stmt`` to the state, then run the lifecycle of every job it touched in the
        statement's order: the evicted are killed (``kill_cause``), the moved restart from their
        checkpoints (``move_cause``), the started leave the queue and start."""
        c = self.core
        stmt.commit()
        for j in stmt.evictions:
            c.kill(j, kill_cause, committed=True)
        for m in stmt.moves:
            c.move(m.unit_id, list(m.to), move_cause, committed=True)
        for _, job, nodes in stmt.binds:
            del c.queue[(-job.priority, job.submit_s, job.job_id)]
            c.start(job, list(nodes), committed=True)

    def replay(
        self, job: Job, plan: VictimPlan, allowed: BoolArray, running: Mapping[int, RunningInfo]
    ) -> bool:
        """Whether ``plan`` may run now: it is for ``job``, every job it touches is one of
        ``running`` (and named once), every node it binds is one the bound job may use, and its
        statement replays on the state."""
        c = self.core
        if plan.job_id != job.job_id or (not plan.evict and not plan.moves):
            return False
        touched = list(plan.evict) + [m.job_id for m in plan.moves]
        if len(set(touched)) != len(touched) or any(j not in running for j in touched):
            return False
        if not allowed[list(plan.nodes)].all():
            return False
        if not all(c.allowed(c.jobs[m.job_id])[list(m.to_nodes)].all() for m in plan.moves):
            return False
        return self.plan_statement(job, plan).why_not() is None
