"""The preemption interface of suite 3 and what the three victim rules share.

A job of high priority is blocked: its placement policy finds no room on the current state.  A
*victim rule*, an action reading a :class:`~gpudefrag.model.session.Session` (the time, the
state, the running jobs as :class:`~gpudefrag.model.session.RunningInfo`), answers with a :class:`VictimPlan`: the lower-priority running jobs to kill
(``evict``: each restarts later from its last checkpoint, requeued) or to move (``moves``: each
killed and bound again at once on its ``to_nodes``), and the nodes the blocked job then binds on.

Rules every plan keeps (:func:`validate_plan` checks them on a copy of the state):

* a victim has a lower priority than the preemptor, and evicting one pod of a gang evicts the
  whole gang (a plan names jobs, never pods);
* its statement (:func:`~gpudefrag.gangs.statements.plan_statement`: every evicted and moved
  job unbound, then every moved job bound at its ``to_nodes``, then the preemptor bound at
  ``nodes``) replays on a copy: every bind succeeds, and every job bound keeps the gang rules
  and its ``required`` topology constraint (:func:`~gpudefrag.gangs.invariants.check_job`);
* a plan touches at least one job (the simulator refuses an empty one).

A plan's cost (:func:`victim_cost_gpu_s`, summed over evicted and moved jobs) is the GPU time it
throws away: each victim's GPUs x (work since its last checkpoint + ``restart_s``).  A moved job
pays the same as a killed one; it only does not wait in the queue.

**Waiting for checkpoints.**  The simulator may let a blocked job wait up to ``may_wait_s``
for a cheaper plan (a rule that never waits ignores it).  A rule that prefers to wait answers
with ``not_before_s`` later than ``now_s`` (at most ``now_s + may_wait_s``): the victims it
would take then, priced at that time (:func:`cost_at_s`: the work since the checkpoint each one
will have taken by then).  The simulator executes nothing and asks again at ``not_before_s``,
on the state of that moment.

Shared helpers: the victims a rule may take (:func:`lower_priority`), where a job's pods sit
and what they hold (:func:`held_milli`), a copy with some jobs off (:func:`without`), a
placement call that sees only some nodes (:func:`place_within`), the candidate node sets of a
preemptor (:func:`candidate_groups`), and an exact replay of the bind rules on rows of free milli
(:func:`free_after`, :func:`fits_at`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.moves import GangMove
from gpudefrag.gangs.policy import GangPolicy, candidate_levels
from gpudefrag.gangs.statements import plan_statement
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.model.migration import disruption_cost_gpu_s
from gpudefrag.model.session import RunningInfo, Session

IntArray = npt.NDArray[np.int64]

__all__ = [
    "VictimPlan",
    "VictimRule",
    "candidate_groups",
    "cost_at_s",
    "fits_at",
    "free_after",
    "free_if_off",
    "held_milli",
    "lower_priority",
    "original_nodes",
    "place_within",
    "plan_cost_gpu_s",
    "single_pod_room",
    "validate_plan",
    "victim_cost_gpu_s",
    "without",
]


@dataclass(frozen=True, slots=True)
class VictimPlan:
    """Kill ``evict``, move ``moves``, then bind the preemptor ``job_id`` on ``nodes``."""

    job_id: int
    nodes: tuple[int, ...]
    evict: tuple[int, ...]
    moves: tuple[GangMove, ...]
    cost_gpu_s: float
    not_before_s: float = 0.0  # later than now: wait until then and ask again (module docstring)


class VictimRule(Protocol):
    """Chooses victims for a blocked job (module docstring); None when no allowed set makes room."""

    name: str

    def choose(
        self, session: Session, job: Job, placer: GangPolicy, restart_s: float, may_wait_s: float = 0.0
    ) -> VictimPlan | None:
        """A plan for ``job`` on ``session.state`` at ``session.now_s``, its victims among
        ``session.running`` (:func:`lower_priority`)."""
        ...


def victim_cost_gpu_s(run: RunningInfo, now_s: float, restart_s: float) -> float:
    """GPU-seconds lost by killing or moving ``run`` at ``now_s``: its GPUs x (work since its
    last checkpoint + ``restart_s``; :func:`~gpudefrag.model.migration.disruption_cost_gpu_s`)."""
    return disruption_cost_gpu_s(run.job.gpu_share, now_s - run.last_checkpoint_s, restart_s)


def cost_at_s(run: RunningInfo, at_s: float, restart_s: float) -> float:
    """GPU-seconds lost by killing or moving ``run`` at ``at_s`` (not before now): its GPUs x
    (work since the checkpoint it will have taken by then + ``restart_s``), counting at most
    its next checkpoint (a wait is shorter than the checkpoint interval)."""
    ckpt = run.next_checkpoint_s if run.next_checkpoint_s <= at_s else run.last_checkpoint_s
    return disruption_cost_gpu_s(run.job.gpu_share, at_s - ckpt, restart_s)


def plan_cost_gpu_s(
    ids: list[int] | tuple[int, ...], running: Mapping[int, RunningInfo], now_s: float, restart_s: float
) -> float:
    """The cost of a plan touching ``ids`` (sum of :func:`victim_cost_gpu_s`)."""
    return float(sum(victim_cost_gpu_s(running[j], now_s, restart_s) for j in ids))


def lower_priority(
    state: ClusterState, job: Job, running: Mapping[int, RunningInfo]
) -> dict[int, RunningInfo]:
    """The jobs of ``running`` a rule may take for ``job``: bound on ``state``, another job, and of
    a lower priority.  A bound job missing from ``running`` is never a victim."""
    return {
        j: r
        for j, r in running.items()
        if j != job.job_id and j in state.placements and r.job.priority < job.priority
    }


def original_nodes(state: ClusterState, job_id: int) -> list[int]:
    """The node of every pod of a bound job, in pod order (what :meth:`ClusterState.bind` takes)."""
    return [p.node for p in state.placements[job_id]]


def held_milli(state: ClusterState, job_id: int) -> list[tuple[int, int, int]]:
    """``(node, gpu, milli)`` for every GPU a bound job's pods hold."""
    return [(p.node, g, p.gpu_milli) for p in state.placements[job_id] for g in p.gpu_indices]


