"""What a defrag plan is worth: natural fit times, the queue behind the blocked pod, the grace delay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import InMemoryCluster
from gpudefrag.defrag.benefit import node_natural_wait_s, plan_benefit_gpu_s, queue_harm_gpu_s
from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.cost import MovablePod
from gpudefrag.defrag.planner import DefragPlanner
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.model.cluster import Placement
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import Move, PendingPod, Reserve, RunningPod

G2 = ("G2", 8, 96000, 393216)
ONE_GPU = PodSpec(4000, 1024, 1, 1000)


def _fill(state, node: int, remaining: list[float], first_id: int) -> list[MovablePod]:
    """Bind one 1-GPU pod per entry of ``remaining`` on ``node`` (GPUs 0, 1, ...); each would
    lose 100 s of work (run 100 s, no checkpoint yet)."""
    out = []
    for g, left in enumerate(remaining):
        state.bind(Placement(node, (g,), ONE_GPU))
        out.append(MovablePod(first_id + g, node, (g,), ONE_GPU, lost_work_s=100.0, remaining_s=left))
    return out


def test_node_natural_wait_releases_pods_in_remaining_time_order(gen):
    state = gen.build_cluster([G2])
    pods = _fill(state, 0, [500.0, 100.0, 300.0, 900.0, 50.0, 700.0, 200.0, 800.0], 0)
    two = PodSpec(4000, 1024, 2, 1000)
    assert node_natural_wait_s(state, 0, pods, ONE_GPU) == 50.0
    assert node_natural_wait_s(state, 0, pods, two) == 100.0
    assert node_natural_wait_s(state, 0, pods, PodSpec(8000, 1024, 8, 1000)) == 900.0
    # pods the caller does not list never leave
    assert node_natural_wait_s(state, 0, pods[:7], PodSpec(8000, 1024, 8, 1000)) == math.inf
    # giving up once the wait reaches a bound
    assert node_natural_wait_s(state, 0, pods, two, give_up_at_s=100.0) == math.inf
    state.unbind(Placement(0, (0,), ONE_GPU))
    assert node_natural_wait_s(state, 0, pods, ONE_GPU) == 0.0


def test_benefit_is_the_wait_saved_for_a_lone_pod_and_the_target_time_for_a_queue(gen):
    # Node 0 (the target X) frees a GPU in 1000 s; nodes 1-3 free one in 60, 400 and 2000 s.
    state = gen.build_cluster([G2] * 4)
    running = []
    for node, first in enumerate([1000.0, 60.0, 400.0, 2000.0]):
        running += _fill(state, node, [first] + [5000.0] * 7, 8 * node)
    nodes = range(4)
    # alone: the pod would start on node 1 after 60 s; the plan gets it a GPU after 30 s
    assert plan_benefit_gpu_s(state, running, ONE_GPU, 0, nodes, 30.0) == pytest.approx(30.0)
    assert plan_benefit_gpu_s(state, running, ONE_GPU, 0, nodes, 90.0) == 0.0
    # two pods want such a GPU: the second natural one comes after 400 s
    assert plan_benefit_gpu_s(state, running, ONE_GPU, 0, nodes, 30.0, competing=2) == pytest.approx(370.0)
    # a backlog longer than the other nodes can serve before X frees itself: X's own time
    for competing in (3, 4, 50):
        assert plan_benefit_gpu_s(state, running, ONE_GPU, 0, nodes, 30.0, competing) == pytest.approx(970.0)
    with pytest.raises(ValueError, match="competing"):
        plan_benefit_gpu_s(state, running, ONE_GPU, 0, nodes, 30.0, competing=0)


def test_a_lone_pod_that_a_completion_will_serve_soon_gets_no_migration(gen):
    # Node 0: seven long pods and a half-GPU sharing pod on GPU 7 (movable to node 1's spare
    # half GPU).  Node 1: full but for that half GPU; one of its whole-GPU pods ends in 45 s.
    state = gen.build_cluster([G2, G2])
    running = _fill(state, 0, [9000.0] * 7, 0)
    half = PodSpec(2000, 1024, 1, 500)
    state.bind(Placement(0, (7,), half))
    running.append(MovablePod(7, 0, (7,), half, lost_work_s=0.0, remaining_s=9000.0))
    running += _fill(state, 1, [45.0] + [9000.0] * 6, 8)
    state.bind(Placement(1, (7,), half))
    migration = MigrationModel(eviction_grace_s=30.0, restart_s=10.0)
    planner = DefragPlanner(PlannerConfig(max_moves=2, migration=migration, margin=0.0))
    # cost: 0.5 GPU x (0 s lost + 10 s restart) = 5 GPU-s; alone, the pod saves 45 - 30 = 15 s
    plan = planner.plan(state, running, ONE_GPU)
    assert plan is not None and plan.benefit_gpu_s == pytest.approx(15.0)
    strict = DefragPlanner(PlannerConfig(max_moves=2, migration=migration, margin=3.0))
    assert strict.plan(state, running, ONE_GPU) is None  # 15 < 4 x 5
    # with a queue of such pods node 1's GPU serves only the first; X's GPU is worth 9000 s more
    queued = strict.plan(state, running, ONE_GPU, competing=2)
    assert queued is not None and queued.target_node == 0
    assert queued.benefit_gpu_s == pytest.approx(9000.0 - 30.0)
    assert [(m.pod_id, m.to_node, m.to_gpus) for m in queued.moves] == [(7, 1, (7,))]


def test_controller_counts_the_pods_that_fit_inside_the_blocked_pods_request():
    def pending(i, spec):
        return PendingPod(i, spec, 0.0, 0, False)

    big = PodSpec(16000, 65536, 8, 1000)
    queue = [
        pending(0, big),
        pending(1, ONE_GPU),
        pending(2, PodSpec(2000, 1024, 1, 500)),
        pending(3, PodSpec(32000, 1024, 1, 1000)),  # more CPU than ``big`` asks for
        pending(4, PodSpec(1000, 1024, 0, 0)),
    ]  # CPU only: not GPU room
    assert DefragController.competing(queue, big) == 3
    assert DefragController.competing(queue, ONE_GPU) == 2
    assert DefragController.competing(queue, PodSpec(2000, 1024, 1, 500)) == 1
    assert DefragController.competing(queue, PodSpec(1000, 1024, 0, 0)) == 1


# ----------------------------------------------------------------------------- queue harm
def test_queue_harm_counts_the_room_the_queue_would_have_had(gen):
    state = gen.build_cluster([G2])
    pods = _fill(state, 0, [100.0, 400.0, 5000.0, 5000.0], 0)  # GPUs 4-7 free
    four = PodSpec(4000, 1024, 4, 1000)
    # nothing moved: the pod takes the free GPUs 4-7, which the queue would have had from now
    assert queue_harm_gpu_s(state, 0, pods, [], four, 1000.0) == pytest.approx(4 * 1000.0)
    eight = PodSpec(8000, 1024, 8, 1000)
    # all moved: GPUs 0-7 would have been free after 100, 400, 5000, 5000, 0, 0, 0, 0 s
    harm = queue_harm_gpu_s(state, 0, pods, pods, eight, 1000.0)
    assert harm == pytest.approx((1000 - 100) + (1000 - 400) + 0 + 0 + 4 * 1000)
    # a pod the planner was not told about holds GPU 3 for ever
    assert queue_harm_gpu_s(
        state, 0, pods[:3], pods[:3], PodSpec(4000, 1024, 3, 1000), 1000.0
    ) == pytest.approx(1000 - 100 + 1000 - 400)
    with pytest.raises(ValueError, match="does not fit"):
        queue_harm_gpu_s(state, 0, pods, [], eight, 1000.0)


def _harm_scenario(gen, b_movable: bool = True):
    """Nodes 0 and 1: seven whole-GPU pods (ending in 100 s on node 0, 9000 s on node 1) and a
    movable half-GPU pod on GPU 7 (A on node 0: 10 s lost, ends in 100 s; B on node 1: 50 s
    lost, ends in 9000 s).  Node 2: full but for half of GPU 7, with pods the planner is not
    told about.  A whole-GPU pod is blocked: 1.5 GPUs are free, in halves."""
    state = gen.build_cluster([G2, G2, G2])
    half = PodSpec(2000, 1024, 1, 500)
    running = []
    for node, rest, lost in ((0, 100.0, 10.0), (1, 9000.0, 50.0)):
        for g in range(7):
            state.bind(Placement(node, (g,), ONE_GPU))
            running.append(MovablePod(10 * node + g, node, (g,), ONE_GPU, 0.0, rest, movable=False))
        state.bind(Placement(node, (7,), half))
        running.append(
            MovablePod(10 * node + 7, node, (7,), half, lost, rest, movable=node == 0 or b_movable)
        )
    for g in range(7):
        state.bind(Placement(2, (g,), ONE_GPU))
    state.bind(Placement(2, (7,), half))
    return state, running


# no grace period: the room freed is ready at once
INSTANT = MigrationModel(eviction_grace_s=0.0, restart_s=0.0)


def test_harm_weight_prefers_the_node_whose_room_the_queue_would_not_get_soon(gen):
    state, running = _harm_scenario(gen)
    plain = DefragPlanner(PlannerConfig(max_moves=1, migration=INSTANT, margin=-1.0))
    weighed = DefragPlanner(PlannerConfig(max_moves=1, migration=INSTANT, margin=-1.0, harm_weight=1.0))
    # cheapest: move A (0.5 x 10 s) and take node 0's GPU 7, which the queue would get in 100 s
    cheap = plain.plan(state, running, ONE_GPU, duration_s=1000.0)
    assert cheap is not None and cheap.target_node == 0 and cheap.cost_gpu_s == pytest.approx(5.0)
    assert [m.pod_id for m in cheap.moves] == [7]
    # with the harm (1 GPU x (1000 - 100) s on node 0, none on node 1) node 1 wins: B costs 25
    kind = weighed.plan(state, running, ONE_GPU, duration_s=1000.0)
    assert kind is not None and kind.target_node == 1 and [m.pod_id for m in kind.moves] == [17]
    assert kind.cost_gpu_s == pytest.approx(25.0) and kind.harm_gpu_s == 0.0
    # without the pod's duration no harm is counted
    assert weighed.plan(state, running, ONE_GPU).target_node == 0


def test_hysteresis_counts_the_weighted_harm(gen):
    state, running = _harm_scenario(gen, b_movable=False)
    # only node 0 can be freed: cost 5; benefit = 1 GPU x 100 s (node 0 frees a GPU in 100 s)
    plain = DefragPlanner(PlannerConfig(max_moves=1, migration=INSTANT, margin=0.0))
    plan = plain.plan(state, running, ONE_GPU, duration_s=1000.0)
    assert plan is not None and plan.benefit_gpu_s == pytest.approx(100.0)
    weighed = DefragPlanner(PlannerConfig(max_moves=1, migration=INSTANT, margin=0.0, harm_weight=1.0))
    assert weighed.plan(state, running, ONE_GPU, duration_s=1000.0) is None  # 100 < 5 + 900
    # a short pod hardly keeps the GPU from the queue: harm 1 x (105 - 100) = 5, total 10
    short = weighed.plan(state, running, ONE_GPU, duration_s=105.0)
    assert short is not None and short.harm_gpu_s == pytest.approx(5.0)


# ----------------------------------------------------------------------------- several plans a tick
class _Known:
    """A :class:`gpudefrag.model.port.RuntimeEstimator` that knows every pod's run time."""

    def __init__(self, remaining_s: dict[int, float], durations_s):
        self.remaining, self.durations = remaining_s, np.asarray(durations_s, dtype=float)

    def remaining_s(self, pod, now_s):
        return self.remaining[pod.pod_id]

    def remaining_all_s(self, pods, now_s):
        return np.asarray([self.remaining[p.pod_id] for p in pods], dtype=float)

    def expected_s(self, pod):
        return float(self.durations[pod.pod_id])


