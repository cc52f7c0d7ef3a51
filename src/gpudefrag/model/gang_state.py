"""Cluster state for jobs and gangs on a topology: per-GPU free milli, per-node free GPUs, and
where every running job's pods sit.

Rules (every placement code path goes through :meth:`GangState.bind`, which checks them):

* a whole-GPU pod of g GPUs takes g fully free GPUs of one node, the lowest-numbered first;
* a sharing pod (``gpu_milli < 1000``) takes part of one GPU: the partly used GPU with the least
  free milli that still fits (best fit), else the lowest-numbered fully free GPU;
* a job binds all its pods or none (a gang is all-or-nothing): if any pod does not fit, the
  state is left unchanged and :class:`PlacementError` is raised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job, pod_sizes
from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]

__all__ = ["GangState", "PlacementError", "PodPlacement"]


class PlacementError(ValueError):
    """A job's pods do not fit where a placement puts them."""


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """One bound pod: its node, its GPU indices on that node, and milli per GPU."""

    node: int
    gpu_indices: tuple[int, ...]
    gpu_milli: int


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

    # ---- queries ---------------------------------------------------------------------------
    def pods_of(self, job: Job) -> list[int]:
        """Whole GPUs per pod of ``job`` on this topology (1 for a sharing pod)."""
        if job.is_sharing:
            return [1]
        return pod_sizes(job.gpus, self.topology.max_gpus_per_node)

    def whole_free_nodes(self) -> npt.NDArray[np.bool_]:
        """Nodes with every GPU fully free."""
        whole: npt.NDArray[np.bool_] = self.free_gpus == self.topology.gpus_per_node
        return whole

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
    def _take(self, node: int, pod_gpus: int, gpu_milli: int) -> PodPlacement:
        row = self.free_milli[node]
        if gpu_milli < GPU_MILLI_PER_GPU:
            ok = np.flatnonzero(row >= gpu_milli)
            if ok.size == 0:
                raise PlacementError(f"node {node} has no GPU with {gpu_milli} milli free")
            partly = ok[row[ok] < GPU_MILLI_PER_GPU]
            pick = int(partly[np.argmin(row[partly])]) if partly.size else int(ok[0])
            if row[pick] == GPU_MILLI_PER_GPU:
                self.free_gpus[node] -= 1
            row[pick] -= gpu_milli
            return PodPlacement(node, (pick,), gpu_milli)
        free = np.flatnonzero(row == GPU_MILLI_PER_GPU)
        if free.size < pod_gpus:
            raise PlacementError(f"node {node} has {free.size} free GPUs, the pod needs {pod_gpus}")
        idx = free[:pod_gpus]
        row[idx] = 0
        self.free_gpus[node] -= pod_gpus
        return PodPlacement(node, tuple(int(i) for i in idx), GPU_MILLI_PER_GPU)

    def _give_back(self, pod: PodPlacement) -> None:
        row = self.free_milli[pod.node]
        for i in pod.gpu_indices:
            row[i] += pod.gpu_milli
            if row[i] == GPU_MILLI_PER_GPU:
                self.free_gpus[pod.node] += 1

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
        return other
