"""The simulator's safety checks: gangs are all-or-nothing and required constraints hold.

:func:`check_job` checks one running job (called for every job bound, started or moved, right
after the event that bound it); :func:`check_state` checks every running job and the free-GPU
bookkeeping (called after every event when ``check_every_event`` is set, and at the end of
every run).  A violation raises :class:`InvariantError`: it is a bug, never an input problem.
"""

from __future__ import annotations

import numpy as np

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

__all__ = ["InvariantError", "check_job", "check_state"]


class InvariantError(AssertionError):
    """The simulated cluster reached a state the rules forbid."""


def check_job(state: ClusterState, job: Job) -> None:
    """Every pod of ``job`` is bound, each on its own node for a multi-pod gang, and a required
    topology constraint puts all of them in one domain of its level."""
    placed = state.placements.get(job.job_id)
    sizes = state.pods_of(job)
    if placed is None or len(placed) != len(sizes):
        raise InvariantError(
            f"job {job.job_id}: {0 if placed is None else len(placed)} of {len(sizes)} pods bound"
        )
    nodes = [p.node for p in placed]
    if len(sizes) > 1 and len(set(nodes)) != len(nodes):
        raise InvariantError(f"gang {job.job_id} has two pods on one node: {nodes}")
    for pod, g in zip(placed, sizes):
        if len(pod.gpu_indices) != (1 if job.is_sharing else g):
            raise InvariantError(
                f"job {job.job_id}: pod on node {pod.node} holds {len(pod.gpu_indices)} GPUs, asks {g}"
            )
    c = job.constraint
    if c is not None and c.mode == "required":
        doms = state.topology.domains(state.topology.level_index(c.level))[nodes]
        if np.unique(doms).size != 1:
            raise InvariantError(
                f"job {job.job_id} requires one '{c.level}' domain, spans {sorted(set(doms.tolist()))}"
            )


def check_state(state: ClusterState) -> None:
    """Every running job passes :func:`check_job`, and the free milli and free-GPU counts
    equal capacity minus what the bound pods hold."""
    topo = state.topology
    expected = np.where(
        np.arange(topo.max_gpus_per_node)[None, :] < topo.gpus_per_node[:, None], GPU_MILLI_PER_GPU, 0
    ).astype(np.int64)
    for job_id, placed in state.placements.items():
        check_job(state, state.jobs[job_id])
        for pod in placed:
            for g in pod.gpu_indices:
                expected[pod.node, g] -= pod.gpu_milli
    if (expected < 0).any():
        raise InvariantError("a GPU is over-committed")
    if not np.array_equal(expected, state.gpu_milli_left):
        raise InvariantError("free milli does not match the bound pods")
    if not np.array_equal((expected == GPU_MILLI_PER_GPU).sum(axis=1), state.free_gpus):
        raise InvariantError("free GPU counts do not match the free milli")