# one grace (30 s) for the work a move loses and for the benefit's wait
MIGRATION = MigrationModel(eviction_grace_s=30.0, restart_s=10.0)


def _controller(**fields) -> DefragController:
    """A controller for :func:`_two_blocked`'s pods: 9000 s left for each running pod, 5000 s of
    run time for each blocked one."""
    known = _Known(
        dict.fromkeys([10 * node + g for node in (1, 2) for g in range(8)], 9000.0), np.full(102, 5000.0)
    )
    ctl = DefragController.with_config(PlannerConfig(max_moves=1, migration=MIGRATION, margin=0.0), known)
    for name, value in fields.items():
        setattr(ctl, name, value)
    return ctl


def _two_blocked(gen):
    """Node 0: GPUs 6 and 7 half used by pods the controller cannot move, the rest full.
    Nodes 1 and 2: seven do-not-disrupt whole-GPU pods and a movable half-GPU pod on GPU 7
    (pods 17 and 27).  Pods 100 and 101 (one GPU each) are blocked; freeing a GPU takes
    moving a half-GPU pod into another half GPU, and each half GPU takes one pod."""
    state = gen.build_cluster([G2, G2, G2])
    half = PodSpec(2000, 1024, 1, 500)
    for g in range(8):
        state.bind(Placement(0, (g,), ONE_GPU if g < 6 else half))
    running = []
    for node in (1, 2):
        for g in range(8):
            spec = ONE_GPU if g < 7 else half
            state.bind(Placement(node, (g,), spec))
            # started at 0, last checkpoint at 40: at t = 100, 60 s of work since
            running.append(RunningPod(10 * node + g, spec, node, (g,), 0.0, 600.0, 100.0, 40.0, g < 7, False))
    pending = [PendingPod(100, ONE_GPU, 10.0, 0, True), PendingPod(101, ONE_GPU, 20.0, 0, True)]
    return state, running, pending


