"""One cluster state for pods and jobs: pods bound at placements and jobs bound whole share the
same arrays, so each sees the other's GPUs; free GPUs, the domain aggregates, pod counts and
node versions follow both; a copy is independent of both."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpudefrag.model.cluster import ClusterState, Placement, PlacementError
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.domain_counts import DomainCounts
from gpudefrag.model.jobs import Job
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.topology import uniform


def _state() -> ClusterState:
    """Four 8-GPU nodes, two per leaf."""
    return ClusterState.for_topology(uniform(4, 8, [("leaf", 2)]))


def _recount(s: ClusterState) -> DomainCounts:
    return DomainCounts.recount(s.index, s.free_gpus, s.topology.gpus_per_node)


def _consistent(s: ClusterState) -> None:
    full = (s.gpu_milli_left == GPU_MILLI_PER_GPU).sum(axis=1)
    assert np.array_equal(s.free_gpus, full)
    assert s.kept_counts().equals(_recount(s))
    used = s.topology.total_gpus * GPU_MILLI_PER_GPU - int(s.gpu_milli_left.sum())
    assert s.used_gpu_milli == used


def test_a_pod_and_a_job_see_each_others_gpus() -> None:
    s = _state()
    s.bind(Placement(0, (0, 1, 2, 3, 4, 5), PodSpec(0, 0, 6, GPU_MILLI_PER_GPU)))
    # the job's whole-GPU rule takes the lowest fully free GPUs: 6 and 7
    placed = s.bind_job(Job(1, 0.0, 1.0, 2), [0])
    assert placed[0].gpu_indices == (6, 7)
    with pytest.raises(PlacementError):
        s.bind_job(Job(2, 0.0, 1.0, 1), [0])  # node 0 is full
    assert s.pod_count.tolist() == [2, 0, 0, 0]
    assert s.affinity[0, 6] == 1 and s.affinity[0, 2] == 1
    _consistent(s)
    s.unbind_job(1)
    assert s.pod_count.tolist() == [1, 0, 0, 0] and s.free_gpus.tolist() == [2, 8, 8, 8]
    _consistent(s)


def test_every_change_to_a_node_gives_it_a_fresh_version_and_counts_in_the_epoch() -> None:
    s = _state()
    before, epoch = s.version.copy(), s.epoch
    s.bind_job(Job(1, 0.0, 1.0, 16), [1, 2])  # a gang of two whole nodes
    assert np.flatnonzero(s.version != before).tolist() == [1, 2]
    s.bind(Placement(3, (0,), PodSpec(0, 0, 1, 500)))
    assert np.flatnonzero(s.version != before).tolist() == [1, 2, 3]
    assert s.epoch == epoch + 2


def test_random_pods_and_jobs_keep_free_gpus_and_the_aggregates() -> None:
    rng = random.Random(7)
    s = _state()
    pods: list[Placement] = []
    jobs: list[int] = []
    for step in range(400):
        if rng.random() < 0.5:
            if pods and rng.random() < 0.4:
                s.unbind(pods.pop(rng.randrange(len(pods))))
            else:
                node = rng.randrange(4)
                milli = rng.choice((250, 500, GPU_MILLI_PER_GPU))
                free = [g for g in range(8) if s.gpu_milli_left[node, g] >= milli]
                if free:
                    p = Placement(node, (rng.choice(free),), PodSpec(0, 0, 1, milli))
                    s.bind(p)
                    pods.append(p)
        elif jobs and rng.random() < 0.4:
            s.unbind_job(jobs.pop(rng.randrange(len(jobs))))
        else:
            job = Job(step, 0.0, 1.0, rng.choice((1, 2, 4)), gpu_milli=rng.choice((300, GPU_MILLI_PER_GPU)))
            if job.is_sharing:
                job = Job(step, 0.0, 1.0, 1, gpu_milli=300)
            try:
                s.bind_job(job, [rng.randrange(4)])
                jobs.append(step)
            except PlacementError:
                pass
        _consistent(s)
    other = s.copy()
    other.bind_job(Job(10_000, 0.0, 1.0, 1, gpu_milli=100), [0])
    assert 10_000 not in s.jobs
    _consistent(s)
    _consistent(other)


def test_a_masked_node_has_no_free_gpu() -> None:
    s = _state()
    s.mask_many(np.array([0, 2]))
    assert s.free_gpus.tolist() == [0, 8, 0, 8]
    assert s.kept_counts().equals(_recount(s))
    s.mask(1)
    assert s.free_gpus.tolist() == [0, 0, 0, 8]
    assert s.kept_counts().equals(_recount(s))
