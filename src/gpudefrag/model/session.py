"""A session: what one action of the job world reads of the cluster at one moment.

Volcano opens a session per scheduling cycle over one snapshot of the cluster and runs its
actions on it (``pkg/scheduler/framework/session.go``); here a :class:`Session` carries what an
action of the job world may read: the time, the state, the pending jobs in queue order, and the
running jobs as a real cluster knows them (:class:`RunningInfo`: when each started, its declared
checkpoint interval and its last checkpoint; never its run time).  An action returns plans; the
driver turns each into a :class:`~gpudefrag.model.statement.Statement`, checks it and commits
it.  (The pod world's session is :class:`~gpudefrag.model.port.ClusterPort`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

__all__ = ["RunningInfo", "Session"]


@dataclass(frozen=True, slots=True)
class RunningInfo:
    """What a cluster knows of a running job: start, checkpoint interval, last checkpoint."""

    job_id: int
    start_s: float
    checkpoint_interval_s: float
    last_checkpoint_s: float
    do_not_disrupt: bool = False


@dataclass(frozen=True)
class Session:
    """The read side of one action (module docstring).  ``state`` is the live state: an action
    works on copies of it and returns plans, it never changes it."""

    now_s: float
    state: ClusterState
    pending: Sequence[Job]
    running: Mapping[int, RunningInfo]
