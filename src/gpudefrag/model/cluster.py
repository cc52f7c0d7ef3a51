"""The one cluster state: per-node numpy arrays, pods, and jobs and gangs on a topology.

State changes only through :meth:`ClusterState.bind` and :meth:`ClusterState.unbind` (a pod at
a placement) and :meth:`~gpudefrag.model.cluster_jobs.JobOps.bind_job` and
:meth:`~gpudefrag.model.cluster_jobs.JobOps.unbind_job` (a whole job or gang, its GPUs chosen by
one rule, :mod:`gpudefrag.model.cluster_jobs`); deciders (policies, the batch placer, the
defrag planner, the gang placers and defragmenters, the victim rules) read the arrays and return
placements.  A what-if runs on :meth:`ClusterState.copy`, which copies only the dynamic arrays.

Every state has a topology: the one it was built for (:meth:`ClusterState.for_topology`, which
also keeps the domain aggregates), or a flat one (its nodes, no levels above them).  Dynamic
arrays besides the per-node resources left: ``free_gpus[node]`` (fully free GPUs) and ``epoch``
(a counter of changes to the state as a whole, for caches of whole-state views).

Every change to a node gives it a fresh ``version`` from a process-wide counter.  Equal versions
therefore imply equal node contents, so caches keyed by (node index, version) stay valid across
copies and never need explicit invalidation.  A :class:`NodeWatcher` registered with
:meth:`ClusterState.watch` is told the index of every node that changes (an incremental index
keeps itself current this way); copies start with no watchers.

GPU slots beyond a node's ``gpu_count`` hold 0 and are never used.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.cluster_jobs import JobOps, PlacementError, PodPlacement
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_GPUS_PER_NODE, MAX_PODS_PER_NODE
from gpudefrag.model.domain_counts import DomainCounts
from gpudefrag.model.domain_index import DomainIndex
from gpudefrag.model.gpu_models import mask_accepts
from gpudefrag.model.jobs import Job
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.topology import Topology

__all__ = [
    "AFFINITY_TAGS",
    "ClusterState",
    "NodeWatcher",
    "Placement",
    "PlacementError",
    "PodPlacement",
    "affinity_tag",
]


def _fresh_counter() -> Iterator[int]:
    return itertools.count((os.getpid() << 40) + 1)


_VERSION_COUNTER: list[Iterator[int]] = [_fresh_counter()]
"""Node versions unique across processes alive at the same time: the pid in the high bits, so a
state moved to another process can never collide with a cache entry there.  A forked child
starts its own counter (a spawned one imports this module afresh)."""


def _restart_counter_after_fork() -> None:
    _VERSION_COUNTER[0] = _fresh_counter()


os.register_at_fork(after_in_child=_restart_counter_after_fork)


def _next_version() -> int:
    """A fresh node version (:data:`_VERSION_COUNTER`)."""
    return next(_VERSION_COUNTER[0])


AFFINITY_TAGS = MAX_GPUS_PER_NODE + 1
"""GpuClustering tags: 0 = ``share-gpu``; k = ``k-gpu`` (whole GPUs, k = 1..8)."""


def affinity_tag(pod: PodSpec) -> int:
    """GpuClustering's tag of a GPU pod (-1 for CPU-only pods, which carry none)."""
    if pod.gpu_milli <= 0:
        return -1
    if pod.num_gpu == 1 and pod.gpu_milli < GPU_MILLI_PER_GPU:
        return 0
    return pod.num_gpu


class NodeWatcher(Protocol):
    """Told about every node whose contents change (after the change)."""

    def node_changed(self, node: int) -> None: ...

    def nodes_changed(self, nodes: NDArray[np.int64]) -> None: ...


_PER_NODE = ("cpu_milli_left", "memory_mib_left", "pod_count", "affinity")
"""Dynamic per-node arrays besides the GPU milli, free GPUs and versions."""


def _fresh_versions(n: int) -> NDArray[np.int64]:
    return np.array([_next_version() for _ in range(n)], dtype=np.int64)


@dataclass(frozen=True)
class Placement:
    """Where a pod goes: a node index and the GPU indices it uses (empty for CPU-only pods)."""

    node: int
    gpus: tuple[int, ...]
    pod: PodSpec


