"""Random (spec §5.5): a uniformly random feasible node, then a uniformly random fitting GPU.

The reference draws from Go's global source in an order that its parallel filter makes
nondeterministic, so it cannot be reproduced bit for bit; we draw from a seeded numpy
``Generator`` instead (deterministic per seed).  Whole-GPU pods take the lowest-index free GPUs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.base import Policy
from gpudefrag.policies.gpu_choice import exclusive_gpus

NAME = "random"


class RandomPolicy(Policy):
    """Uniform feasible node and uniform fitting GPU, from ``numpy.random.default_rng(seed)``."""

    name = NAME

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def reseed(self, seed: int) -> None:
        self.seed = seed
        self.reset()

    def _mask(self, state: ClusterState, pod: PodSpec) -> NDArray[np.bool_]:
        from gpudefrag.model.fit import feasible_mask  # compiled: numba loads only when Random runs

        return feasible_mask(
            state.cpu_milli_left,
            state.memory_mib_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.pod_count,
            *pod.fit_key,
        )

    def score_nodes(self, state: ClusterState, pod: PodSpec) -> NDArray[np.int64]:
        """Every feasible node scores 0 (the choice is random, not score-based)."""
        return np.where(self._mask(state, pod), 0, -1).astype(np.int64)

    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        feasible = np.flatnonzero(self._mask(state, pod))
        if feasible.size == 0:
            return None
        node = int(feasible[self._rng.integers(feasible.size)]) if feasible.size > 1 else int(feasible[0])
        count = int(state.gpu_count[node])
        row = state.gpu_milli_left[node]
        if pod.is_sharing:
            fitting = [g for g in range(count) if row[g] >= pod.gpu_milli]
            gpus: tuple[int, ...] = (fitting[int(self._rng.integers(len(fitting)))],)
        elif pod.gpu_milli > 0:
            gpus = exclusive_gpus(row, count, pod.num_gpu)
        else:
            gpus = ()
        return Placement(node, gpus, pod)
