"""FGD, Fragmentation Gradient Descent (Weng et al., ATC '23; spec §4.4).

Score of a node = ``int64(sigmoid((F_before - F_after) / 1000) * 100)``: placing the pod where it
raises the node's expected fragmentation (against the typical pods) the least.  Sharing pods
take the GPU with the best truncated score (lowest index on ties); whole-GPU pods take the
lowest-index free GPUs.  Ties between nodes go to the lowest ``tie_rank``.
"""

from __future__ import annotations

import numpy as np

from gpudefrag.frag.typical import TypicalPods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.base import Policy, pod_args
from gpudefrag.policies.fgd_kernel import fgd_scores, fgd_select
from gpudefrag.policies.gpu_choice import exclusive_gpus

NAME = "fgd"


class FgdPolicy(Policy):
    """FGD against a fixed set of typical pods, with a per-(node, shape) score cache."""

    name = NAME

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._tp = (
            typical.cpu_milli,
            typical.gpu_milli,
            typical.num_gpu,
            typical.gpu_model_mask,
            typical.freq,
        )
        self.reset()

    def reset(self) -> None:
        self._keys: dict[tuple[int, int, int, int], int] = {}
        self._n_nodes = -1

    def _ensure(self, state: ClusterState, pod: PodSpec) -> int:
        n = state.num_nodes
        if n != self._n_nodes:
            self._n_nodes = n
            self._keys = {}
            self._frag = np.zeros(n, dtype=np.float64)
            self._frag_version = np.full(n, -1, dtype=np.int64)
            self._alloc(n, 16)
        key = self._keys.get(pod.key)
        if key is None:
            key = len(self._keys)
            self._keys[pod.key] = key
            if key >= self._cache_score.shape[1]:
                self._grow(2 * self._cache_score.shape[1])
        return key

    def _alloc(self, n: int, width: int) -> None:
        self._cache_score = np.zeros((n, width), dtype=np.int64)
        self._cache_gpu = np.full((n, width), -1, dtype=np.int64)
        self._cache_version = np.full((n, width), -1, dtype=np.int64)

    def _grow(self, width: int) -> None:
        old = (self._cache_score, self._cache_gpu, self._cache_version)
        self._alloc(self._n_nodes, width)
        for new, prev in zip((self._cache_score, self._cache_gpu, self._cache_version), old):
            new[:, : prev.shape[1]] = prev

    def _args(self, state: ClusterState, key: int, with_rank: bool) -> tuple:
        head = (
            state.cpu_milli_left,
            state.memory_mib_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.pod_count,
            state.version,
        )
        if with_rank:
            head += (state.tie_rank,)
        return head + (
            self._frag,
            self._frag_version,
            self._cache_score,
            self._cache_gpu,
            self._cache_version,
            key,
        )

    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        key = self._ensure(state, pod)
        node, gpu = fgd_select(*self._args(state, key, True), *pod_args(pod), *self._tp)
        if node < 0:
            return None
        if pod.is_sharing:
            gpus: tuple[int, ...] = (int(gpu),)
        elif pod.gpu_milli > 0:
            gpus = exclusive_gpus(state.gpu_milli_left[node], int(state.gpu_count[node]), pod.num_gpu)
        else:
            gpus = ()
        return Placement(int(node), gpus, pod)

    def score_nodes(self, state: ClusterState, pod: PodSpec) -> np.ndarray:
        return self.score_nodes_and_gpus(state, pod)[0]

    def score_nodes_and_gpus(self, state: ClusterState, pod: PodSpec) -> tuple[np.ndarray, np.ndarray]:
        """Scores per node (-1 infeasible) and the GPU a sharing pod would take on each."""
        key = self._ensure(state, pod)
        return fgd_scores(*self._args(state, key, False), *pod_args(pod), *self._tp)

    def node_frag_milli(self, state: ClusterState) -> np.ndarray:
        """Current F(node) of every node (milli-GPU), from the cache where it is fresh."""
        from gpudefrag.frag.kernels import refresh_frag

        self._ensure(state, PodSpec(0, 0))
        refresh_frag(
            state.cpu_milli_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.version,
            self._frag,
            self._frag_version,
            *self._tp,
        )
        return self._frag
