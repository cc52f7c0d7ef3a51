"""Cluster fragmentation over time: F(node) per node, updated only where nodes changed."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.frag.compiled import node_frag_milli, refresh_frag
from gpudefrag.frag.typical import TypicalArrays, TypicalPods
from gpudefrag.model.cluster import ClusterState


class FragTracker:
    """Keeps ``F(node)`` for one state's nodes and their running sum (the cluster's frag amount)."""

    def __init__(self, typical: TypicalPods, state: ClusterState) -> None:
        self._tp: TypicalArrays = typical.kernel_args
        self.frag_milli = np.zeros(state.num_nodes, dtype=np.float64)
        self._version = np.full(state.num_nodes, -1, dtype=np.int64)
        self.refresh(state)

    def refresh(self, state: ClusterState) -> NDArray[np.float64]:
        """Per-node F for ``state`` (recomputing every node whose version changed)."""
        refresh_frag(
            state.cpu_milli_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.version,
            self.frag_milli,
            self._version,
            *self._tp,
        )
        self.total_milli = float(self.frag_milli.sum())
        return self.frag_milli

    def update(self, state: ClusterState, node: int) -> float:
        """Recompute one changed node and return the new cluster total (milli-GPU)."""
        new = node_frag_milli(
            state.cpu_milli_left[node],
            state.gpu_milli_left[node],
            state.gpu_count[node],
            state.model_id[node],
            *self._tp,
        )
        self.total_milli += new - self.frag_milli[node]
        self.frag_milli[node] = new
        self._version[node] = state.version[node]
        return self.total_milli
