"""Elastic nodes for suite 3 (:mod:`gpudefrag.sim.capacity_sim`, "Elastic mode"): idle nodes
powered off beyond a warm pool, nodes powered on for blocked jobs after a provisioning delay
unless a cheap moves-only plan serves them, lightly used nodes drained."""

from __future__ import annotations

import numpy as np

from gpudefrag.model.jobs import Job
from gpudefrag.model.migration import disruption_cost_gpu_s
from gpudefrag.model.session import Session
from gpudefrag.sim.capacity_core import CapacityCore
from gpudefrag.sim.capacity_model import (
    POWERED,
    TICK,
    BoolArray,
)
from gpudefrag.sim.capacity_plans import CapacityPlans


class Elastic:
    """Elastic mode's decisions over one run's :class:`~gpudefrag.sim.capacity_core.CapacityCore`."""

    def __init__(self, core: CapacityCore, plans: CapacityPlans) -> None:
        self.core, self.plans = core, plans

    def powered_on(self, node: int) -> None:
        c = self.core
        c.off[node] = False
        c.idle_since[node] = c.now
        c.dirty = True

    def tick(self) -> None:
        c = self.core
        e = c.cfg.elastic
        assert e is not None
        c.push(c.now + e.tick_s, TICK, 0)
        busy = np.array([bool(s) for s in c.state.node_jobs])
        c.idle_since[busy] = c.now
        if not c.queue:
            on_idle = c.powered & ~c.off & ~c.down & ~busy & ~c.held_mask
            idle = on_idle & (c.now - c.idle_since >= e.idle_off_s)
            keep = int(np.ceil(e.warm_fraction * (c.topology.num_nodes - c.cfg.standby_nodes)))
            if keep and idle.any():  # the warm pool: the most recently idle nodes stay on
                cands = np.flatnonzero(idle)
                spare_on = int(on_idle.sum()) - keep
                order = cands[np.lexsort((cands, c.idle_since[cands]))]
                idle = np.zeros_like(idle)
                idle[order[: max(0, spare_on)]] = True
            if idle.any():
                c.off[idle] = True
                c.powered[idle] = False
                c.count("powered_off", int(idle.sum()))
                c.hash.update(f"O{np.flatnonzero(idle).tolist()}@{c.now:.3f}".encode())
            self.drain(busy)
            return
        first = c.jobs[min(c.queue)[2]]
        if self.moves_for(first, e.provision_s):
            return
        self.power_on()

    def moves_for(self, job: Job, provision_s: float) -> bool:
        """A moves-only plan for a blocked job, taken if it costs at most waiting for nodes."""
        c = self.core
        if c.victims is None:
            return False
        allowed = c.allowed(job)
        probe = Job(
            job.job_id, job.submit_s, job.duration_s, job.gpus, job.gpu_milli, 1 << 30, job.constraint
        )
        running = self.plans.running_jobs(allowed, probe.priority)
        if not running:
            return False
        plan = c.victims.choose(
            Session(c.now, c.view(allowed).copy(), (), running), probe, c.policy, c.cfg.restart_s
        )
        if plan is None or plan.evict or not plan.moves or plan.cost_gpu_s > job.gpu_share * provision_s:
            return False
        if not self.plans.replay(job, plan, allowed, running):
            c.count("plans_refused")
            return False
        self.plans.execute(self.plans.plan_statement(job, plan))
        return True

    def power_on(self) -> None:
        """Power on nodes for the waiting jobs (each blocked after the pass): a pod of whole GPUs
        gets a node of its own, sharing pods share nodes by their GPU shares; nodes already
        provisioning count.  (Free GPUs scattered over busy nodes do not: they did not serve.)"""
        c = self.core
        e = c.cfg.elastic
        assert e is not None
        gpn = c.topology.max_gpus_per_node
        provisioning = int((c.powered & c.off).sum())
        whole_pods, shared = 0, 0.0
        for k in c.queue:
            job = c.jobs[k[2]]
            if job.is_sharing:
                shared += job.gpu_share
            else:
                whole_pods += len(c.state.pods_of(job))
        count = max(0, whole_pods + int(np.ceil(shared / gpn)) - provisioning)
        candidates = np.flatnonzero(~c.powered & ~c.down)[:count]
        for node in candidates:
            c.powered[node] = True
            c.push(c.now + e.provision_s, POWERED, int(node))
        c.count("powered_on", int(candidates.size))

    def drain(self, busy: BoolArray) -> None:
        """Move the jobs off lightly used nodes so they fall idle (module docstring).  Jobs go
        only to nodes that are busy and not themselves drain candidates (moving a job onto an
        idle node consolidates nothing), and a job still restarting is not moved."""
        c = self.core
        e = c.cfg.elastic
        assert e is not None
        used = c.topology.gpus_per_node - c.state.free_gpus
        light = busy & ~c.off & ~c.down & (used <= e.drain_max_used_gpus)
        no_target = light | (c.state.free_gpus == c.topology.gpus_per_node)
        cands = np.flatnonzero(light)
        iv, rs = c.cfg.checkpoint_interval_s, c.cfg.restart_s
        for node in cands[:2]:
            job_ids = sorted(c.state.node_jobs[int(node)])
            if any(len(c.state.placements[j]) > 1 for j in job_ids):
                continue
            if any(c.running[j].work_start_s > c.now for j in job_ids):
                continue
            scratch = c.state.copy()
            for j in job_ids:
                scratch.unbind_job(j)
            moves: list[tuple[int, list[int]]] = []
            cost = 0.0
            for j in job_ids:
                run = c.running[j]
                hidden = ~c.allowed(run.job) | no_target
                view = scratch.copy()
                view.hide(np.flatnonzero(hidden))
                dest = c.policy.place(view, run.job)
                if dest is None:
                    break
                scratch.bind_job(run.job, dest)
                moves.append((j, dest))
                cost += disruption_cost_gpu_s(run.job.gpu_share, run.lost_work_s(c.now, iv), rs)
            if len(moves) != len(job_ids) or cost > e.drain_max_cost_gpu_s:
                continue
            stmt = self.plans.statement()
            for j, dest in moves:
                stmt.move(j, dest)
            self.plans.execute(stmt)
            c.count("drains")
            # released at once, as a consolidation deletes the node it emptied: left on, an
            # empty node would take the next job and be drained again
            c.off[node] = True
            c.powered[node] = False
            c.count("powered_off")
            c.hash.update(f"D{int(node)}@{c.now:.3f}".encode())
