"""A session: what one action of the job world reads of the cluster at one moment.

Volcano opens a session per scheduling cycle over one snapshot of the cluster and runs its
actions on it (``pkg/scheduler/framework/session.go``); here a :class:`Session` carries what an
action of the job world may read: the time, the state, the pending jobs in queue order, and the
running jobs as a real cluster knows them (:class:`RunningInfo`: the job's request and priority,
when it started, its last checkpoint and, from its declared interval, its next; whether it may be
preempted or disrupted; never its run time).  Every action of the job world reads one: the gang
defragmenters, KAI's Consolidate and the victim rules of preemption.  An action returns plans;
the driver turns each into a :class:`~gpudefrag.model.statement.Statement`, checks it and commits
it.  (The pod world's session is :class:`~gpudefrag.model.port.ClusterPort`.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

__all__ = ["RunningInfo", "Session"]


@dataclass(frozen=True, slots=True)
class RunningInfo:
    """What a cluster knows of a running job."""

    job: Job  # its request; job.priority: larger = more important
    start_s: float  # when it first started (scheduling order: larger = scheduled later)
    last_checkpoint_s: float  # its last checkpoint (the work since then is lost on eviction)
    next_checkpoint_s: float = math.inf  # when the work it does now is next saved (inf: unknown)
    preemptible: bool = True  # may be preempted at all (KAI: best-effort and research may)
    do_not_disrupt: bool = False  # may not be moved (KAI's do-not-disrupt)

    @property
    def job_id(self) -> int:
        return self.job.job_id


@dataclass(frozen=True)
class Session:
    """The read side of one action (module docstring).  ``state`` is the live state: an action
    works on copies of it and returns plans, it never changes it."""

    now_s: float
    state: ClusterState
    pending: Sequence[Job]
    running: Mapping[int, RunningInfo]
