"""Our gang-aware fragmentation measure: free GPUs that the workload's jobs cannot use, at the
node level and at every topology level.

The workload is a set of job sizes ``s`` (GPUs) with weights ``w_s`` (their share of GPU time).
For a state, the measure is ``F = sum_s w_s * U_s`` where ``U_s`` counts free GPUs a job of size
``s`` cannot use:

* ``s <= G`` (fits one node of G GPUs): the free GPUs of every node with fewer than ``s`` free
  (FGD's rule, on whole GPUs);
* ``s > G`` (a gang of ``k = s // G`` full-node pods): the free GPUs of every node that is not
  wholly free (a full-node pod cannot use them), plus, at every topology level, ``G`` times the
  wholly free nodes of each domain holding fewer than ``k`` of them (the gang cannot start inside
  that domain), weighted ``1 / levels``: whole nodes scattered over domains are worth less than
  whole nodes together.

Placing a pod changes only its node's terms and, when the node was wholly free, its domains'
terms, so :func:`node_deltas` scores every node in one vectorised pass and :func:`domain_delta`
scores taking ``k`` whole nodes out of a domain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

__all__ = ["Workload", "domain_delta", "node_deltas"]


@dataclass(frozen=True)
class Workload:
    """Job sizes (GPUs) and their weights (summing to 1)."""

    sizes: tuple[int, ...]
    weights: tuple[float, ...]

    @staticmethod
    def from_jobs(jobs: list[Job]) -> Workload:
        """Weights = each size's share of the jobs' GPU time (GPUs x duration)."""
        acc: dict[int, float] = {}
        for j in jobs:
            acc[j.gpus] = acc.get(j.gpus, 0.0) + j.gpu_share * j.duration_s
        total = sum(acc.values()) or 1.0
        sizes = tuple(sorted(acc))
        return Workload(sizes, tuple(acc[s] / total for s in sizes))


def _whole_counts(state: ClusterState) -> tuple[IntArray, ...]:
    """Wholly free nodes per domain of every named level (the state's kept aggregates)."""
    return state.domain_counts().whole[: len(state.topology.levels)]


def _domain_term(whole_in_domain: IntArray | int, k: int, gpn: int) -> IntArray | int:
    return gpn * whole_in_domain * (whole_in_domain < k)


def node_deltas(state: ClusterState, work: Workload, pod_gpus: int, nodes: IntArray) -> FloatArray:
    """Change of F if one pod of ``pod_gpus`` whole GPUs goes on each of ``nodes``."""
    topo = state.topology
    gpn = state.index.max_gpus_per_node
    f = state.free_gpus[nodes]
    f2 = f - pod_gpus
    cap = topo.gpus_per_node[nodes]
    was_whole = f == cap
    delta = np.zeros(nodes.size, dtype=np.float64)
    counts = _whole_counts(state) if was_whole.any() else ()
    n_levels = max(1, len(topo.levels))
    for s, w in zip(work.sizes, work.weights):
        if s <= gpn:
            delta += w * (f2 * (f2 < s) - f * (f < s))
            continue
        k = s // gpn
        # free GPUs off whole nodes: a whole node becomes partial (+f2), a partial one loses g
        delta += w * np.where(was_whole, f2, -pod_gpus)
        for li, cnt in enumerate(counts):
            wd = cnt[topo.domains(li)[nodes]]
            change = _domain_term(wd - 1, k, gpn) - _domain_term(wd, k, gpn)
            delta += (w / n_levels) * np.where(was_whole, change, 0)
    return delta


def domain_delta(
    state: ClusterState, work: Workload, level: int, whole_taken: IntArray, domains: IntArray | None = None
) -> FloatArray:
    """Change of F if ``whole_taken[d]`` wholly free nodes of each domain ``d`` of ``level``
    are used by one gang (nodes wholly used: their node terms do not change).  With
    ``domains``, only those domains are scored: ``whole_taken[i]`` and the answer's ``[i]``
    belong to ``domains[i]`` (the same figures as the full answer's ``[domains[i]]``)."""
    topo = state.topology
    gpn = state.index.max_gpus_per_node
    n_levels = max(1, len(topo.levels))
    delta = np.zeros(whole_taken.size, dtype=np.float64)
    if level < 0:
        return delta
    counts = _whole_counts(state)
    index = state.index
    # each domain's count of whole nodes at its own level and at every level above it
    above: list[IntArray] = []
    for li in range(level, len(topo.levels)):
        cnt = counts[li] if li == level else counts[li][index.ancestor(level, li)]
        above.append(cnt if domains is None else cnt[domains])
    for s, w in zip(work.sizes, work.weights):
        if s <= gpn:
            continue
        k = s // gpn
        # the chosen domain and every domain above it lose the taken nodes
        for wd in above:
            change = _domain_term(wd - whole_taken, k, gpn) - _domain_term(wd, k, gpn)
            delta += (w / n_levels) * change
    return delta
