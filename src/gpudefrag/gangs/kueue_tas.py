"""Kueue's Topology Aware Scheduling (TAS) as a gang policy: a job admitted onto a TAS
ResourceFlavor whose topology is ours (:class:`KueueTAS`), with the algorithm of
:mod:`gpudefrag.gangs.kueue_tas_assign` (kubernetes-sigs/kueue at commit
ff69552e79ad21652c36caa97038382e55625cf7; files named there).
"""

from __future__ import annotations

import numpy as np

from gpudefrag.gangs.kueue_tas_assign import tas_assign
from gpudefrag.gangs.topo_search import gang_shape, topo_index
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

__all__ = ["KueueTAS"]


class KueueTAS:
    """Kueue TAS admission of a job onto a TAS ResourceFlavor whose topology is ours.

    **Mapping.**  Kueue's levels are ours top-down plus ``kubernetes.io/hostname`` (our node
    level) as the lowest.  A job is one workload.  A job of full-node pods only is one PodSet
    (``count`` = its pods); a job with a remainder pod is a PodSet *group*
    (``kueue.x-k8s.io/podset-group-name``): the full-node pods are the worker PodSet and the
    remainder pod the one-replica leader PodSet, placed together.  A lone pod is a one-pod
    PodSet.  ``required:L`` -> ``podset-required-topology: L``; ``preferred:L`` ->
    ``podset-preferred-topology: L``; no constraint -> an implied TAS request (a TAS-only
    ClusterQueue): the hostname level, unconstrained.  A node's capacity is the number of the
    PodSet's pods its free GPUs hold (``free // pod GPUs``; for a GPU share the sum over its
    GPUs of ``free milli // share``); the leader fits if its pod fits, and the workers beside
    it are counted on what it leaves.

    **Algorithm** (BestFit for required / preferred, LeastFreeCapacity for unconstrained, the
    default profile since v0.15; see :func:`tas_assign`): (1) count the pods (slices) every
    domain can hold, bottom-up; (2a) at the requested level sort the domains (most capacity
    first for BestFit, least for LeastFreeCapacity; ties: fewer pods, then name) and take one
    that holds the whole PodSet -- BestFit the one with the *smallest* sufficient capacity;
    if none, ``required`` waits, ``preferred`` retries one level up and, at the top level,
    spreads greedily over several domains (the last one optimised); unconstrained spreads at
    its own level; (2b) descend level by level, pooling the children of the chosen domains,
    sorting them the same way and keeping the fewest that hold the pods (BestFit optimising
    the last one), which minimises the domains used at every level.  Pods then go to the
    chosen nodes (workers in node order, the leader last, as in
    :meth:`ClusterState.pods_of`).

    **Not modelled**: quota (ClusterQueues, cohorts, flavor fungibility, preemption), node
    taints / affinities / selectors, the ``pods`` resource, CPU and memory, balanced placement
    (Alpha), multi-layer slices, elastic workloads, node replacement, and the scheduler's
    re-computation within a cycle.  Domain names are compared as our domain indices (path
    from the top level down), so name ties break towards lower indices.
    """

    def __init__(self, unconstrained: str = "least-free-capacity", name: str = "kueue-tas") -> None:
        """``unconstrained``: the algorithm for jobs without a constraint: the upstream default
        ``"least-free-capacity"`` (``TASProfileMixed``) or ``"best-fit"``
        (``TASProfileBestFit``, deprecated)."""
        if unconstrained not in ("least-free-capacity", "best-fit"):
            raise ValueError("unconstrained must be 'least-free-capacity' or 'best-fit'")
        self.name = name
        self.unconstrained = unconstrained

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        ix = topo_index(state.topology)
        shape = gang_shape(state, job)
        free = state.free_gpus
        if shape.full == 0:
            if shape.sharing:
                cap = (state.gpu_milli_left // shape.milli).sum(axis=1)
            else:
                cap = free // shape.rest
            count, leader_fits, pcl = 1, None, None
        else:
            cap = free // shape.full_size
            count = shape.full
            leader_fits = pcl = None
            if shape.rest:
                leader_fits = free >= shape.rest
                pcl = np.maximum(free - shape.rest, 0) // shape.full_size
        c = job.constraint
        if c is None:
            level, mode = -1, "unconstrained"
        else:
            level, mode = state.topology.level_index(c.level), c.mode
        got = tas_assign(
            ix,
            np.asarray(cap, dtype=np.int64),
            count,
            level,
            mode,
            leader_fits=leader_fits,
            pod_count_with_leader=pcl,
            least_free_capacity=self.unconstrained == "least-free-capacity",
        )
        if got is None:
            return None
        nodes = [int(n) for n in np.repeat(np.arange(got.workers.size), got.workers)]
        if shape.full == 0:
            return nodes
        if shape.rest:
            nodes.append(got.leader)
        return nodes
