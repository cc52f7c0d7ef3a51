"""Our checkpoint-aware defragmenter for jobs and gangs.

It acts for a queued job that is blocked by fragmentation: the cluster's free GPUs cover it,
the placement policy finds no room, and it has waited at least ``min_wait_s`` (hysteresis).
For such a job it looks for the cheapest room:

* a gang of ``k`` full-node pods needs ``k`` wholly free nodes in one domain of a level its
  constraint allows (:func:`~gpudefrag.gangs.policy.candidate_levels`); a node is freed by
  moving every job on it.  Per domain the ``k`` nodes cheapest to free are taken; the domain
  with the cheapest total wins;
* a single pod of ``g`` GPUs needs one node with ``g`` free GPUs; on each node the cheapest set
  of its jobs whose GPUs cover the shortfall is found exactly (subsets of at most
  ``max_moves`` jobs).

A job's move costs GPUs x (work lost since its last checkpoint + restart time)
(:func:`~gpudefrag.gangs.moves.move_cost_gpu_s`).  Single-pod jobs may always move; a gang moves
only as a whole, and only when its cost per GPU is at most ``gang_move_max_s`` (it has just
checkpointed).  Every moved job is re-placed by the placement policy outside the room being
freed, keeping its own constraint; a plan whose victims cannot all be re-placed is dropped.
The plan is executed only if its cost is at most ``value_s`` x the blocked job's GPUs (the
GPU time the blocked job would otherwise idle for, ``value_s`` being a tuning knob) and it moves
at most ``max_moves`` jobs; at most ``max_plans_per_tick`` plans per call, each on the state the
earlier ones leave.

Drain reservations (``drain_after_s``; None turns them off): when the oldest queued multi-node
gang has waited ``drain_after_s`` and fewer than ``max_reservations`` are active, the ``k`` nodes
of one allowed domain that hold the fewest busy GPUs are reserved for it
(:mod:`gpudefrag.gangs.reserve`): nothing new is placed there, so they drain as their jobs end,
and the gang starts when they are free.  A reservation ends when its gang starts or after
``max_drain_s``.  Plans for other jobs never take reserved nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, ClassVar

import numpy as np
import numpy.typing as npt
from annotated_types import Interval

from gpudefrag.gangs.moves import DefragPlan, GangMove, move_cost_gpu_s
from gpudefrag.gangs.policy import GangPolicy, candidate_levels
from gpudefrag.gangs.reserve import Reservations
from gpudefrag.model.cluster import ClusterState, PlacementError
from gpudefrag.model.jobs import Job
from gpudefrag.model.session import RunningInfo, Session
from gpudefrag.settings import Seconds

IntArray = npt.NDArray[np.int64]

__all__ = ["CheckpointDefrag", "DefragConfig"]


@dataclass(frozen=True)
class DefragConfig:
    """The gang defragmenter's settings (module docstring); ranges checked where values come in
    (:mod:`gpudefrag.settings`, a profile's ``[defragment.gangs]``)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # unknown keys in a file: an error

    restart_s: Seconds = 300.0
    """The cluster's restart time (set by the scenario, not by a profile)."""
    min_wait_s: Seconds = 600.0
    value_s: Seconds = 3600.0
    max_moves: Annotated[int, Interval(ge=1, le=10_000)] = 8
    max_plans_per_tick: Annotated[int, Interval(ge=1, le=10_000)] = 2
    max_jobs_per_tick: Annotated[int, Interval(ge=1, le=10_000)] = 8
    gang_move_max_s: Seconds = 600.0
    max_candidates_per_node: Annotated[int, Interval(ge=1, le=10_000)] = 10
    drain_after_s: Seconds | None = None
    max_drain_s: Seconds = 24 * 3600.0
    max_reservations: Annotated[int, Interval(ge=1, le=10_000)] = 1
    drain_min_free_fraction: Annotated[float, Interval(ge=0, le=1)] = 0.0


class CheckpointDefrag:
    """See the module docstring."""

    name = "ours-defrag"

    def __init__(
        self, policy: GangPolicy, cfg: DefragConfig | None = None, reservations: Reservations | None = None
    ) -> None:
        """``policy`` places moved jobs (wrap it in a ReservingPolicy sharing ``reservations``
        when drain reservations are on)."""
        self.policy = policy
        self.cfg = cfg or DefragConfig()
        self.reservations = reservations or Reservations()
        self._vacate: npt.NDArray[np.float64] | None = None
        self._jobs: dict[int, Job] = {}

    @property
    def rooms_version(self) -> int:
        """Changes whenever a reservation is made or released (see GangDefragmenter)."""
        return self.reservations.version

    # ---- costs -----------------------------------------------------------------------------
    def _costs(
        self, state: ClusterState, running: Mapping[int, RunningInfo], now_s: float
    ) -> dict[int, float]:
        """Cost of moving each movable running job (gangs only when just checkpointed)."""
        out: dict[int, float] = {}
        for job_id, info in running.items():
            if info.do_not_disrupt:
                continue
            job = state.jobs[job_id]
            cost = move_cost_gpu_s(job, info, now_s, self.cfg.restart_s)
            gang = len(state.placements[job_id]) > 1
            if gang and cost / job.gpu_share > self.cfg.gang_move_max_s:
                continue
            out[job_id] = cost
        return out

    def _node_vacate_cost(self, state: ClusterState, costs: dict[int, float]) -> npt.NDArray[np.float64]:
        out = np.zeros(state.topology.num_nodes, dtype=np.float64)
        for n, jobs in enumerate(state.node_jobs):
            total = 0.0
            for j in jobs:
                if j not in costs:
                    total = np.inf
                    break
                total += costs[j]
            out[n] = total
        return out

    # ---- rooms -----------------------------------------------------------------------------
    def _gang_room(
        self, state: ClusterState, job: Job, vacate: npt.NDArray[np.float64]
    ) -> tuple[float, IntArray] | None:
        topo = state.topology
        gpn = topo.max_gpus_per_node
        k = sum(1 for s in state.pods_of(job) if s == gpn)
        full_nodes = topo.gpus_per_node >= gpn
        best: tuple[float, IntArray] | None = None
        for level in candidate_levels(state, job):
            dom = topo.domains(level) if level is not None else np.zeros(topo.num_nodes, dtype=np.int64)
            for d in np.unique(dom):
                members = np.flatnonzero((dom == d) & full_nodes & np.isfinite(vacate))
                if members.size < k:
                    continue
                pick = members[np.lexsort((members, vacate[members]))[:k]]
                cost = float(vacate[pick].sum())
                if best is None or cost < best[0]:
                    best = (cost, pick)
            if best is not None:
                return best
        return None

    def _pod_room(
        self, state: ClusterState, job: Job, costs: dict[int, float], hidden: IntArray
    ) -> tuple[float, int, tuple[int, ...]] | None:
        need = state.pods_of(job)[0]
        best: tuple[float, int, tuple[int, ...]] | None = None
        ok = state.topology.gpus_per_node >= need
        ok[hidden] = False
        for n in np.flatnonzero(ok):
            short = need - int(state.free_gpus[n])
            # only whole-GPU jobs free whole GPUs; the cheapest few are the candidates
            movable = sorted(
                (j for j in state.node_jobs[n] if j in costs and not state.jobs[j].is_sharing),
                key=lambda j: (costs[j], j),
            )[: self.cfg.max_candidates_per_node]
            held = {j: sum(len(p.gpu_indices) for p in state.placements[j] if p.node == n) for j in movable}
            if sum(held.values()) < short:
                continue
            for r in range(1, min(len(movable), self.cfg.max_moves, short) + 1):
                for combo in itertools.combinations(movable, r):
                    if sum(held[j] for j in combo) < short:
                        continue
                    cost = sum(costs[j] for j in combo)
                    if best is None or cost < best[0]:
                        best = (cost, int(n), combo)
        return best

    # ---- plans -----------------------------------------------------------------------------
    def _replace(self, state: ClusterState, victims: list[int], room: IntArray) -> list[GangMove] | None:
        """Re-place ``victims`` (already unbound from ``state``) outside ``room``; binds them."""
        saved = state.gpu_milli_left[room].copy(), state.free_gpus[room].copy()
        state.gpu_milli_left[room] = 0
        state.free_gpus[room] = 0
        moves: list[GangMove] = []
        try:
            for j in sorted(victims, key=lambda j: (-self._jobs[j].gpus, j)):
                nodes = self.policy.place(state, self._jobs[j])
                if nodes is None:
                    return None
                state.bind_job(self._jobs[j], nodes)
                moves.append(GangMove(j, tuple(nodes)))
        except PlacementError:
            return None
        finally:
            state.gpu_milli_left[room], state.free_gpus[room] = saved
        return moves

    def _plan_for(self, state: ClusterState, job: Job, costs: dict[int, float]) -> DefragPlan | None:
        hidden = self.reservations.reserved_for_others(job.job_id)
        if len(state.pods_of(job)) > 1:
            if self._vacate is None:
                self._vacate = self._node_vacate_cost(state, costs)
            vacate = self._vacate.copy()
            vacate[hidden] = np.inf
            room_g = self._gang_room(state, job, vacate)
            if room_g is None:
                return None
            room = room_g[1]
            victims = sorted({j for n in room for j in state.node_jobs[int(n)]})
        else:
            room_p = self._pod_room(state, job, costs, hidden)
            if room_p is None:
                return None
            room = np.array([room_p[1]], dtype=np.int64)
            victims = list(room_p[2])
        if not victims or len(victims) > self.cfg.max_moves:
            return None
        cost = sum(costs[j] for j in victims)
        if cost > self.cfg.value_s * job.gpu_share:
            return None
        scratch = state.copy()
        for j in victims:
            scratch.unbind_job(j)
        moves = self._replace(scratch, victims, room)
        if moves is None:
            return None
        nodes = self.policy.place(scratch, job)
        if nodes is None:
            return None
        scratch.bind_job(job, nodes)
        self._scratch = scratch
        return DefragPlan(job.job_id, tuple(moves), tuple(nodes))

    def plan(self, session: Session) -> list[DefragPlan]:
        state, pending, running, now_s = session.state, session.pending, session.running, session.now_s
        self._update_reservations(state, pending, now_s)
        plans: list[DefragPlan] = []
        free = int(state.free_gpus.sum())
        tried = 0
        cur = state
        self._jobs = dict(state.jobs)
        costs: dict[int, float] | None = None
        self._vacate = None
        failed: set[tuple[int, object, int | None]] = set()  # shapes without a plan in this call
        for job in pending:
            if len(plans) >= self.cfg.max_plans_per_tick or tried >= self.cfg.max_jobs_per_tick:
                break
            if now_s - job.submit_s < self.cfg.min_wait_s or job.is_sharing or job.gpus > free:
                continue
            shape = (job.gpus, job.constraint, job.job_id if job.job_id in self.reservations.nodes else None)
            if shape in failed:
                continue
            tried += 1
            if costs is None:
                costs = self._costs(cur, running, now_s)
            plan = self._plan_for(cur, job, costs)
            if plan is None:
                failed.add(shape)
                continue
            plans.append(plan)
            cur = self._scratch
            self._jobs[job.job_id] = job
            free = int(cur.free_gpus.sum())
            for m in plan.moves:  # a moved job is not moved again in this call
                costs.pop(m.job_id, None)
            self._vacate = None
        return plans

    # ---- drain reservations ------------------------------------------------------------------
    def _update_reservations(self, state: ClusterState, pending: Sequence[Job], now_s: float) -> None:
        res, cfg = self.reservations, self.cfg
        queued = {j.job_id for j in pending}
        for owner in list(res.nodes):
            if owner not in queued:
                res.release(owner, "fulfilled")
            elif now_s - res.since_s[owner] > cfg.max_drain_s:
                res.release(owner, "expired")
        if cfg.drain_after_s is None or len(res.nodes) >= cfg.max_reservations:
            return
        gpn = state.topology.max_gpus_per_node
        free = int(state.free_gpus.sum())
        for job in pending:
            if job.job_id in res.nodes or job.gpus <= gpn or now_s - job.submit_s < cfg.drain_after_s:
                continue
            if free < cfg.drain_min_free_fraction * job.gpus:
                return
            nodes = self._drain_nodes(state, job)
            if nodes is not None:
                res.reserve(job.job_id, nodes, now_s)
            return

    def _drain_nodes(self, state: ClusterState, job: Job) -> IntArray | None:
        """The ``k`` nodes of one allowed domain with the fewest busy GPUs (not reserved)."""
        topo = state.topology
        gpn = topo.max_gpus_per_node
        k = len(state.pods_of(job))
        busy = (topo.gpus_per_node - state.free_gpus).astype(np.float64)
        busy[topo.gpus_per_node < gpn] = np.inf
        busy[self.reservations.reserved_for_others(job.job_id)] = np.inf
        for level in candidate_levels(state, job):
            dom = topo.domains(level) if level is not None else np.zeros(topo.num_nodes, dtype=np.int64)
            best: tuple[float, IntArray] | None = None
            for d in np.unique(dom):
                members = np.flatnonzero((dom == d) & np.isfinite(busy))
                if members.size < k:
                    continue
                pick = members[np.lexsort((members, busy[members]))[:k]]
                total = float(busy[pick].sum())
                if best is None or total < best[0]:
                    best = (total, pick)
            if best is not None:
                return best[1]
        return None
