"""Preemption for suite 3 (:mod:`gpudefrag.sim.capacity_sim`, "Preemption", "Waiting for
checkpoints", "Pooled spares"): a blocked job asks the victim rule for a plan, may wait for its
victims' checkpoints, or, recovering, evicts best-effort work from spares."""

from __future__ import annotations

import time

import numpy as np

from gpudefrag.capacity.classes import BEST_EFFORT, PRODUCTION
from gpudefrag.model.jobs import Job
from gpudefrag.model.session import Session
from gpudefrag.sim.capacity_core import CapacityCore
from gpudefrag.sim.capacity_model import (
    REFUSED,
    STARTED,
    WAITING,
    WAKE,
    BoolArray,
    Waiting,
)
from gpudefrag.sim.capacity_plans import CapacityPlans


class Preemption:
    """Preemption over one run's :class:`~gpudefrag.sim.capacity_core.CapacityCore`."""

    def __init__(self, core: CapacityCore, plans: CapacityPlans) -> None:
        self.core, self.plans = core, plans

    def may_wait_s(self, job: Job) -> float | None:
        """How long ``job`` may still wait for its victims' checkpoints (module docstring);
        None while it waits for a plan it was given (it asks no rule before then)."""
        c = self.core
        if c.cfg.checkpoint_wait_s <= 0 or job.priority >= PRODUCTION:
            return 0.0
        waiting = c.waiting.get(job.job_id)
        if waiting is None:
            return c.cfg.checkpoint_wait_s
        if c.now < waiting.asks_at_s:
            return None
        return max(0.0, waiting.ends_s - c.now)

    def preempt(self, job: Job, allowed: BoolArray) -> str:
        """Preempt for a blocked job (module docstring): ``STARTED``, ``REFUSED`` (no plan) or
        ``WAITING`` (it waits for checkpoints; the jobs behind it may still preempt)."""
        c = self.core
        if c.victims is None or job.priority <= BEST_EFFORT:
            return REFUSED
        may_wait_s = self.may_wait_s(job)
        if may_wait_s is None:
            return WAITING
        running = self.plans.running_jobs(allowed, job.priority)
        if c.waiting and job.priority < PRODUCTION:  # victims another job still waits for are its
            claimed = {
                v for j, w in c.waiting.items() if j != job.job_id and w.asks_at_s > c.now for v in w.victims
            }
            running = {j: r for j, r in running.items() if j not in claimed}
        if not running:
            return REFUSED
        c0 = time.perf_counter()
        session = Session(c.now, c.view(allowed).copy(), (), running)
        plan = c.victims.choose(session, job, c.policy, c.cfg.restart_s, may_wait_s)
        c.result.victim_calls_s.append(time.perf_counter() - c0)
        if plan is None:
            return REFUSED
        if plan.not_before_s > c.now:
            if plan.not_before_s > c.now + may_wait_s + 1e-6:
                c.count("plans_refused")
                return REFUSED
            before = c.waiting.get(job.job_id)
            ends_s = before.ends_s if before is not None else c.now + c.cfg.checkpoint_wait_s
            victims = frozenset([*plan.evict, *(m.job_id for m in plan.moves)])
            c.waiting[job.job_id] = Waiting(plan.not_before_s, ends_s, victims)
            c.push(plan.not_before_s, WAKE, job.job_id)
            c.count("preemption_waits")
            c.hash.update(f"W{job.job_id}@{c.now:.3f}:{plan.not_before_s:.3f}".encode())
            return WAITING
        if not self.plans.replay(job, plan, allowed, running):
            c.count("plans_refused")
            return REFUSED
        self.plans.execute(self.plans.plan_statement(job, plan), "preemption", "preemption")
        c.count("preempted_jobs", len(plan.evict))
        c.count("preemptions")
        return STARTED

    def evict_spare_best_effort(self, job: Job, allowed: BoolArray) -> bool:
        """Pooled spares: room for a recovering job by evicting best-effort jobs off spares."""
        c = self.core
        if not c.cfg.spare_policy.startswith("pooled") or job.job_id not in c.recovering:
            return False
        candidates = [
            j
            for j, run in c.running.items()
            if run.job.priority == BEST_EFFORT and any(c.spare[p.node] for p in c.state.placements[j])
        ]
        if not candidates:
            return False
        scratch = c.state.copy()
        for j in candidates:
            scratch.unbind_job(j)
        scratch.hide(np.flatnonzero(~allowed))
        nodes = c.policy.place(scratch, job)
        if nodes is None:
            return False
        chosen = set(nodes)
        stmt = self.plans.statement()
        for j in candidates:
            if any(p.node in chosen for p in c.state.placements[j]):
                stmt.evict(j)
        self.plans.execute(stmt.bind(job.job_id, job, nodes), "preemption")
        c.count("spare_evictions", len(stmt.evictions))
        return True
