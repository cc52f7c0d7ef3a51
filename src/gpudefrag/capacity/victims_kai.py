"""NVIDIA KAI-Scheduler's preempt action, re-implemented on this package's model.

Upstream: https://github.com/NVIDIA/KAI-Scheduler at commit
``72de64fc8eca10fa8cca26a20156178f3edbe092`` (2026-03-07), the commit
:mod:`gpudefrag.gangs.kai` follows.  Paths under ``pkg/scheduler/``.

* **Victims** (``actions/preempt/preempt.go``, ``buildFilterFuncForPreempt``): running jobs
  that are preemptible (``IsPreemptibleJob``), of lower priority, in the preemptor's queue,
  not the preemptor, with an allocated pod, passing the ``minruntime`` filter.
* **Victim order** (``actions/utils/action.go`` ``GetVictimsQueue``, ``actions/utils/
  job_order_by_queue.go`` with ``VictimQueue``): the reverse of the job order
  (``framework/session_plugins.go`` ``JobOrderFn``: ``plugins/priority`` priority descending,
  ``plugins/elastic`` min-available state, then the PodGroup's creation time, then uid).  So:
  lowest priority first, then the *newest* job first (the reverse of the order in which the
  jobs are scheduled), then the larger id.
* **Solver** (``actions/common/solvers/job_solver.go``): the preemptor's pods are solved one
  more at a time (``k = 1 .. K``, a partial job of the first ``k`` pods); step ``k`` starts from
  the victims recorded by step ``k - 1``.
* **Scenarios** (``solvers/pod_scenario_builder.go``): the recorded victims alone (only when
  there are some), then one more victim job at a time from a fresh victim queue (jobs already
  recorded are skipped), accumulating.  A scenario is skipped when its idle-GPU filters fail
  (``accumulated_scenario_filters/idle_gpus``): per node idle GPUs (free milli / 1000) plus
  the GPUs of every recorded and accumulated victim there; the pods' GPUs, largest first, are
  matched greedily onto the ``k`` nodes with the most such GPUs (``greedyMatchRequirements``);
  with a ``required`` constraint, the job's GPUs must also fit in one domain of that level.
* **By node** (``solvers/by_pod_solver.go``): for a scenario whose newest victim is ``v``, each
  node of ``v`` in turn: evict the recorded victims and the accumulated victims that have a
  pod on that node, then allocate the partial job (``actions/common/action.go``
  ``TryToVirtuallyAllocatePreemptorAndGetVictims``).  The first success ends the step.
* **Pipelining** (same function, ``framework/statement.go`` ``Pipeline``): after the preemptor,
  the evicted jobs are allocated again in job order; one that lands back on its own nodes is
  un-evicted (no longer a victim; here only if the preemptor still binds on its nodes with the
  job on its own GPUs, checked on free milli rows as the real state will be); one placed
  elsewhere is pipelined (it is still evicted, and its new room is taken for the jobs after
  it); one with no room stays evicted.  The victims of the step are the evicted jobs that were
  not un-evicted.

Simplifications (the model has no queues, PodGroup min-available counts, PDBs or minimum
runtimes): one queue for every job (so the queue-quota checks and queue order do nothing); the
``minruntime`` filter passes every job (its default configuration); the elastic order is a tie
(every job runs exactly at its min-available); a job's creation time is its ``submit_s``.  The
placement calls are the given placement policy's (the simulator's, shared by every rule), not
KAI's allocate action.  Evicting one pod of a gang evicts the whole gang here (upstream evicts
the gang's pods on the tested node and the rest when the gang drops below its min-available),
and a gang is un-evicted only when all its pods land back on their own nodes.  A pipelined job
is not a move in the plan: it is evicted and requeued, and the simulator places it on its next
pass (upstream binds it once the preemptor's room is released).  The node order of ``v`` is
ascending (upstream: a Go map's order).  Never moves a job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from gpudefrag.capacity.victims_base import (
    IntArray,
    VictimPlan,
    fits_at,
    free_after,
    held_milli,
    lower_priority,
    original_nodes,
    plan_cost_gpu_s,
    validate_plan,
    without,
)
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.model.cluster import ClusterState, PlacementError
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.model.session import RunningInfo, Session

FloatArray = npt.NDArray[np.float64]

__all__ = ["KaiVictims", "kai_victim_order"]


def kai_victim_order(victims: Mapping[int, RunningInfo]) -> list[int]:
    """The victim queue's order: priority ascending, then creation (``submit_s``) descending,
    then job id descending."""
    return sorted(victims, key=lambda j: (victims[j].job.priority, -victims[j].job.submit_s, -j))


class _IdleGpus:
    """The accumulated idle-GPU scenario filters (module docstring) for one partial job."""

    def __init__(self, state: ClusterState, job: Job, sizes: list[int]) -> None:
        self.state = state
        self.cap: FloatArray = state.gpu_milli_left.sum(axis=1).astype(np.float64) / GPU_MILLI_PER_GPU
        share = job.gpu_milli / GPU_MILLI_PER_GPU
        self.need = sorted((float(g) * share for g in sizes), reverse=True)
        self.seen: set[int] = set()
        c = job.constraint
        self.domains: IntArray | None = None
        if c is not None and c.mode == "required":
            li = state.topology.level_index(c.level)
            self.domains = state.topology.domains(li)

    def add(self, ids: list[int]) -> None:
        for j in ids:
            if j in self.seen:
                continue
            self.seen.add(j)
            for node, _, milli in held_milli(self.state, j):
                self.cap[node] += milli / GPU_MILLI_PER_GPU

    def ok(self) -> bool:
        k = len(self.need)
        cap = self.cap
        top = np.argsort(-cap, kind="stable")[:k]
        if not _greedy_match(self.need, [float(cap[i]) for i in top]):
            return False
        if self.domains is None:
            return True
        per_domain = np.bincount(self.domains, weights=cap)
        return bool(per_domain.max() >= sum(self.need) - 1e-9)


def _greedy_match(need: list[float], holders: list[float]) -> bool:
    """``greedyMatchRequirements``: each requirement (descending) on the first holder
    (capacity descending) with room left."""
    used = [0.0] * len(holders)
    for r in need:
        for i, c in enumerate(holders):
            if c < r:
                break
            if c - used[i] >= r - 1e-9:
                used[i] += r
                break
        else:
            return False
    return True


class KaiVictims:
    """KAI-Scheduler's preempt action (module docstring)."""

    name = "kai"

    def choose(
        self,
        session: Session,
        job: Job,
        placer: GangPolicy,
        restart_s: float,
        may_wait_s: float = 0.0,  # ignored: upstream never waits
    ) -> VictimPlan | None:
        state, running, now_s = session.state, session.running, session.now_s
        eligible = {j: r for j, r in lower_priority(state, job, running).items() if r.preemptible}
        if not eligible:
            return None
        queue = kai_victim_order(eligible)
        sizes = state.pods_of(job)
        recorded: list[int] = []
        nodes: list[int] = []
        for k in range(1, len(sizes) + 1):
            partial = job if k == len(sizes) else replace(job, gpus=sum(sizes[:k]))
            solved = self._solve_partial(state, partial, sizes[:k], recorded, queue, placer)
            if solved is None:
                return None
            recorded, nodes = solved
        if not recorded:
            return None
        plan = VictimPlan(
            job.job_id,
            tuple(nodes),
            tuple(sorted(recorded)),
            (),
            plan_cost_gpu_s(recorded, eligible, now_s, restart_s),
        )
        return plan if validate_plan(state, job, plan) is None else None

    def _solve_partial(
        self,
        state: ClusterState,
        partial: Job,
        sizes: list[int],
        recorded: list[int],
        queue: list[int],
        placer: GangPolicy,
    ) -> tuple[list[int], list[int]] | None:
        idle = _IdleGpus(state, partial, sizes)
        idle.add(recorded)
        if recorded and idle.ok():
            found = self._simulate(state, partial, set(recorded), placer)
            if found is not None:
                return found
        done = set(recorded)
        on_node: dict[int, list[int]] = {}
        for v in queue:
            if v in done:
                continue
            nodes_v = sorted(set(original_nodes(state, v)))
            for n in nodes_v:
                on_node.setdefault(n, []).append(v)
            idle.add([v])
            if not idle.ok():
                continue
            for n in nodes_v:
                found = self._simulate(state, partial, done | set(on_node[n]), placer)
                if found is not None:
                    return found
        return None

    def _simulate(
        self, state: ClusterState, partial: Job, evict: set[int], placer: GangPolicy
    ) -> tuple[list[int], list[int]] | None:
        """Evict ``evict``, allocate ``partial``, pipeline the evicted jobs again: the victims
        left and the preemptor's nodes, or None when the partial job does not fit.

        A job is un-evicted when the placement policy puts it back on its own nodes and the
        preemptor still binds on its nodes with that job where it was (checked on free milli
        rows, as the real state will be); otherwise a job the policy places is pipelined there
        (it occupies that room for the jobs after it, and stays a victim)."""
        work = without(state, evict)
        nodes = placer.place(work, partial)
        if nodes is None:
            return None
        try:
            work.bind_job(partial, nodes)
        except PlacementError:
            return None
        rows = free_after(state, evict)
        victims: list[int] = []
        for v in sorted(evict, key=lambda j: (-state.jobs[j].priority, state.jobs[j].submit_s, j)):
            job_v = state.jobs[v]
            dest = placer.place(work, job_v)
            if dest is not None and sorted(dest) == sorted(original_nodes(state, v)):
                held = held_milli(state, v)
                for n, g, milli in held:
                    rows[n][g] -= milli
                if fits_at(rows, state, partial, nodes):
                    work.bind_job(job_v, dest)
                    continue  # un-evicted: it stays where it is
                for n, g, milli in held:
                    rows[n][g] += milli
            victims.append(v)
            if dest is not None:
                work.bind_job(job_v, dest)  # pipelined: evicted, its new room taken
        return victims, nodes
