"""A larger cluster for FGD's arrival-only protocol: the node list repeated.

``replicate_nodes(nodes, min_gpus)`` repeats the whole node list ``k`` times, with ``k`` the
fewest copies holding at least ``min_gpus`` GPUs (at least one).  Copy 0 keeps the original
names; copy ``r >= 1`` appends ``-x<r>`` (zero-padded to the width of ``k - 1``) so names stay
unique and every copy of a node sorts next to the original.  The workload is then prepared for
the larger capacity by FGD's own preparation (:func:`~gpudefrag.workloads.fgd_protocol.prepare_run`:
pods cloned until the arrivals ask 130 % of the new GPU capacity), so the protocol is the
published one at the new size.
"""

from __future__ import annotations

import numpy as np

from gpudefrag.workloads.openb import NodeTable

__all__ = ["replicate_nodes"]


def replicate_nodes(nodes: NodeTable, min_gpus: int) -> NodeTable:
    """The module docstring's repeated node list."""
    per_copy = int(nodes.gpu_count.sum())
    if per_copy <= 0:
        raise ValueError("the node list has no GPUs to replicate")
    copies = max(1, -(-int(min_gpus) // per_copy))
    width = len(str(copies - 1))
    names = list(nodes.names)
    for r in range(1, copies):
        names.extend(f"{name}-x{r:0{width}d}" for name in nodes.names)
    return NodeTable(
        tuple(names),
        np.tile(nodes.cpu_milli, copies),
        np.tile(nodes.memory_mib, copies),
        np.tile(nodes.gpu_count, copies),
        nodes.models * copies,
        nodes.source_path,
    )
