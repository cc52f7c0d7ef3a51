"""The decision core driven through the port (gpudefrag.model.port) by a plain in-memory
cluster of three nodes that is not the simulator.

Three nodes of two GPUs each (model id 0, 32 cores, 128 GiB).  Times are in seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from conftest import InMemoryCluster
from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.frag.typical import typical_pods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.model.port import Bind, Move, PendingPod, Reserve, RunningPod

ONE_GPU = PodSpec(4000, 16384, 1, 1000, name="one-gpu")
TWO_GPU = PodSpec(8000, 32768, 2, 1000, name="two-gpu")


def three_nodes() -> ClusterState:
    return ClusterState(["n0", "n1", "n2"], [0, 0, 0], [2, 2, 2], [32000] * 3, [131072] * 3)


@dataclass
class KnownRemaining:
    """A run-time estimator that knows a fixed remaining time for every pod."""

    remaining: float
    run_time: float

    def remaining_s(self, pod: RunningPod, now_s: float) -> float:
        return self.remaining

    def remaining_all_s(self, pods: Sequence[RunningPod], now_s: float) -> np.ndarray:
        return np.full(len(pods), self.remaining)

    def expected_s(self, pod: PendingPod) -> float:
        return self.run_time


def test_batch_scheduler_places_through_the_port() -> None:
    # n0 holds a 1-GPU pod (GPU 0), n2 a 2-GPU pod; n1 is empty.  Pending in queue order: a
    # 1-GPU pod (id 10), then a 2-GPU pod (id 11).  Only n1 can take the 2-GPU pod, so the only
    # way to start both is 10 -> n0 GPU 1 and 11 -> n1 GPUs 0 and 1.
    cluster = InMemoryCluster(three_nodes())
    cluster.start(1, ONE_GPU, 0, (0,), last_ckpt=0.0)
    cluster.start(2, TWO_GPU, 2, (0, 1), last_ckpt=0.0)
    cluster.pending = [PendingPod(10, ONE_GPU, 0.0, 0, False), PendingPod(11, TWO_GPU, 0.0, 0, False)]
    before = cluster.state.snapshot()
    typical = typical_pods(pod_batch([ONE_GPU, ONE_GPU, TWO_GPU]))
    scheduler = BatchScheduler(BatchPlacer(typical, SolverConfig(min_solver_batch=1)), batch_size=16)

    decision = scheduler.decide(cluster)

    assert decision.considered == 2
    assert decision.binds == [
        Bind(10, Placement(0, (1,), ONE_GPU)),
        Bind(11, Placement(1, (0, 1), TWO_GPU)),
    ]
    assert cluster.state.snapshot() == before  # deciding changed nothing


def test_defrag_controller_plans_through_the_port() -> None:
    # n0 and n1 each hold one 1-GPU pod (ids 1 and 2) and have one GPU free; n2 holds a 2-GPU
    # pod.  The pending 2-GPU pod (id 10) fits no node though two GPUs are free in total.
    # At now = 1000 s, pod 1 checkpointed at run time 990 s, pod 2 never:
    #   moving pod 1 costs 1 GPU x (10 s since its checkpoint + 30 s grace + 60 s restart) = 100,
    #   moving pod 2 costs 1 GPU x (1000 + 30 + 60) = 1090, so the plan frees n0.
    # Benefit: every pod runs 3600 s more, so without moves the 2-GPU pod waits 3600 s for n0
    # (or any node); with the plan it starts after the 30 s grace: 2 GPUs x 3570 s = 7140
    # >= (1 + 0.5) x 100.  Pod 1 goes to n1's free GPU 1, and n0 is reserved for pod 10.
    cluster = InMemoryCluster(three_nodes(), now_s=1000.0)
    cluster.start(1, ONE_GPU, 0, (0,), last_ckpt=990.0)
    cluster.start(2, ONE_GPU, 1, (0,), last_ckpt=0.0)
    cluster.start(3, TWO_GPU, 2, (0, 1), last_ckpt=0.0)
    cluster.pending = [PendingPod(10, TWO_GPU, 900.0, 0, True)]
    config = PlannerConfig(
        max_moves=2, margin=0.5, migration=MigrationModel(eviction_grace_s=30.0, restart_s=60.0)
    )
    controller = DefragController.with_config(config, KnownRemaining(remaining=3600.0, run_time=1800.0))

    actions = controller.plan(cluster)

    assert actions == [Reserve(0, 10), Move(1, 1, (1,))]
    # A reserved node is neither freed again nor a target; the controller waits for its next tick.
    cluster.reservations = {0: 10}
    assert controller.plan(cluster) == []


def test_expensive_moves_are_not_planned() -> None:
    # The same cluster, but every pod ends in 60 s: waiting costs 2 GPUs x max(0, 60 - 30) = 60
    # GPU-seconds of benefit, less than 1.5 x the cheapest move (100): no plan.
    cluster = InMemoryCluster(three_nodes(), now_s=1000.0)
    cluster.start(1, ONE_GPU, 0, (0,), last_ckpt=990.0)
    cluster.start(2, ONE_GPU, 1, (0,), last_ckpt=0.0)
    cluster.start(3, TWO_GPU, 2, (0, 1), last_ckpt=0.0)
    cluster.pending = [PendingPod(10, TWO_GPU, 900.0, 0, True)]
    config = PlannerConfig(
        max_moves=2, margin=0.5, migration=MigrationModel(eviction_grace_s=30.0, restart_s=60.0)
    )
    controller = DefragController.with_config(config, KnownRemaining(remaining=60.0, run_time=1800.0))

    assert controller.plan(cluster) == []


def test_a_pod_gets_plans_only_after_its_minimum_wait() -> None:
    # The blocked pod arrived at 900 s; at now = 1000 s it has waited 100 s.
    config = PlannerConfig(
        max_moves=2, margin=0.5, migration=MigrationModel(eviction_grace_s=30.0, restart_s=60.0)
    )
    for min_wait_s, planned in ((120.0, False), (60.0, True)):
        cluster = InMemoryCluster(three_nodes(), now_s=1000.0)
        cluster.start(1, ONE_GPU, 0, (0,), last_ckpt=990.0)
        cluster.start(2, ONE_GPU, 1, (0,), last_ckpt=0.0)
        cluster.start(3, TWO_GPU, 2, (0, 1), last_ckpt=0.0)
        cluster.pending = [PendingPod(10, TWO_GPU, 900.0, 0, True)]
        controller = DefragController.with_config(config, KnownRemaining(remaining=3600.0, run_time=1800.0))
        controller.min_wait_s = min_wait_s
        assert bool(controller.plan(cluster)) is planned