class ClusterState(JobOps):
    """Per-node arrays.  Static: names, GPU model id, GPU count, capacities, tie-break rank,
    the topology.

    Dynamic: ``cpu_milli_left``, ``memory_mib_left``, ``gpu_milli_left[node, gpu]`` (``gpu_slots``
    columns: 8 unless built for a topology), ``free_gpus``, ``pod_count``, ``affinity[node, tag]``
    (GPU pods per GpuClustering tag), ``version``, ``epoch``; the running jobs (``placements``,
    ``jobs``, ``node_jobs``: per node the frozen set of its jobs' ids) and, for a topology, the domain aggregates.
    ``tie_rank[node]``: lower wins a score tie (FGD's "lowest randomised node name").
    """

    def __init__(
        self,
        names: list[str] | tuple[str, ...],
        model_id: NDArray[np.int64],
        gpu_count: NDArray[np.int64],
        cpu_milli: NDArray[np.int64],
        memory_mib: NDArray[np.int64],
        tie_rank: NDArray[np.int64] | None = None,
        gpu_slots: int = MAX_GPUS_PER_NODE,
    ) -> None:
        n = len(names)
        self.names = tuple(names)
        self.model_id = np.asarray(model_id, dtype=np.int64).copy()
        self.gpu_count = np.asarray(gpu_count, dtype=np.int64).copy()
        self.cpu_capacity_milli = np.asarray(cpu_milli, dtype=np.int64).copy()
        self.memory_capacity_mib = np.asarray(memory_mib, dtype=np.int64).copy()
        for arr, label in (
            (self.model_id, "model_id"),
            (self.gpu_count, "gpu_count"),
            (self.cpu_capacity_milli, "cpu_milli"),
            (self.memory_capacity_mib, "memory_mib"),
        ):
            if arr.shape != (n,):
                raise ValueError(f"{label} has shape {arr.shape}, expected ({n},)")
        if n and (self.gpu_count.min() < 0 or self.gpu_count.max() > gpu_slots):
            raise ValueError(f"gpu_count must be within 0..{gpu_slots}")
        self.tie_rank = (
            np.arange(n, dtype=np.int64) if tie_rank is None else np.asarray(tie_rank, dtype=np.int64).copy()
        )
        self.cpu_milli_left = self.cpu_capacity_milli.copy()
        self.memory_mib_left = self.memory_capacity_mib.copy()
        slots = np.arange(gpu_slots)[None, :]
        self.gpu_milli_left = np.where(slots < self.gpu_count[:, None], GPU_MILLI_PER_GPU, 0).astype(np.int64)
        self.pod_count = np.zeros(n, dtype=np.int64)
        self.affinity = np.zeros((n, max(AFFINITY_TAGS, gpu_slots + 1)), dtype=np.int64)
        self.version = _fresh_versions(n)
        self.epoch = 0
        self.free_gpus = self.gpu_count.copy()
        self._free_total = int(self.free_gpus.sum())
        self.topology = Topology(self.gpu_count.copy(), self.names, (), ())  # flat: no levels
        self._index: DomainIndex | None = None
        self._counts: DomainCounts | None = None
        self.placements: dict[int, tuple[PodPlacement, ...]] = {}
        self.jobs: dict[int, Job] = {}
        self.node_jobs: list[frozenset[int]] = []  # allocated by the first job bound
        self._watchers: list[NodeWatcher] = []
        # fit key -> read-only mask of the nodes that could host such a pod when empty; the
        # capacity arrays never change after construction, so copies share it
        self.empty_fit_memo: dict[tuple[int, ...], NDArray[np.bool_]] = {}
        self.gpu_capacity_milli = int(self.gpu_count.sum()) * GPU_MILLI_PER_GPU
        self.used_gpu_milli = 0

    @classmethod
    def for_topology(cls, topology: Topology) -> ClusterState:
        """A state of the nodes of ``topology`` (GPUs only: no CPU or memory), keeping the
        domain aggregates of every level (:mod:`gpudefrag.model.cluster_jobs`)."""
        n = topology.num_nodes
        zeros = np.zeros(n, dtype=np.int64)
        state = cls(
            topology.node_names,
            zeros,
            topology.gpus_per_node,
            zeros,
            zeros,
            gpu_slots=topology.max_gpus_per_node,
        )
        state.topology = topology
        state.node_jobs = [frozenset()] * n
        state._counts = DomainCounts.recount(state.index, state.free_gpus, topology.gpus_per_node)
        return state

    # ----------------------------------------------------------------- queries
    @property
    def num_nodes(self) -> int:
        return len(self.names)

    def why_not_fits(self, node: int, pod: PodSpec, gpus: tuple[int, ...]) -> str | None:
        """Why ``pod`` cannot go on ``node`` using ``gpus`` (``None`` when it can)."""
        if not 0 <= node < self.num_nodes:
            return f"node index {node} out of range"
        if self.cpu_milli_left[node] < pod.cpu_milli:
            return f"CPU: needs {pod.cpu_milli} m, {self.cpu_milli_left[node]} m left"
        if self.memory_mib_left[node] < pod.memory_mib:
            return f"memory: needs {pod.memory_mib} MiB, {self.memory_mib_left[node]} MiB left"
        if self.pod_count[node] + 1 > MAX_PODS_PER_NODE:
            return "pod count limit reached"
        if len(gpus) != (pod.num_gpu if pod.gpu_milli > 0 else 0):
            return f"expects {pod.num_gpu} GPU indices, got {len(gpus)}"
        if pod.gpu_milli > 0 and not mask_accepts(pod.gpu_model_mask, int(self.model_id[node])):
            return "GPU model not accepted by the pod"
        if len(set(gpus)) != len(gpus):
            return "repeated GPU index"
        for g in gpus:
            if not 0 <= g < self.gpu_count[node]:
                return f"GPU index {g} out of range"
            if self.gpu_milli_left[node, g] < pod.gpu_milli:
                return f"GPU {g}: needs {pod.gpu_milli} milli, {self.gpu_milli_left[node, g]} left"
        return None

    # ----------------------------------------------------------------- changes
    def watch(self, watcher: NodeWatcher) -> None:
        """Tell ``watcher`` about every later change to a node of this state (not of copies)."""
        if watcher not in self._watchers:
            self._watchers.append(watcher)

    def unwatch(self, watcher: NodeWatcher) -> None:
        """Stop telling ``watcher`` (no error if it was not watching)."""
        if watcher in self._watchers:
            self._watchers.remove(watcher)

    def _touch(self, node: int) -> None:
        self.version[node] = next(_VERSION_COUNTER[0])
        for w in self._watchers:
            w.node_changed(node)

    def bind(self, placement: Placement) -> None:
        """Place a pod; raises :class:`PlacementError` (state unchanged) if it does not fit."""
        pod, node = placement.pod, placement.node
        why = self.why_not_fits(node, pod, placement.gpus)
        if why is not None:
            raise PlacementError(f"cannot bind {pod.name or 'pod'} to node {node}: {why}")
        self.cpu_milli_left[node] -= pod.cpu_milli
        self.memory_mib_left[node] -= pod.memory_mib
        self.pod_count[node] += 1
        if placement.gpus:
            row = self.gpu_milli_left[node]
            # Whole GPUs this pod is the first to use: all of them for a whole-GPU pod (it fits
            # only on untouched GPUs), else those it finds untouched.
            taken = (
                len(placement.gpus) if pod.gpu_milli >= GPU_MILLI_PER_GPU else _untouched(row, placement.gpus)
            )
            for g in placement.gpus:
                row[g] -= pod.gpu_milli
            if taken:
                old_free = int(self.free_gpus[node])
                self.free_gpus[node] = old_free - taken
                self._recount_node(node, old_free)
        tag = affinity_tag(pod)
        if tag >= 0:
            self.affinity[node, tag] += 1
        self.used_gpu_milli += pod.gpu_milli * len(placement.gpus)
        self.epoch += 1
        self._touch(node)

    def unbind(self, placement: Placement) -> None:
        """Remove a bound pod; the exact inverse of :meth:`bind`."""
        pod, node = placement.pod, placement.node
        why = self._why_not_unbindable(node, pod, placement.gpus)
        if why is not None:
            raise PlacementError(f"cannot unbind {pod.name or 'pod'} from node {node}: {why}")
        self.cpu_milli_left[node] += pod.cpu_milli
        self.memory_mib_left[node] += pod.memory_mib
        self.pod_count[node] -= 1
        if placement.gpus:
            row = self.gpu_milli_left[node]
            for g in placement.gpus:
                row[g] += pod.gpu_milli
            # Whole GPUs this pod was the last to use (all of them for a whole-GPU pod).
            freed = (
                len(placement.gpus) if pod.gpu_milli >= GPU_MILLI_PER_GPU else _untouched(row, placement.gpus)
            )
            if freed:
                old_free = int(self.free_gpus[node])
                self.free_gpus[node] = old_free + freed
                self._recount_node(node, old_free)
        tag = affinity_tag(pod)
        if tag >= 0:
            self.affinity[node, tag] -= 1
        self.used_gpu_milli -= pod.gpu_milli * len(placement.gpus)
        self.epoch += 1
        self._touch(node)

    def _why_not_unbindable(self, node: int, pod: PodSpec, gpus: tuple[int, ...]) -> str | None:
        """Why removing ``pod`` (on ``gpus``) from ``node`` cannot be the inverse of a bind."""
        if not 0 <= node < self.num_nodes:
            return f"node index {node} out of range"
        if self.pod_count[node] < 1:
            return "the node has no pod"
        if self.cpu_milli_left[node] + pod.cpu_milli > self.cpu_capacity_milli[node]:
            return "CPU would exceed capacity"
        if self.memory_mib_left[node] + pod.memory_mib > self.memory_capacity_mib[node]:
            return "memory would exceed capacity"
        if len(gpus) != (pod.num_gpu if pod.gpu_milli > 0 else 0) or len(set(gpus)) != len(gpus):
            return "GPU indices do not match the pod"
        for g in gpus:
            if not 0 <= g < self.gpu_count[node]:
                return f"GPU index {g} out of range"
            if self.gpu_milli_left[node, g] + pod.gpu_milli > GPU_MILLI_PER_GPU:
                return f"GPU {g} would exceed capacity"
        tag = affinity_tag(pod)
        if tag >= 0 and self.affinity[node, tag] < 1:
            return "no pod of this GPU shape is on the node"
        return None

    def copy(self) -> ClusterState:
        """A what-if copy: static arrays shared, dynamic arrays and the running jobs copied
        (versions kept; placements are immutable tuples, shared)."""
        other = object.__new__(ClusterState)
        other.__dict__.update(self.__dict__)
        for name in (*_PER_NODE, "gpu_milli_left", "free_gpus", "version"):
            setattr(other, name, getattr(self, name).copy())
        other._watchers = []
        other.placements = dict(self.placements)
        other.jobs = dict(self.jobs)
        other.node_jobs = list(self.node_jobs)  # immutable sets: shared until a bind replaces one
        other._counts = None if self._counts is None else self._counts.copy()
        return other

    def __getstate__(self) -> dict[str, object]:
        """Pickled without watchers (they belong to this process's deciders)."""
        return {**self.__dict__, "_watchers": []}

    def mask(self, node: int) -> None:
        """Make ``node`` unusable on this (what-if) copy: nothing left, pod-count limit reached.
        The node gets a fresh version, so no policy cache reuses its old scores.  The used-GPU
        total is not changed: a masked copy is for deciding, not for accounting."""
        self.cpu_milli_left[node] = 0
        self.memory_mib_left[node] = 0
        self.gpu_milli_left[node, :] = 0
        old_free = int(self.free_gpus[node])
        self.free_gpus[node] = 0
        self._recount_node(node, old_free)
        self.pod_count[node] = MAX_PODS_PER_NODE
        self.epoch += 1
        self._touch(node)

    def mask_many(self, nodes: NDArray[np.int64]) -> None:
        """:meth:`mask` for every node in ``nodes`` at once (one fresh version each)."""
        if nodes.size == 0:
            return
        self.cpu_milli_left[nodes] = 0
        self.memory_mib_left[nodes] = 0
        distinct = np.unique(nodes)
        self._overwrite(distinct, np.zeros((distinct.size, self.gpu_milli_left.shape[1]), dtype=np.int64))
        self.pod_count[nodes] = MAX_PODS_PER_NODE
        self.epoch += 1
        self.version[nodes] = _fresh_versions(int(nodes.size))
        for w in self._watchers:
            w.nodes_changed(nodes)

    def take_rows(self, source: ClusterState, nodes: NDArray[np.int64]) -> None:
        """Make the distinct ``nodes`` of this (what-if) copy what they are in ``source`` (a
        state of the same nodes): resources left, GPU milli, pod count and affinity copied, one
        fresh version each, watchers told.  The used-GPU total is not changed (as :meth:`mask`)."""
        if nodes.size == 0:
            return
        for name in _PER_NODE:
            getattr(self, name)[nodes] = getattr(source, name)[nodes]
        self._overwrite(nodes, source.gpu_milli_left[nodes])  # free GPUs follow
        self.epoch += 1
        self.version[nodes] = _fresh_versions(int(nodes.size))
        for w in self._watchers:
            w.nodes_changed(nodes)

    def snapshot(self) -> tuple[bytes, bytes, bytes, bytes, bytes, int]:
        """Hashable image of the dynamic state (for tests: bind then unbind restores it)."""
        return (
            self.cpu_milli_left.tobytes(),
            self.memory_mib_left.tobytes(),
            self.gpu_milli_left.tobytes(),
            self.pod_count.tobytes(),
            self.affinity.tobytes(),
            self.used_gpu_milli,
        )


def _untouched(row: np.ndarray, gpus: tuple[int, ...]) -> int:
    """How many of ``gpus`` have all their milli left in ``row`` (a loop: faster than numpy on a
    pod's one or two GPUs)."""
    n = 0
    for g in gpus:
        if row[g] == GPU_MILLI_PER_GPU:
            n += 1
    return n
