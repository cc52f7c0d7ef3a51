"""Whether a pending pod is *blocked by fragmentation*: the free resources of the nodes it may use
cover its request in total (CPU, memory, and GPU milli on nodes of an accepted model), yet no
single node can host it."""

from __future__ import annotations

import numpy as np

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.fit import fits_now_mask
from gpudefrag.model.pods import PodSpec

__all__ = ["blocked_by_fragmentation"]


def blocked_by_fragmentation(
    state: ClusterState, pod: PodSpec, excluded: frozenset[int] = frozenset()
) -> bool:
    """No node can host ``pod`` although the free resources of the nodes it may use (all but
    ``excluded``) cover it in total."""
    if not excluded:
        if fits_now_mask(state, pod).any():
            return False
        if state.cpu_milli_left.sum() < pod.cpu_milli or state.memory_mib_left.sum() < pod.memory_mib:
            return False
        if pod.gpu_milli <= 0:
            return True
        accepted = (((pod.gpu_model_mask >> state.model_id) & 1) == 1) & (state.gpu_count > 0)
        return int(state.gpu_milli_left[accepted].sum()) >= pod.total_gpu_milli
    allowed = np.ones(state.num_nodes, dtype=bool)
    allowed[np.fromiter(excluded, dtype=np.int64, count=len(excluded))] = False
    if (fits_now_mask(state, pod) & allowed).any():
        return False
    if (
        state.cpu_milli_left[allowed].sum() < pod.cpu_milli
        or state.memory_mib_left[allowed].sum() < pod.memory_mib
    ):
        return False
    if pod.gpu_milli <= 0:
        return True
    accepted = allowed & (((pod.gpu_model_mask >> state.model_id) & 1) == 1) & (state.gpu_count > 0)
    return int(state.gpu_milli_left[accepted].sum()) >= pod.total_gpu_milli