@pytest.mark.parametrize("plans_per_tick", [1, 2])
def test_later_plans_see_the_moves_of_earlier_ones(gen, plans_per_tick):
    ctl = _controller(plans_per_tick=plans_per_tick, blocked_pods_per_tick=4)
    state, running, pending = _two_blocked(gen)
    actions = ctl.plan(InMemoryCluster(state, 100.0, pending, running))
    # per plan: the freed node reserved for its blocked pod, then the plan's one move
    assert len(actions) == 2 * plans_per_tick
    assert all(isinstance(a, Reserve) for a in actions[0::2])
    assert all(isinstance(a, Move) for a in actions[1::2])
    reserves, moves = actions[0::2], actions[1::2]
    assert [(r.pod_id, r.node) for r in reserves] == [(100, 1), (101, 2)][:plans_per_tick]
    # pod 17 takes node 0's GPU 6; the second plan sends pod 27 to GPU 7, not to GPU 6 again
    assert [(m.pod_id, m.to_node, m.to_gpus) for m in moves] == [(17, 0, (6,)), (27, 0, (7,))][
        :plans_per_tick
    ]
    work = state.copy()
    for m in moves:  # every move fits on the state as the simulator will see it
        work.bind(Placement(m.to_node, m.to_gpus, PodSpec(2000, 1024, 1, 500)))
    # the next tick waits
    assert ctl.plan(InMemoryCluster(state, 110.0, pending, running)) == []


