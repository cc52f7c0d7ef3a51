"""FGD, Fragmentation Gradient Descent (Weng et al., ATC '23; spec §4.4).

Score of a node = ``int64(sigmoid((F_before - F_after) / 1000) * 100)``: placing the pod where it
raises the node's expected fragmentation (against the typical pods) the least.  Sharing pods
take the GPU with the best truncated score (lowest index on ties); whole-GPU pods take the
lowest-index free GPUs.  Ties between nodes go to the lowest ``tie_rank``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias, overload

import numpy as np
from numpy.typing import NDArray

from gpudefrag.frag.typical import TypicalArrays, TypicalPods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.base import Policy, attached_index
from gpudefrag.policies.gpu_choice import exclusive_gpus
from gpudefrag.policies.kinds import FGD_KIND
from gpudefrag.policies.score_index import ScoreIndex

NAME = "fgd"

_I64: TypeAlias = NDArray[np.int64]
_F64: TypeAlias = NDArray[np.float64]
_KernelArgs: TypeAlias = tuple[_I64, _I64, _I64, _I64, _I64, _I64, _I64, _F64, _I64, _I64, _I64, _I64, int]
"""State, cache and shape-key arguments of :func:`fgd_scores`."""
_RankedKernelArgs: TypeAlias = tuple[
    _I64, _I64, _I64, _I64, _I64, _I64, _I64, _I64, _F64, _I64, _I64, _I64, _I64, int
]
"""The same with ``tie_rank`` after ``version``: the arguments of :func:`fgd_select`."""


class FgdPolicy(Policy):
    """FGD against a fixed set of typical pods, with a per-(node, shape) score cache."""

    name = NAME

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._tp: TypicalArrays = typical.kernel_args
        self._index: ScoreIndex | None = None
        self.reset()

    def attach(self, state: ClusterState) -> None:
        """Index ``state``, with the trees of the typical pods' and the expected requests built now."""
        fresh = self._index is None or self._index.state is not state
        self._index = attached_index(self._index, state, FGD_KIND, self._tp)
        if fresh:
            self._index.warm(self.typical.requests() + list(self.expected))

    def reset(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
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

    @overload
    def _args(self, state: ClusterState, key: int, with_rank: Literal[True]) -> _RankedKernelArgs: ...
    @overload
    def _args(self, state: ClusterState, key: int, with_rank: Literal[False]) -> _KernelArgs: ...
    def _args(self, state: ClusterState, key: int, with_rank: bool) -> _RankedKernelArgs | _KernelArgs:
        head = (
            state.cpu_milli_left,
            state.memory_mib_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.pod_count,
            state.version,
        )
        tail = (
            self._frag,
            self._frag_version,
            self._cache_score,
            self._cache_gpu,
            self._cache_version,
            key,
        )
        if with_rank:
            return head + (state.tie_rank,) + tail
        return head + tail

    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        if self._index is not None and self._index.state is state:
            node, gpu = self._index.best(pod)
        else:
            from gpudefrag.policies.fgd_kernel import fgd_select

            key = self._ensure(state, pod)
            node, gpu = fgd_select(*self._args(state, key, True), *pod.fit_key, *self._tp)
        if node < 0:
            return None
        return self._placement(state, pod, int(node), int(gpu))

    def top_nodes(self, state: ClusterState, pod: PodSpec, k: int) -> NDArray[np.int64]:
        """The ``k`` nodes of highest score for ``pod`` (fewer when fewer fit), best first, ties
        to the lowest ``tie_rank`` (then node index): from the index when one is attached to
        ``state`` (:meth:`ScoreIndex.top`), else from a scan of every node."""
        if self._index is not None and self._index.state is state:
            return self._index.top(pod, k)[0]
        scores = self.score_nodes(state, pod)
        feasible = np.flatnonzero(scores >= 0)
        order = np.lexsort((state.tie_rank[feasible], -scores[feasible]))
        return feasible[order[:k]]

    def select_preferring(
        self,
        state: ClusterState,
        pod: PodSpec,
        prefer: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    ) -> Placement | None:
        """:meth:`select` with FGD's score ties broken by a preference first: among the nodes
        of the best score, the largest ``prefer(tied)`` value wins, then the lowest
        ``tie_rank``.  ``prefer`` is asked only when two or more nodes tie.  With a preference
        equal on every node this is :meth:`select`'s choice."""
        scores, gpu = self.score_nodes_and_gpus(state, pod)
        best = scores.max(initial=-1)
        if best < 0:
            return None
        tied = np.flatnonzero(scores == best)
        if tied.size > 1:
            tied = tied[np.lexsort((state.tie_rank[tied], -prefer(tied)))]
        node = int(tied[0])
        return self._placement(state, pod, node, int(gpu[node]))

    @staticmethod
    def _placement(state: ClusterState, pod: PodSpec, node: int, gpu: int) -> Placement:
        """FGD's GPUs on ``node``: the scored GPU for a sharing pod, the lowest-index free GPUs
        for a whole-GPU pod."""
        if pod.is_sharing:
            gpus: tuple[int, ...] = (gpu,)
        elif pod.gpu_milli > 0:
            gpus = exclusive_gpus(state.gpu_milli_left[node], int(state.gpu_count[node]), pod.num_gpu)
        else:
            gpus = ()
        return Placement(node, gpus, pod)

    def score_nodes(self, state: ClusterState, pod: PodSpec) -> NDArray[np.int64]:
        return self.score_nodes_and_gpus(state, pod)[0]

    def score_nodes_and_gpus(
        self, state: ClusterState, pod: PodSpec
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Scores per node (-1 infeasible) and the GPU a sharing pod would take on each."""
        from gpudefrag.policies.fgd_kernel import fgd_scores

        key = self._ensure(state, pod)
        return fgd_scores(*self._args(state, key, False), *pod.fit_key, *self._tp)

    def node_frag_milli(self, state: ClusterState) -> NDArray[np.float64]:
        """Current F(node) of every node (milli-GPU), from the cache where it is fresh."""
        from gpudefrag.frag.compiled import refresh_frag

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
