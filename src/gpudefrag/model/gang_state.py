"""Cluster state for jobs and gangs on a topology: per-GPU free milli, per-node free GPUs, and
where every running job's pods sit.

Rules (every placement code path goes through :meth:`GangState.bind`, which checks them):

* a whole-GPU pod of g GPUs takes g fully free GPUs of one node, the lowest-numbered first;
* a sharing pod (``gpu_milli < 1000``) takes part of one GPU: the partly used GPU with the least
  free milli that still fits (best fit), else the lowest-numbered fully free GPU;
* a job binds all its pods or none (a gang is all-or-nothing): if any pod does not fit, the
  state is left unchanged and :class:`PlacementError` is raised.

Domain aggregates (:class:`DomainCounts`), kept by every bind and unbind at O(levels) per pod:
for every topology level and the root (the whole cluster, see
:mod:`gpudefrag.model.domain_index`), the number of wholly free nodes per domain and the
histogram of fully free GPUs per node per domain.  They describe the state that ``bind`` and
``unbind`` made, and :meth:`GangState.hide` / :meth:`GangState.restore` keep them too (hiding
nodes from a placement by zeroing their free arrays, then putting them back).  Code that writes
``free_gpus`` directly (hiding nodes by zeroing them, as the reservations and the defragmenter
do for the length of one call) makes them stale;
:meth:`GangState.domain_counts` notices (the maintained total of ``free_gpus`` no longer
matches the array: zeroing a node with free GPUs always lowers it, zeroing one without changes
no count) and then answers with a recount of the current arrays.  A write that keeps the total
of ``free_gpus`` but moves whole nodes is not noticed: write through ``bind`` and ``unbind``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.domain_index import DomainIndex, domain_index
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job, pod_sizes
from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]

__all__ = ["DomainCounts", "GangState", "PlacementError", "PodPlacement"]


class PlacementError(ValueError):
    """A job's pods do not fit where a placement puts them."""


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """One bound pod: its node, its GPU indices on that node, and milli per GPU."""

    node: int
    gpu_indices: tuple[int, ...]
    gpu_milli: int


@dataclass(frozen=True, slots=True)
class DomainCounts:
    """Per level index ``li`` in ``0 .. L`` (``L`` = the root, one domain): ``whole[li][d]``
    counts the wholly free nodes (every GPU fully free) of domain ``d``; ``free_hist[li][d, f]``
    counts its nodes with exactly ``f`` fully free GPUs (``f`` in ``0 .. max_gpus_per_node``).
    A node with ``max_gpus_per_node`` free GPUs is wholly free and of the largest size."""

    whole: tuple[IntArray, ...]
    free_hist: tuple[IntArray, ...]

    @staticmethod
    def recount(index: DomainIndex, free_gpus: IntArray, gpus_per_node: IntArray) -> DomainCounts:
        """The counts of ``free_gpus`` from scratch (O(levels x nodes))."""
        cols = int(gpus_per_node.max()) + 1
        whole_node = (free_gpus == gpus_per_node).astype(np.int64)
        whole: list[IntArray] = []
        hist: list[IntArray] = []
        for li, dom in enumerate(index.domain_of):
            nd = index.num_domains[li]
            whole.append(np.bincount(dom, weights=whole_node, minlength=nd).astype(np.int64))
            flat = np.bincount(dom * cols + free_gpus, minlength=nd * cols)
            hist.append(flat.astype(np.int64).reshape(nd, cols))
        return DomainCounts(tuple(whole), tuple(hist))

    def copy(self) -> DomainCounts:
        return DomainCounts(tuple(w.copy() for w in self.whole), tuple(h.copy() for h in self.free_hist))

    def equals(self, other: DomainCounts) -> bool:
        """Same counts everywhere."""
        return all(np.array_equal(a, b) for a, b in zip(self.whole, other.whole)) and all(
            np.array_equal(a, b) for a, b in zip(self.free_hist, other.free_hist)
        )