def _behind_a_big_pod(gen):
    """:func:`_two_blocked` with an older blocked 2-GPU pod (99) at the head of the queue: the
    cluster's free milli covers it, but no one-move plan frees two GPUs on a node."""
    state, running, pending = _two_blocked(gen)
    return state, running, [PendingPod(99, PodSpec(4000, 1024, 2, 1000), 5.0, 0, True)] + pending


def test_a_shared_budget_spends_its_tries_on_the_old_big_pod(gen):
    ctl = _controller(plans_per_tick=2, blocked_pods_per_tick=1)
    state, running, pending = _behind_a_big_pod(gen)
    assert ctl.plan(InMemoryCluster(state, 100.0, pending, running)) == []
    assert set(ctl._last_try) == {99}


@pytest.mark.parametrize("small_plans", [1, 2])
def test_pods_of_one_gpu_have_their_own_budget(gen, small_plans):
    ctl = _controller(
        plans_per_tick=2, blocked_pods_per_tick=1, small_pods_per_tick=4, small_plans_per_tick=small_plans
    )
    state, running, pending = _behind_a_big_pod(gen)
    actions = ctl.plan(InMemoryCluster(state, 100.0, pending, running))
    reserves = [(a.pod_id, a.node) for a in actions if isinstance(a, Reserve)]
    assert reserves == [(100, 1), (101, 2)][:small_plans]
    assert [type(a) for a in actions] == [Reserve, Move] * small_plans
    # the big pod was still tried, on the main budget, and the small budget stopped at its plans
    assert set(ctl._last_try) == {99, 100, 101} if small_plans == 2 else {99, 100}
