"""The placement-policy interface and the score-based policy runner.

A policy decides; it never changes the state.  ``select(state, pod)`` returns a
:class:`~gpudefrag.model.cluster.Placement` (node and GPU indices) or ``None`` when the pod fits
nowhere.  ``score_nodes(state, pod)`` returns the integer score of every node (-1 where the pod
does not fit); the highest score wins and ``state.tie_rank`` breaks ties (lowest rank).

``attach(state)`` lets a policy keep an incremental index of that one state
(:class:`~gpudefrag.policies.score_index.ScoreIndex`): decisions on it then cost about
O(changes x log nodes) instead of a scan of every node, and are the same decisions.  Other
states (what-if copies) are still scanned in full.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from gpudefrag.frag.typical import TypicalArrays
from gpudefrag.model.cluster import ClusterState, Placement, affinity_tag
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.gpu_choice import choose_gpus_best
from gpudefrag.policies.score_index import ScoreIndex

StateArrays: TypeAlias = tuple[
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.int64],
]
"""``(cpu_milli_left, memory_mib_left, gpu_milli_left, gpu_count, model_id, pod_count, affinity)``."""


class Policy(ABC):
    """A per-pod placement policy."""

    name: str = ""

    @abstractmethod
    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        """Where ``pod`` goes on ``state`` (``None``: fits nowhere).  Must not mutate ``state``."""

    @abstractmethod
    def score_nodes(self, state: ClusterState, pod: PodSpec) -> NDArray[np.int64]:
        """Integer score per node, -1 where infeasible."""

    def reset(self) -> None:  # noqa: B027 (a no-op default, not abstract)
        """Forget per-run memory (caches); called at the start of every run."""

    def attach(self, state: ClusterState) -> None:  # noqa: B027 (a no-op default, not abstract)
        """Index ``state`` for faster decisions on it (module docstring); a no-op by default."""

    expected: tuple[tuple[int, ...], ...] = ()
    """Requests (pods' ``fit_key``) the cluster is expected to see (:meth:`expect`)."""

    def expect(self, requests: Iterable[tuple[int, ...]]) -> None:
        """Requests the cluster is expected to see, most common first, e.g. a workload's
        (:meth:`PodBatch.requests`): an index attached after this builds their trees at once (FGD
        and BestFit), so their first pods do not wait for a tree, and an index already attached
        builds those it lacks now (up to its tree budget: :meth:`ScoreIndex.warm`)."""
        self.expected = tuple(dict.fromkeys(requests))
        index = getattr(self, "_index", None)
        if isinstance(index, ScoreIndex):
            index.warm(self.expected)

    def index_nbytes(self) -> int | None:
        """Bytes the attached index holds (``None``: no index attached)."""
        index = getattr(self, "_index", None)
        return index.nbytes() if isinstance(index, ScoreIndex) else None

    def index_trees(self) -> int | None:
        """Trees the attached index keeps (``None``: no index attached)."""
        index = getattr(self, "_index", None)
        return index.trees if isinstance(index, ScoreIndex) else None


def attached_index(
    current: ScoreIndex | None, state: ClusterState, kind: int, typical: TypicalArrays | None = None
) -> ScoreIndex:
    """``current`` if it already indexes ``state``, else a new index (``current`` closed)."""
    if current is not None:
        if current.state is state:
            return current
        current.close()
    return ScoreIndex(state, kind, typical)


class BaselinePolicy(Policy):
    """BestFit, GpuPacking, GpuClustering or DotProd: integer score, ``best`` GPU choice."""

    def __init__(self, name: str, kernel_id: int, warm: Sequence[tuple[int, ...]] = ()) -> None:
        """``warm``: requests (as :meth:`ScoreIndex.warm` takes them) whose trees an attached
        index builds at once (a kind with bounded trees only: :meth:`ScoreIndex.warm`), e.g.
        the workload's typical pods'."""
        self.name = name
        self._kernel_id = kernel_id
        self._warm = tuple(warm)
        self._index: ScoreIndex | None = None

    def reset(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def attach(self, state: ClusterState) -> None:
        fresh = self._index is None or self._index.state is not state
        self._index = attached_index(self._index, state, self._kernel_id)
        if fresh:
            self._index.warm(self._warm + self.expected)

    def _state_args(self, state: ClusterState) -> StateArrays:
        return (
            state.cpu_milli_left,
            state.memory_mib_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.pod_count,
            state.affinity,
        )

    def score_nodes(self, state: ClusterState, pod: PodSpec) -> NDArray[np.int64]:
        from gpudefrag.policies import baseline_kernel as bk

        return bk.score_nodes(
            self._kernel_id, *self._state_args(state), *pod.fit_key, max(affinity_tag(pod), 0)
        )

    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        if self._index is not None and self._index.state is state:
            node = self._index.best(pod)[0]
        else:
            node = self._select_scan(state, pod)
        if node < 0:
            return None
        gpus = choose_gpus_best(state.gpu_milli_left[node], int(state.gpu_count[node]), pod)
        return Placement(int(node), gpus, pod)

    def _select_scan(self, state: ClusterState, pod: PodSpec) -> int:
        from gpudefrag.policies import baseline_kernel as bk

        return bk.select_node(
            self._kernel_id,
            *self._state_args(state),
            state.tie_rank,
            *pod.fit_key,
            max(affinity_tag(pod), 0),
        )
