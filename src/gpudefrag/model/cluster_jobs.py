"""Jobs and gangs on the cluster state: the part of :class:`~gpudefrag.model.cluster.ClusterState`
that binds a whole job (one pod, or a gang of pods) on the nodes a placer chose, picks the GPUs
of each pod by one rule, and keeps the topology's domain aggregates.

Rules (every job placement goes through :meth:`JobOps.bind_job`, which checks them):

* a whole-GPU pod of g GPUs takes g fully free GPUs of one node, the lowest-numbered first;
* a sharing pod (``gpu_milli < 1000``) takes part of one GPU: the partly used GPU with the least
  free milli that still fits (best fit), else the lowest-numbered fully free GPU;
* a job binds all its pods or none (a gang is all-or-nothing): if any pod does not fit, the
  state is left unchanged and :class:`~gpudefrag.model.cluster.PlacementError` is raised.

A job's pods are pods of the state like any other: they count in the pod count, the GPUs in use
and the GpuClustering tags, and each change gives its node a fresh version.  They ask no CPU
or memory (a job trace does not say).

Domain aggregates (:class:`~gpudefrag.model.domain_counts.DomainCounts`), kept on a state built
for a topology (:meth:`~gpudefrag.model.cluster.ClusterState.for_topology`) by every bind and
unbind at O(levels) per pod, pods' and jobs' alike: for every topology level and the root, the
number of wholly free nodes per domain and the histogram of fully free GPUs per node per domain.
:meth:`JobOps.hide` / :meth:`JobOps.restore` keep them too (hiding nodes from a placement by
zeroing their free arrays, then putting them back).  Code that writes ``free_gpus`` directly
makes them stale; :meth:`JobOps.domain_counts` notices (the maintained total of ``free_gpus`` no
longer matches the array) and then answers with a recount.  A write that keeps the total of
``free_gpus`` but moves whole nodes is not noticed: write through the bind and unbind methods.
A state of pods alone keeps no aggregates and recounts when asked.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.domain_counts import DomainCounts
from gpudefrag.model.domain_index import DomainIndex, domain_index
from gpudefrag.model.jobs import Job, pod_sizes

if TYPE_CHECKING:
    from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]

__all__ = ["JobOps", "PlacementError", "PodPlacement"]


_NO_JOBS: frozenset[int] = frozenset()


class PlacementError(ValueError):
    """A placement that does not fit the state it is applied to."""


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """One bound pod of a job: its node, its GPU indices on that node, and milli per GPU."""

    node: int
    gpu_indices: tuple[int, ...]
    gpu_milli: int


@functools.lru_cache(maxsize=4096)
def _pod_sizes(gpus: int, gpus_per_node: int) -> tuple[int, ...]:
    """:func:`~gpudefrag.model.jobs.pod_sizes`, remembered (a simulator asks it per bind)."""
    return tuple(pod_sizes(gpus, gpus_per_node))


class JobOps:
    """Jobs on the state (module docstring); mixed into :class:`~gpudefrag.model.cluster.ClusterState`,
    whose arrays it works on."""

    topology: Topology
    gpu_milli_left: IntArray
    free_gpus: IntArray
    pod_count: IntArray
    affinity: IntArray
    used_gpu_milli: int
    placements: dict[int, tuple[PodPlacement, ...]]
    jobs: dict[int, Job]
    node_jobs: list[frozenset[int]]
    epoch: int
    _counts: DomainCounts | None
    _free_total: int
    _index: DomainIndex | None

    @property
    def index(self) -> DomainIndex:
        """The topology's domain index (built on first use, shared by copies)."""
        idx = self._index
        if idx is None:
            idx = self._index = domain_index(self.topology)
        return idx

    def _touch(self, node: int) -> None:
        raise NotImplementedError

    # ---- queries ---------------------------------------------------------------------------
    def pods_of(self, job: Job) -> list[int]:
        """Whole GPUs per pod of ``job`` on this topology (1 for a sharing pod)."""
        if job.gpu_milli < GPU_MILLI_PER_GPU:
            return [1]
        return list(_pod_sizes(job.gpus, self.index.max_gpus_per_node))

    def whole_free_nodes(self) -> npt.NDArray[np.bool_]:
        """Nodes with every GPU fully free."""
        whole: npt.NDArray[np.bool_] = self.free_gpus == self.topology.gpus_per_node
        return whole

    def domain_counts(self) -> DomainCounts:
        """The domain aggregates of the current ``free_gpus`` (module docstring): the kept ones
        (O(nodes) numpy sum to check them), or a recount when a direct write made them stale
        or the state keeps none.  Read-only: do not modify the arrays."""
        if self._counts is not None and int(self.free_gpus.sum()) == self._free_total:
            return self._counts
        return DomainCounts.recount(self.index, self.free_gpus, self.topology.gpus_per_node)

    def kept_counts(self) -> DomainCounts:
        """The aggregates as bind and unbind keep them, unchecked (for tests and invariants)."""
        assert self._counts is not None, "a state of pods alone keeps no domain aggregates"
        return self._counts

    def used_gpus(self) -> float:
        """GPUs in use, counting shared GPUs by their used milli."""
        total = self.topology.total_gpus * GPU_MILLI_PER_GPU
        return float(total - int(self.gpu_milli_left.sum())) / GPU_MILLI_PER_GPU

    def fits_sharing(self, node: int, gpu_milli: int) -> bool:
        return bool((self.gpu_milli_left[node] >= gpu_milli).any())

    def fits(self, node: int, pod_gpus: int, gpu_milli: int = GPU_MILLI_PER_GPU) -> bool:
        """Can ``node`` host one pod of ``pod_gpus`` GPUs (or a share of ``gpu_milli``)?"""
        if gpu_milli < GPU_MILLI_PER_GPU:
            return self.fits_sharing(node, gpu_milli)
        return bool(self.free_gpus[node] >= pod_gpus)

    # ---- hiding nodes from a placement -------------------------------------------------------
    def hide(self, nodes: IntArray) -> IntArray:
        """Zero the free milli and free GPUs of ``nodes`` (distinct indices), keeping the
        aggregates; returns their free milli rows for :meth:`restore`.  Nothing may bind to or
        unbind from a hidden node until it is restored.  Versions are not changed: hiding is for
        the job world's what-ifs, not for deciders that cache by node version."""
        saved = self.gpu_milli_left[nodes].copy()
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
        self.gpu_milli_left[idx] = rows
        new = (self.gpu_milli_left[idx] == GPU_MILLI_PER_GPU).sum(axis=1).astype(np.int64)
        self.free_gpus[idx] = new
        self._free_total += int(new.sum() - old.sum())
        if self._counts is None:
            return
        cap = self.topology.gpus_per_node[idx]
        turn = (new == cap).astype(np.int64) - (old == cap).astype(np.int64)
        for dom, whole, hist in zip(self.index.domain_of, self._counts.whole, self._counts.free_hist):
            d = dom[idx]
            np.add.at(hist, (d, old), -1)
            np.add.at(hist, (d, new), 1)
            np.add.at(whole, d, turn)

    # ---- the aggregates ----------------------------------------------------------------------
    def _recount_node(self, node: int, old_free: int) -> None:
        """Move ``node`` in the domain aggregates from ``old_free`` to its current free GPUs."""
        new_free = int(self.free_gpus[node])
        if new_free == old_free:
            return
        self._free_total += new_free - old_free
        counts = self._counts
        if counts is None:
            return
        cap = int(self.topology.gpus_per_node[node])
        turn = int(new_free == cap) - int(old_free == cap)
        for dom, whole, hist in zip(self.index.domain_of, counts.whole, counts.free_hist):
            d = int(dom[node])
            hist[d, old_free] -= 1
            hist[d, new_free] += 1
            if turn:
                whole[d] += turn

    # ---- binding jobs ------------------------------------------------------------------------
    def _take(self, node: int, pod_gpus: int, gpu_milli: int) -> PodPlacement:
        # the row is a handful of GPUs: plain Python on its values beats numpy calls here
        row = self.gpu_milli_left[node]
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
            self.pod_count[node] += 1
            self.affinity[node, 0] += 1
            self.used_gpu_milli += gpu_milli
            self._touch(node)
            return PodPlacement(node, (pick,), gpu_milli)
        free = [i for i, v in enumerate(vals) if v == GPU_MILLI_PER_GPU]
        if len(free) < pod_gpus:
            raise PlacementError(f"node {node} has {len(free)} free GPUs, the pod needs {pod_gpus}")
        idx = tuple(free[:pod_gpus])
        row[list(idx)] = 0
        self.free_gpus[node] -= pod_gpus
        self._recount_node(node, old_free)
        self.pod_count[node] += 1
        self.affinity[node, pod_gpus] += 1
        self.used_gpu_milli += GPU_MILLI_PER_GPU * pod_gpus
        self._touch(node)
        return PodPlacement(node, idx, GPU_MILLI_PER_GPU)

    def _give_back(self, pod: PodPlacement) -> None:
        node, milli, gpus = pod.node, pod.gpu_milli, len(pod.gpu_indices)
        row = self.gpu_milli_left[node]
        old_free = int(self.free_gpus[node])
        freed = 0
        for i in pod.gpu_indices:
            v = int(row[i]) + milli
            row[i] = v
            freed += v == GPU_MILLI_PER_GPU
        if freed:
            self.free_gpus[node] = old_free + freed
            self._recount_node(node, old_free)
        self.pod_count[node] -= 1
        self.affinity[node, 0 if milli < GPU_MILLI_PER_GPU else gpus] -= 1
        self.used_gpu_milli -= milli * gpus
        self._touch(node)

    def bind_job(self, job: Job, nodes: list[int]) -> tuple[PodPlacement, ...]:
        """Bind every pod of ``job`` (``nodes[i]`` hosts pod i), or none of them."""
        if job.job_id in self.placements:
            raise PlacementError(f"job {job.job_id} is already running")
        sizes = self.pods_of(job)
        if len(nodes) != len(sizes):
            raise PlacementError(f"job {job.job_id} has {len(sizes)} pods, got {len(nodes)} nodes")
        if not self.node_jobs:
            self.node_jobs = [_NO_JOBS] * self.topology.num_nodes
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
        node_jobs, one = self.node_jobs, frozenset((job.job_id,))
        for pod in placed:
            node_jobs[pod.node] = node_jobs[pod.node] | one
        self.epoch += 1
        return placed

    def unbind_job(self, job_id: int) -> Job:
        """Release every pod of a running job; returns the job."""
        placed = self.placements.pop(job_id)
        node_jobs, one = self.node_jobs, frozenset((job_id,))
        for pod in placed:
            self._give_back(pod)
            node_jobs[pod.node] = node_jobs[pod.node] - one
        self.epoch += 1
        return self.jobs.pop(job_id)
