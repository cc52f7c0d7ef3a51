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

import time
from collections.abc import Iterable

import numpy as np

from gpudefrag.capacity.classes import BEST_EFFORT
from gpudefrag.capacity.failures import Outage
from gpudefrag.capacity.victims import VictimRule
from gpudefrag.gangs.metrics import snapshot
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.model.jobs import Job
from gpudefrag.model.topology import Topology
from gpudefrag.sim.capacity_core import CapacityCore
from gpudefrag.sim.capacity_elastic import Elastic
from gpudefrag.sim.capacity_model import (
    ARRIVE,
    FAIL,
    POWERED,
    REFUSED,
    REPAIR,
    TICK,
    WAKE,
    BoolArray,
    Sim3Config,
    Sim3Result,
)
from gpudefrag.sim.capacity_plans import CapacityPlans
from gpudefrag.sim.capacity_preempt import Preemption
from gpudefrag.sim.engine import run_events

__all__ = ["simulate3"]


class _Sim3:
    """One run: the core, its components, the scheduling pass and the event loop."""

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
        self.core = CapacityCore(topology, jobs, policy, victims, outages, spares, cfg)
        plans = CapacityPlans(self.core)
        self.elastic = Elastic(self.core, plans)
        self.preemption = Preemption(self.core, plans)

    def fits_somewhere(self, job: Job, allowed: BoolArray, flags: tuple[bool, bool, int]) -> bool:
        """A necessary condition for placing ``job`` on its view: a node with room for its
        largest pod (or, for a sharing pod, a GPU with its milli free) and, for a gang, as
        many free GPUs in all.  Read from maxima kept per view until the state changes."""
        c = self.core
        cached = c.maxima.get(flags)
        if cached is None or cached[0] != (c.state.epoch, c.spare_version):
            view = c.view(allowed)
            cached = (
                (c.state.epoch, c.spare_version),
                int(view.free_gpus.max(initial=0)),
                int(view.gpu_milli_left.max(initial=0)),
                int(view.free_gpus.sum()),
            )
            c.maxima[flags] = cached
        _, max_free_gpus, max_free_milli, free_gpus = cached
        if job.is_sharing:
            return max_free_milli >= job.gpu_milli
        sizes = c.state.pods_of(job)
        return max(sizes) <= max_free_gpus and sum(sizes) <= free_gpus

    def scheduling_pass(self) -> None:
        """Try every queued job in key order (module docstring); a job whose shape, priority and
        recovery status were already refused in this pass is skipped."""
        c = self.core
        c.dirty = False
        for job_id in [j for j, (_, until) in c.held.items() if until <= c.now]:
            c.release(job_id)
        c.replenish()  # nodes freed by kills, moves or released holds since the last pass
        refused: set[tuple[object, ...]] = set()
        masks: dict[tuple[bool, bool, int, int], BoolArray] = {}
        c.maxima = {}
        for key in sorted(c.queue):
            if key not in c.queue:  # started by an earlier step of this pass
                continue
            job = c.jobs[key[2]]
            recovering = job.job_id in c.recovering
            flags = (recovering, job.priority == BEST_EFFORT, job.job_id if job.job_id in c.held else -1)
            shape = (tuple(c.state.pods_of(job)), job.gpu_milli, job.constraint, job.priority, *flags)
            if shape in refused:
                continue
            allowed = masks.get((*flags, c.spare_version))
            if allowed is None:
                allowed = masks[(*flags, c.spare_version)] = c.allowed(job)
            if self.fits_somewhere(job, allowed, flags):
                nodes = c.policy.place(c.view(allowed), job)
                if nodes is not None:
                    del c.queue[key]
                    c.start(job, nodes)
                    continue
            if self.preemption.evict_spare_best_effort(job, allowed):
                continue
            outcome = self.preemption.preempt(job, allowed)
            if outcome == REFUSED:  # a waiting job's shape is not refused: others take other victims
                refused.add(shape)

    def run(self) -> Sim3Result:
        """The run on the event loop: at every event time, the failures, repairs, arrivals,
        ends and wake-ups, then scheduling passes until nothing changes, then (at an elastic
        tick) the elastic decisions and passes again."""
        c = self.core
        cfg = c.cfg
        snap = snapshot(c.state)
        tick = False

        def advance(t: float) -> None:
            c.meter.advance(c.now, t, snap, False)
            lo, hi = max(c.now, cfg.measure_start_s), min(t, cfg.measure_end_s)
            if hi > lo:
                c.result.node_s += float(c.powered.sum()) * (hi - lo)
            c.now = t

        def on_event(t: float, kind: int, payload: tuple[int, int]) -> None:
            nonlocal tick
            who, token = payload
            if kind == FAIL:
                c.fail(who)
            elif kind == REPAIR:
                c.repair(who)
            elif kind == POWERED:
                self.elastic.powered_on(who)
            elif kind == TICK:
                tick = True
            elif kind == WAKE:
                c.dirty = True
            elif kind == ARRIVE:
                job = c.jobs[who]
                c.queue[(-job.priority, job.submit_s, job.job_id)] = None
                c.dirty = True
            else:
                c.end(who, token)

        def after_events(t: float) -> None:
            nonlocal snap, tick
            for _ in range(8):  # kills requeue jobs: try again until nothing changes
                if not c.dirty:
                    break
                self.scheduling_pass()
            if tick:  # elastic decisions see the queue the pass left: the jobs really blocked
                tick = False
                self.elastic.tick()
                for _ in range(8):
                    if not c.dirty:
                        break
                    self.scheduling_pass()
            if cfg.check_every_event:
                c.check()
            snap = snapshot(c.state)

        run_events(c.events, cfg.measure_end_s, on_event, advance, after_events)
        c.check()
        return c.finish()


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