def validate_plan(state: ClusterState, job: Job, plan: VictimPlan) -> str | None:
    """Why ``plan`` is not valid for ``job`` on ``state`` (module docstring), or None."""
    if plan.job_id != job.job_id:
        return f"plan is for job {plan.job_id}, not {job.job_id}"
    if job.job_id in state.placements:
        return f"job {job.job_id} is already running"
    touched = list(plan.evict) + [m.job_id for m in plan.moves]
    if not touched:
        return "the plan neither evicts nor moves a job"
    if len(set(touched)) != len(touched):
        return "a job is named twice"
    for j in touched:
        if j not in state.placements:
            return f"victim {j} is not running"
        if state.jobs[j].priority >= job.priority:
            return f"victim {j} has priority {state.jobs[j].priority} >= {job.priority}"
    return plan_statement(state, job, plan.nodes, plan.moves, plan.evict).why_not()


def without(state: ClusterState, off: Iterable[int]) -> ClusterState:
    """A copy of ``state`` with the jobs ``off`` unbound (exactly the real state once they are
    evicted).  Rules never put a job back on a copy by binding it again: a sharing pod bound
    again may land on another GPU of its node than it holds, so whether a job may stay is
    decided on free milli rows instead (:func:`free_after`, :func:`fits_at`)."""
    out = state.copy()
    for j in sorted(off):
        out.unbind_job(j)
    return out


def place_within(
    placer: GangPolicy, state: ClusterState, job: Job, nodes: IntArray | None
) -> list[int] | None:
    """``placer``'s answer for ``job`` on ``state`` with every node outside ``nodes`` hidden (no
    free GPU) for the call; ``None`` hides nothing.  ``state`` is left as it was."""
    if nodes is None or nodes.size == state.topology.num_nodes:
        return placer.place(state, job)
    hide = np.ones(state.topology.num_nodes, dtype=bool)
    hide[nodes] = False
    saved = state.gpu_milli_left[hide].copy(), state.free_gpus[hide].copy()
    state.gpu_milli_left[hide] = 0
    state.free_gpus[hide] = 0
    try:
        return placer.place(state, job)
    finally:
        state.gpu_milli_left[hide], state.free_gpus[hide] = saved


