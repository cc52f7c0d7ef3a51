"""Node reservations for a starving gang: nodes set aside so that they drain for it.

:class:`Reservations` holds, per owner job, the nodes reserved for it.  :class:`ReservingPolicy`
wraps a placement policy: the owner of a reservation is placed as usual (anywhere); every other
job is placed as if the reserved nodes had no free GPU, so nothing new lands on them and they
empty as their jobs finish.  The wrapper hides the reserved nodes' free GPUs for the duration of
the inner call only and restores them before it returns: the state is unchanged afterwards.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

IntArray = npt.NDArray[np.int64]

__all__ = ["Reservations", "ReservingPolicy"]


class Reservations:
    """Owner job id -> (reserved nodes, time reserved)."""

    def __init__(self) -> None:
        self.nodes: dict[int, IntArray] = {}
        self.since_s: dict[int, float] = {}
        self.version = 0
        self.made = 0
        self.fulfilled = 0
        self.expired = 0

    def reserve(self, owner: int, nodes: IntArray, now_s: float) -> None:
        self.nodes[owner] = np.asarray(nodes, dtype=np.int64)
        self.since_s[owner] = now_s
        self.made += 1
        self.version += 1

    def release(self, owner: int, outcome: str) -> None:
        """Drop ``owner``'s reservation; ``outcome`` is ``fulfilled`` or ``expired``."""
        if self.nodes.pop(owner, None) is not None:
            self.since_s.pop(owner, None)
            self.version += 1
            if outcome == "fulfilled":
                self.fulfilled += 1
            else:
                self.expired += 1

    def reserved_for_others(self, job_id: int) -> IntArray:
        """Nodes ``job_id`` may not use (reserved for another job)."""
        parts = [n for owner, n in self.nodes.items() if owner != job_id]
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(parts))


class ReservingPolicy:
    """``inner`` with reserved nodes hidden from everyone but their owner."""

    def __init__(self, inner: GangPolicy, reservations: Reservations) -> None:
        self.inner = inner
        self.reservations = reservations
        self.name = inner.name

    def owner_key(self, job: Job) -> int | None:
        """Part of a job's shape for caching refusals: an owner sees nodes no one else does."""
        return job.job_id if job.job_id in self.reservations.nodes else None

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        hidden = self.reservations.reserved_for_others(job.job_id)
        if hidden.size == 0:
            return self.inner.place(state, job)
        saved_milli = state.gpu_milli_left[hidden].copy()
        saved_gpus = state.free_gpus[hidden].copy()
        state.gpu_milli_left[hidden] = 0
        state.free_gpus[hidden] = 0
        try:
            return self.inner.place(state, job)
        finally:
            state.gpu_milli_left[hidden] = saved_milli
            state.free_gpus[hidden] = saved_gpus
