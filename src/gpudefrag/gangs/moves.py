"""Defragmentation actions for jobs and gangs: move whole jobs, then start a blocked one.

A plan serves one blocked job: it moves running jobs (each moved job is evicted as a whole,
every pod of a gang together, and restarts on its new nodes from its last checkpoint) and then
binds the blocked job on ``nodes``.  The simulator executes a plan only if, replayed on the
state in order (all moved jobs unbound first, then re-bound, then the blocked job bound), every
bind succeeds and every required topology constraint holds; otherwise it is refused and
counted.

What a move costs is the simulator's business (GPUs x (work lost since the last checkpoint +
restart time)); a defragmenter that prices moves gets the same numbers through the session's
:class:`~gpudefrag.model.session.RunningInfo`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpudefrag.model.jobs import Job
from gpudefrag.model.migration import disruption_cost_gpu_s
from gpudefrag.model.session import RunningInfo, Session

__all__ = ["DefragPlan", "GangDefragmenter", "GangMove", "move_cost_gpu_s"]


@dataclass(frozen=True, slots=True)
class GangMove:
    """Move running job ``job_id`` (all its pods) to ``to_nodes`` (one node per pod)."""

    job_id: int
    to_nodes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DefragPlan:
    """Moves that make room, then where the blocked job ``job_id`` binds."""

    job_id: int
    moves: tuple[GangMove, ...]
    nodes: tuple[int, ...]


def move_cost_gpu_s(job: Job, info: RunningInfo, now_s: float, restart_s: float) -> float:
    """GPU-seconds a move wastes (:func:`~gpudefrag.model.migration.disruption_cost_gpu_s`: the
    job's GPUs x (work since its last checkpoint + restart))."""
    return disruption_cost_gpu_s(job.gpu_share, now_s - info.last_checkpoint_s, restart_s)


class GangDefragmenter(Protocol):
    """Given a session (the time, the state, the pending jobs in queue order and the running
    jobs' info), return plans to execute now, each on the state the earlier ones leave.

    A defragmenter that also reserves nodes (through the placement policy) exposes an integer
    ``rooms_version`` that changes whenever a reservation is made or released; the simulator
    then tries every queued job again."""

    name: str

    def plan(self, session: Session) -> list[DefragPlan]: ...