def candidate_groups(state: ClusterState, job: Job) -> Iterator[tuple[int | None, list[IntArray]]]:
    """The candidate node sets of ``job``, level by level, as ``(level, domains)``.

    A single-pod job: every node is a candidate (level ``-1``, once).  A gang: the domains of
    each level of :func:`~gpudefrag.gangs.policy.candidate_levels` in turn (``None``: the whole
    cluster as one candidate, offered once even when a level above has a single domain too); a
    rule takes its answer from the first level that gives one."""
    n = state.topology.num_nodes
    if len(state.pods_of(job)) == 1:
        yield -1, [np.array([i], dtype=np.int64) for i in range(n)]
        return
    whole_seen = False  # a level of one domain is the whole cluster: offered once
    for level in candidate_levels(state, job):
        if level is not None and level < 0:
            continue  # a gang never fits on one node
        count = 1 if level is None else state.index.num_domains[level]
        if count == 1:
            if not whole_seen:
                yield level, [np.arange(n, dtype=np.int64)]
            whole_seen = True
        else:
            assert level is not None
            yield level, [state.index.members(level, d) for d in range(count)]


def free_after(state: ClusterState, off: Iterable[int]) -> dict[int, list[int]]:
    """Free milli per GPU, for the nodes the jobs ``off`` touch, once those jobs are off."""
    rows: dict[int, list[int]] = {}
    for j in off:
        for node, g, milli in held_milli(state, j):
            row = rows.get(node)
            if row is None:
                row = rows[node] = [int(v) for v in state.gpu_milli_left[node]]
            row[g] += milli
    return rows


def free_if_off(state: ClusterState, off: Iterable[int]) -> IntArray:
    """Free milli per GPU of every node once the jobs ``off`` are all off (a new array)."""
    out = state.gpu_milli_left.copy()
    nodes: list[int] = []
    gpus: list[int] = []
    milli: list[int] = []
    for j in off:
        for n, g, m in held_milli(state, j):
            nodes.append(n)
            gpus.append(g)
            milli.append(m)
    if nodes:
        np.add.at(out, (np.asarray(nodes), np.asarray(gpus)), np.asarray(milli, dtype=np.int64))
    return out


def single_pod_room(state: ClusterState, job: Job, free_milli: IntArray) -> npt.NDArray[np.bool_]:
    """Per node: would the single pod of ``job`` fit with free milli ``free_milli``?"""
    if job.gpu_milli < GPU_MILLI_PER_GPU:
        return np.asarray((free_milli >= job.gpu_milli).any(axis=1), dtype=bool)
    return np.asarray((free_milli == GPU_MILLI_PER_GPU).sum(axis=1) >= state.pods_of(job)[0], dtype=bool)


def fits_at(
    rows: Mapping[int, list[int]], state: ClusterState, job: Job, nodes: list[int] | tuple[int, ...]
) -> bool:
    """Would ``job`` bind on ``nodes`` (one per pod), given free milli ``rows`` for some nodes
    (``state.gpu_milli_left`` for the others)?  Replays :meth:`ClusterState.bind`'s rules on copies."""
    sizes = state.pods_of(job)
    if len(sizes) != len(nodes):
        return False
    work: dict[int, list[int]] = {}
    for node, g in zip(nodes, sizes):
        row = work.get(node)
        if row is None:
            src = rows.get(node)
            row = work[node] = list(src) if src is not None else [int(v) for v in state.gpu_milli_left[node]]
        if job.gpu_milli < GPU_MILLI_PER_GPU:
            ok = [v for v in row if v >= job.gpu_milli]
            if not ok:
                return False
            partly = [i for i, v in enumerate(row) if job.gpu_milli <= v < GPU_MILLI_PER_GPU]
            pick = min(partly, key=lambda i: (row[i], i)) if partly else row.index(GPU_MILLI_PER_GPU)
            row[pick] -= job.gpu_milli
        else:
            free = [i for i, v in enumerate(row) if v == GPU_MILLI_PER_GPU]
            if len(free) < g:
                return False
            for i in free[:g]:
                row[i] = 0
    return True
