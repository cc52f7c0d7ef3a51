"""The placement-policy interface of suite 2 and the topology search every policy shares.

A policy answers one question: where do the pods of this job go, on this state?  It returns
one node per pod (in the order of :meth:`ClusterState.pods_of`) or ``None`` when the job cannot
start now.  It never changes the state; the scheduler binds the answer (and
:meth:`ClusterState.bind` checks it).

:func:`candidate_levels` gives the levels a job may be placed within, following Kueue's TAS
semantics: ``required:L`` -> only L; ``preferred:L`` -> L, then each level above, then the whole
cluster; no constraint -> the whole cluster.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

IntArray = npt.NDArray[np.int64]

__all__ = ["GangPolicy", "candidate_levels", "domain_can_host"]


class GangPolicy(Protocol):
    """A placement policy: ``place`` returns one node per pod, or None."""

    name: str

    def place(self, state: ClusterState, job: Job) -> list[int] | None: ...


def candidate_levels(state: ClusterState, job: Job) -> list[int | None]:
    """Level indices to try in order (``None`` = the whole cluster, no domain limit)."""
    c = job.constraint
    if c is None:
        return [None]
    li = state.topology.level_index(c.level)
    if c.mode == "required":
        return [li]
    return [*range(li, len(state.topology.levels)), None]


def domain_can_host(state: ClusterState, job: Job, nodes: IntArray) -> bool:
    """Can the nodes ``nodes`` (a domain) host every pod of ``job`` at once?  Full-node pods
    need wholly free nodes; the remainder pod (or a lone pod) any other node with room."""
    if job.is_sharing:
        return bool((state.gpu_milli_left[nodes] >= job.gpu_milli).any())
    sizes = state.pods_of(job)
    gpn = state.topology.gpus_per_node[nodes]
    free = state.free_gpus[nodes]
    if len(sizes) == 1:
        return bool((free >= sizes[0]).any())
    full = sum(1 for s in sizes if s == state.topology.max_gpus_per_node)
    whole = (free == gpn) & (gpn >= state.topology.max_gpus_per_node)
    if int(whole.sum()) < full:
        return False
    rest = [s for s in sizes if s != state.topology.max_gpus_per_node]
    if not rest:
        return True
    spare = free[~whole] if int(whole.sum()) == full else free
    return bool((spare >= rest[0]).any())
