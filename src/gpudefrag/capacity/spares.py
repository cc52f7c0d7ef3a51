"""Spare capacity of suite 3: which nodes are held back, and who may use them.

Policies (``spare`` setting):

* ``none``: every node serves every job;
* ``dedicated``: ``fraction`` of the nodes are held idle; only jobs restarting after a failure
  (*recovering* jobs) may use them;
* ``pooled-leaf`` / ``pooled-cluster``: the same number of nodes, on which best-effort jobs run
  too; a recovering job that finds no room may evict best-effort jobs from spare nodes.

Which nodes (:func:`spare_nodes`): ``k = round(fraction x nodes)``.  ``dedicated`` and
``pooled-leaf`` spread them over the domains of the lowest level above the node (largest
remainder: each domain gets ``floor(k x size / nodes)``, the remaining ones go to the domains
with the largest fractional parts, ties to the lower domain id), taking the highest-numbered
nodes of each domain, so a failed gang finds spares next to it.  ``pooled-cluster`` takes the
``k`` highest-numbered nodes of the cluster (one block, as a cluster-wide pool).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.errors import ConfigError
from gpudefrag.model.topology import Topology

__all__ = ["SPARE_POLICIES", "may_use_spares", "spare_nodes"]

SPARE_POLICIES = ("none", "dedicated", "pooled-leaf", "pooled-cluster")

BoolArray = npt.NDArray[np.bool_]


def spare_nodes(topology: Topology, policy: str, fraction: float) -> BoolArray:
    """Mask of the spare nodes of ``policy`` (module docstring)."""
    if policy not in SPARE_POLICIES:
        raise ConfigError(f"unknown spare policy {policy!r}; known: {', '.join(SPARE_POLICIES)}")
    n = topology.num_nodes
    out = np.zeros(n, dtype=bool)
    if policy == "none" or fraction <= 0:
        return out
    if not 0 < fraction < 1:
        raise ConfigError(f"spare fraction must be in (0, 1), got {fraction}")
    k = round(fraction * n)
    if policy == "pooled-cluster" or not topology.levels:
        out[n - k :] = True
        return out
    dom = topology.domains(0)
    sizes = np.bincount(dom)
    exact = k * sizes / n
    take = np.floor(exact).astype(np.int64)
    rest = k - int(take.sum())
    order = np.lexsort((np.arange(sizes.size), -(exact - take)))
    take[order[:rest]] += 1
    for d, count in enumerate(take):
        members = np.flatnonzero(dom == d)
        if count:
            out[members[-int(count) :]] = True
    return out


def may_use_spares(policy: str, recovering: bool, best_effort: bool) -> bool:
    """Whether a job may be placed on spare nodes under ``policy``."""
    if policy == "none":
        return True
    if policy == "dedicated":
        return recovering
    return recovering or best_effort