class GangState:
    """Mutable state.  ``free_milli[n, g]`` is GPU g of node n's free milli (0 for GPUs a node
    does not have); ``free_gpus[n]`` counts node n's fully free GPUs."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        n, g = topology.num_nodes, topology.max_gpus_per_node
        present = np.arange(g)[None, :] < topology.gpus_per_node[:, None]
        self.free_milli: IntArray = np.where(present, GPU_MILLI_PER_GPU, 0).astype(np.int64)
        self.free_gpus: IntArray = topology.gpus_per_node.copy()
        self.placements: dict[int, tuple[PodPlacement, ...]] = {}
        self.jobs: dict[int, Job] = {}
        self.node_jobs: list[set[int]] = [set() for _ in range(n)]
        self.version = 0
        self.index = domain_index(topology)
        self._counts = DomainCounts.recount(self.index, self.free_gpus, topology.gpus_per_node)
        self._free_total = int(self.free_gpus.sum())

    # ---- queries ---------------------------------------------------------------------------
    def pods_of(self, job: Job) -> list[int]:
        """Whole GPUs per pod of ``job`` on this topology (1 for a sharing pod)."""
        if job.is_sharing:
            return [1]
        return pod_sizes(job.gpus, self.index.max_gpus_per_node)

    def whole_free_nodes(self) -> npt.NDArray[np.bool_]:
        """Nodes with every GPU fully free."""
        whole: npt.NDArray[np.bool_] = self.free_gpus == self.topology.gpus_per_node
        return whole

    def domain_counts(self) -> DomainCounts:
        """The domain aggregates of the current ``free_gpus`` (module docstring): the kept ones
        (O(nodes) numpy sum to check them), or a recount when a direct write made them stale.
        Read-only: do not modify the arrays."""
        if int(self.free_gpus.sum()) == self._free_total:
            return self._counts
        return DomainCounts.recount(self.index, self.free_gpus, self.topology.gpus_per_node)

    def kept_counts(self) -> DomainCounts:
        """The aggregates as bind and unbind keep them, unchecked (for tests and invariants)."""
        return self._counts

    def used_gpus(self) -> float:
        """GPUs in use, counting shared GPUs by their used milli."""
        total = self.topology.total_gpus * GPU_MILLI_PER_GPU
        return float(total - int(self.free_milli.sum())) / GPU_MILLI_PER_GPU

    def fits_sharing(self, node: int, gpu_milli: int) -> bool:
        return bool((self.free_milli[node] >= gpu_milli).any())

    def fits(self, node: int, pod_gpus: int, gpu_milli: int = GPU_MILLI_PER_GPU) -> bool:
        """Can ``node`` host one pod of ``pod_gpus`` GPUs (or a share of ``gpu_milli``)?"""
        if gpu_milli < GPU_MILLI_PER_GPU:
            return self.fits_sharing(node, gpu_milli)
        return bool(self.free_gpus[node] >= pod_gpus)

    # ---- changes -------------------------------------------------------------------------
    def hide(self, nodes: IntArray) -> IntArray:
        """Zero the free milli and free GPUs of ``nodes`` (distinct indices), keeping the
        aggregates; returns their free milli rows for :meth:`restore`.  Nothing may bind to or
        unbind from a hidden node until it is restored."""
        saved = self.free_milli[nodes].copy()
        self._overwrite(nodes, np.zeros_like(saved))
        return saved

    def restore(self, nodes: IntArray, saved_milli: IntArray) -> None:
        """Put back the free milli rows :meth:`hide` returned (free GPUs follow from them)."""
        self._overwrite(nodes, saved_milli)

    def _overwrite(self, nodes: IntArray, rows: IntArray) -> None:
        idx = np.asarray(nodes, dtype=np.int64)
        if np.unique(idx).size != idx.size:
            raise ValueError("hide and restore need distinct nodes")
        old = self.free_gpus[idx].copy()
        self.free_milli[idx] = rows
        new = (self.free_milli[idx] == GPU_MILLI_PER_GPU).sum(axis=1).astype(np.int64)
        self.free_gpus[idx] = new
        self._free_total += int(new.sum() - old.sum())
        cap = self.topology.gpus_per_node[idx]
        turn = (new == cap).astype(np.int64) - (old == cap).astype(np.int64)
        for dom, whole, hist in zip(self.index.domain_of, self._counts.whole, self._counts.free_hist):
            d = dom[idx]
            np.add.at(hist, (d, old), -1)
            np.add.at(hist, (d, new), 1)
            np.add.at(whole, d, turn)

    def _recount_node(self, node: int, old_free: int) -> None:
        """Move ``node`` in the domain aggregates from ``old_free`` to its current free GPUs."""
        new_free = int(self.free_gpus[node])
        if new_free == old_free:
            return
        self._free_total += new_free - old_free
        cap = int(self.topology.gpus_per_node[node])
        turn = int(new_free == cap) - int(old_free == cap)
        counts = self._counts
        for dom, whole, hist in zip(self.index.domain_of, counts.whole, counts.free_hist):
            d = int(dom[node])
            hist[d, old_free] -= 1
            hist[d, new_free] += 1
            if turn:
                whole[d] += turn

    def _take(self, node: int, pod_gpus: int, gpu_milli: int) -> PodPlacement:
        # the row is a handful of GPUs: plain Python on its values beats numpy calls here
        row = self.free_milli[node]
        vals: list[int] = row.tolist()
        old_free = int(self.free_gpus[node])
        if gpu_milli < GPU_MILLI_PER_GPU:
            pick, least, first_free = -1, GPU_MILLI_PER_GPU, -1
            for i, v in enumerate(vals):
                if v < gpu_milli:
                    continue
                if v < least:  # a partly used GPU that fits, the least free milli first
                    pick, least = i, v
                elif v == GPU_MILLI_PER_GPU and first_free < 0:
                    first_free = i
            if pick < 0:
                pick = first_free
            if pick < 0:
                raise PlacementError(f"node {node} has no GPU with {gpu_milli} milli free")
            if vals[pick] == GPU_MILLI_PER_GPU:
                self.free_gpus[node] -= 1
            row[pick] = vals[pick] - gpu_milli
            self._recount_node(node, old_free)
            return PodPlacement(node, (pick,), gpu_milli)
        free = [i for i, v in enumerate(vals) if v == GPU_MILLI_PER_GPU]
        if len(free) < pod_gpus:
            raise PlacementError(f"node {node} has {len(free)} free GPUs, the pod needs {pod_gpus}")
        idx = tuple(free[:pod_gpus])
        row[list(idx)] = 0
        self.free_gpus[node] -= pod_gpus
        self._recount_node(node, old_free)
        return PodPlacement(node, idx, GPU_MILLI_PER_GPU)

    def _give_back(self, pod: PodPlacement) -> None:
        row = self.free_milli[pod.node]
        old_free = int(self.free_gpus[pod.node])
        for i in pod.gpu_indices:
            row[i] += pod.gpu_milli
            if row[i] == GPU_MILLI_PER_GPU:
                self.free_gpus[pod.node] += 1
        self._recount_node(pod.node, old_free)

    def bind(self, job: Job, nodes: list[int]) -> tuple[PodPlacement, ...]:
        """Bind every pod of ``job`` (``nodes[i]`` hosts pod i), or none of them."""
        if job.job_id in self.placements:
            raise PlacementError(f"job {job.job_id} is already running")
        sizes = self.pods_of(job)
        if len(nodes) != len(sizes):
            raise PlacementError(f"job {job.job_id} has {len(sizes)} pods, got {len(nodes)} nodes")
        done: list[PodPlacement] = []
        try:
            for node, g in zip(nodes, sizes):
                if not 0 <= node < self.topology.num_nodes:
                    raise PlacementError(f"no node {node}")
                done.append(self._take(node, g, job.gpu_milli))
        except PlacementError:
            for pod in done:
                self._give_back(pod)
            raise
        placed = tuple(done)
        self.placements[job.job_id] = placed
        self.jobs[job.job_id] = job
        for pod in placed:
            self.node_jobs[pod.node].add(job.job_id)
        self.version += 1
        return placed

    def unbind(self, job_id: int) -> Job:
        """Release every pod of a running job; returns the job."""
        placed = self.placements.pop(job_id)
        for pod in placed:
            self._give_back(pod)
            self.node_jobs[pod.node].discard(job_id)
        self.version += 1
        return self.jobs.pop(job_id)

    def copy(self) -> GangState:
        """An independent copy (placements are immutable tuples, shared)."""
        other = GangState.__new__(GangState)
        other.topology = self.topology
        other.free_milli = self.free_milli.copy()
        other.free_gpus = self.free_gpus.copy()
        other.placements = dict(self.placements)
        other.jobs = dict(self.jobs)
        other.node_jobs = [set(s) for s in self.node_jobs]
        other.version = self.version
        other.index = self.index
        other._counts = self._counts.copy()
        other._free_total = self._free_total
        return other
