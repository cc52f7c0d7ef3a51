"""Protected nodes: a soft hold, for blocked large pods, on the node closest to hosting them.

A large pod that fits no node waits for departures to free a node for it.  Placement that
keeps landing small pods on that node keeps it waiting: FGD's fragmentation measure even
favours it, because a node with six free GPUs counts all six as fragmented for an 8-GPU pod
and a seventh pod there lowers the count.  Protection keeps other pods off such a node while
they fit elsewhere.

Rule of :func:`protected_nodes`: take the blocked pods in the order given (queue order); skip
pods that need fewer than ``min_gpus`` whole GPUs (a sharing pod is never protected).  For each
remaining pod, until ``limit`` nodes are chosen, pick among the nodes not chosen yet that could
host it when empty (GPU count, GPU model, CPU and memory capacity) the one with the smallest
*GPU deficit* (GPUs it needs minus whole free GPUs on the node, at least 0); ties go to the
node with fewer whole free GPUs (a pod that already fits takes the tightest node), then to the
lowest ``tie_rank``.  A pod no node can host when empty protects nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.fit import fits_empty_mask
from gpudefrag.model.pods import PodSpec


def protected_nodes(
    state: ClusterState, blocked: Iterable[PodSpec], limit: int, min_gpus: int
) -> frozenset[int]:
    """The nodes to protect on ``state`` for the ``blocked`` pods (see the module rule)."""
    if limit <= 0:
        return frozenset()
    whole_free = (state.gpu_milli_left == GPU_MILLI_PER_GPU).sum(axis=1)
    taken = np.zeros(state.num_nodes, dtype=bool)
    chosen: list[int] = []
    for pod in blocked:
        if len(chosen) >= limit:
            break
        if pod.gpu_milli != GPU_MILLI_PER_GPU or pod.num_gpu < min_gpus:
            continue
        nodes = np.flatnonzero(~taken & fits_empty_mask(state, pod))
        if nodes.size == 0:
            continue
        deficit = np.maximum(pod.num_gpu - whole_free[nodes], 0)
        best = int(nodes[np.lexsort((state.tie_rank[nodes], whole_free[nodes], deficit))[0]])
        taken[best] = True
        chosen.append(best)
    return frozenset(chosen)
