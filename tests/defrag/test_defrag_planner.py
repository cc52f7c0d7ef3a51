"""The defrag planner: budgets, protected pods, hysteresis, and optimality against brute force."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudefrag.defrag.benefit import occupy, release
from gpudefrag.defrag.blocked import blocked_by_fragmentation
from gpudefrag.defrag.cost import MovablePod, move_cost_gpu_s
from gpudefrag.defrag.planner import DefragPlanner
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.model.cluster import Placement
from gpudefrag.model.fit import fits_on_view, place_on_view
from gpudefrag.model.fit import node_view as _view
from gpudefrag.model.migration import MigrationModel, last_checkpoint_work_s
from gpudefrag.model.pods import PodSpec


def _instant(restart_s: float) -> MigrationModel:
    """No grace period (the room freed is ready at once, as the hand-worked benefits assume)."""
    return MigrationModel(eviction_grace_s=0.0, restart_s=restart_s)


def _running(state, placements, data) -> list[MovablePod]:
    out = []
    for i, p in enumerate(placements):
        run_time = data.draw(st.floats(0, 20_000))
        interval = data.draw(st.sampled_from([600.0, 1800.0, 3600.0]))
        phase = data.draw(st.floats(0, 600))
        out.append(
            MovablePod(
                pod_id=i,
                node=p.node,
                gpus=p.gpus,
                spec=p.pod,
                lost_work_s=run_time - last_checkpoint_work_s(run_time, interval, phase),
                remaining_s=data.draw(st.floats(1, 40_000)),
                movable=data.draw(st.booleans() | st.just(True)),
            )
        )
    return out


@st.composite
def scenarios(draw, gen, max_nodes=4, max_pods=10):
    state = draw(gen.clusters(min_nodes=2, max_nodes=max_nodes, max_prior=0))
    prior = draw(st.lists(gen.pods(), max_size=max_pods))
    placements = gen.random_fill(state, prior, draw(st.integers(0, 2**16)))
    blocked = draw(gen.pods(kinds=("share", "whole", "multi")))
    return state, placements, blocked


def _fits_after_removal(view, removed, pod) -> bool:
    """Would ``pod`` fit on the node once ``removed`` have left?  (Reference: a fresh copy each time.)"""
    freed = view.copy()
    for p in removed:
        release(freed, p)
    return place_on_view(freed, pod) is not None


def _brute_force_cost(state, running, pod, config) -> float | None:
    """Min cost over every target node and every subset (<= max_moves) of its movable pods that
    frees room, with a destination for each moved pod found by trying every node combination."""
    best = None
    for x in range(state.num_nodes):
        on_x = [p for p in running if p.node == x and p.movable]
        view = _view(state, x)
        for size in range(1, config.max_moves + 1):
            for subset in itertools.combinations(on_x, size):
                if not _fits_after_removal(view, list(subset), pod):
                    continue
                if not _has_destinations(state, list(subset), x):
                    continue
                cost = sum(move_cost_gpu_s(p, config.migration.restart_s) for p in subset)
                best = cost if best is None else min(best, cost)
    return best


def _has_destinations(state, moved, avoid) -> bool:
    order = sorted(moved, key=lambda p: (-p.spec.total_gpu_milli, -p.spec.cpu_milli, p.pod_id))
    others = [n for n in range(state.num_nodes) if n != avoid]
    for combo in itertools.product(others, repeat=len(order)):
        views = {n: _view(state, n) for n in set(combo)}
        ok = True
        for p, n in zip(order, combo):
            if place_on_view(views[n], p.spec) is None:
                ok = False
                break
        if ok:
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), max_moves=st.integers(1, 3))
def test_planner_is_optimal_against_brute_force(data, gen, max_moves):
    state, placements, pod = data.draw(scenarios(gen))
    running = _running(state, placements, data)
    config = PlannerConfig(max_moves=max_moves, migration=_instant(60.0), margin=-1.0)  # no hysteresis
    plan = DefragPlanner(config).plan(state, running, pod)
    expected = _brute_force_cost(state, running, pod, config)
    if expected is None:
        assert plan is None
    else:
        assert plan is not None
        assert plan.cost_gpu_s == pytest.approx(expected, rel=1e-12, abs=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), max_moves=st.integers(1, 4), margin=st.floats(0.0, 3.0))
def test_plans_respect_budget_protection_hysteresis_and_fit(data, gen, max_moves, margin):
    state, placements, pod = data.draw(scenarios(gen, max_nodes=6, max_pods=16))
    running = _running(state, placements, data)
    by_id = {p.pod_id: p for p in running}
    config = PlannerConfig(
        max_moves=max_moves,
        migration=_instant(data.draw(st.sampled_from([60.0, 300.0, 900.0]))),
        margin=margin,
    )
    plan = DefragPlanner(config).plan(state, running, pod)
    if plan is None:
        return
    assert 1 <= len(plan.moves) <= max_moves
    assert all(by_id[m.pod_id].movable for m in plan.moves), "moved a protected pod"
    assert all(m.from_node == plan.target_node != m.to_node for m in plan.moves)
    assert plan.benefit_gpu_s >= (1 + margin) * plan.cost_gpu_s
    # Applying the plan: every move fits (targets bound while sources still hold), then the
    # blocked pod fits on the target once the moved pods leave it.
    work = state.copy()
    for m in plan.moves:
        work.bind(Placement(m.to_node, m.to_gpus, by_id[m.pod_id].spec))
    for m in plan.moves:
        p = by_id[m.pod_id]
        work.unbind(Placement(p.node, p.gpus, p.spec))
    view = _view(work, plan.target_node)
    assert place_on_view(view, pod) is not None


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_reused_planner_answers_as_a_fresh_one(data, gen):
    """The planner keeps its fit memo and pod grouping between calls on the same state and
    running list: changing the state in place, the excluded nodes or the list must drop them."""
    state, placements, pod = data.draw(scenarios(gen, max_nodes=4, max_pods=12))
    running = _running(state, placements, data)
    # pods the planner does not see as running: they only take room, and leave it again
    others = gen.random_fill(
        state, data.draw(st.lists(gen.pods(), max_size=4)), data.draw(st.integers(0, 2**16))
    )
    config = PlannerConfig(migration=_instant(60.0), margin=-1.0)  # no hysteresis: more plans
    reused = DefragPlanner(config)
    for _ in range(5):
        excluded = frozenset(data.draw(st.sets(st.integers(0, state.num_nodes - 1), max_size=2)))
        assert reused.plan(state, running, pod, excluded) == DefragPlanner(config).plan(
            state, running, pod, excluded
        )
        change = data.draw(st.sampled_from(["bind", "unbind", "pin", "none"]))
        if change == "bind":  # the same state object, filled further in place
            others += gen.random_fill(state, [data.draw(gen.pods())], data.draw(st.integers(0, 2**16)))
        elif change == "unbind" and others:  # ... or emptied in place
            state.unbind(others.pop(data.draw(st.integers(0, len(others) - 1))))
        elif change == "pin" and running:  # a new list with one pod no longer movable
            i = data.draw(st.integers(0, len(running) - 1))
            running = [replace(p, movable=False) if k == i else p for k, p in enumerate(running)]


def test_a_reused_planner_sees_room_freed_in_place(gen):
    # Node 0: a 1-GPU pod that blocks an 8-GPU pod; node 1: full, so the pod has nowhere to go.
    state = gen.build_cluster([("G2", 8, 96000, 393216), ("G2", 8, 96000, 393216)])
    small = PodSpec(4000, 1024, 1, 1000)
    state.bind(Placement(0, (0,), small))
    fillers = [Placement(1, (g,), PodSpec(1000, 0, 1, 1000)) for g in range(8)]
    for f in fillers:
        state.bind(f)
    running = [MovablePod(0, 0, (0,), small, lost_work_s=400.0, remaining_s=5000.0)]
    blocked = PodSpec(8000, 1024, 8, 1000)
    planner = DefragPlanner(PlannerConfig(migration=_instant(60.0), margin=0.5))
    assert planner.plan(state, running, blocked) is None
    state.unbind(fillers[3])  # the same state object: node 1 now has one free GPU
    plan = planner.plan(state, running, blocked)
    assert plan is not None and plan.moves[0].to_node == 1 and plan.moves[0].to_gpus == (3,)
    # ... and a new running list with the pod pinned is seen too
    assert planner.plan(state, [replace(running[0], movable=False)], blocked) is None
    # ... and so is node 1 excluded (reserved for another pod)
    assert planner.plan(state, running, blocked, frozenset({1})) is None
    assert planner.plan(state, running, blocked) == plan  # ... and no longer excluded


def test_hysteresis_blocks_a_plan_that_does_not_pay(gen):
    # Node 0: one 8-GPU node with a single 1-GPU pod on GPU 0; node 1: room for that pod.
    state = gen.build_cluster([("G2", 8, 96000, 393216), ("G2", 8, 96000, 393216)])
    small = PodSpec(4000, 1024, 1, 1000)
    state.bind(Placement(0, (0,), small))
    for g in range(1, 8):  # node 1 has one free GPU only
        state.bind(Placement(1, (g,), PodSpec(1000, 0, 1, 1000)))
    blocked = PodSpec(8000, 1024, 8, 1000)
    assert blocked_by_fragmentation(state, blocked)
    # 1000 s of work, checkpoints every 600 s: 400 s since the last one
    mover = MovablePod(0, 0, (0,), small, lost_work_s=400.0, remaining_s=50.0)
    # cost = 1 GPU x (lost 400 s + restart 60 s) = 460; benefit = 8 GPUs x 50 s = 400 < 460.
    assert (
        DefragPlanner(PlannerConfig(migration=_instant(60.0), margin=0.0)).plan(state, [mover], blocked)
        is None
    )
    long_running = MovablePod(0, 0, (0,), small, lost_work_s=400.0, remaining_s=5000.0)
    plan = DefragPlanner(PlannerConfig(migration=_instant(60.0), margin=0.5)).plan(
        state, [long_running], blocked
    )
    assert plan is not None and plan.target_node == 0
    assert plan.moves[0].to_node == 1 and plan.cost_gpu_s == pytest.approx(460.0)
    assert plan.benefit_gpu_s == pytest.approx(8 * 5000.0)


def test_protected_pod_is_never_moved(gen):
    state = gen.build_cluster([("G2", 8, 96000, 393216), ("G2", 8, 96000, 393216)])
    small = PodSpec(4000, 1024, 1, 1000)
    state.bind(Placement(0, (0,), small))
    for g in range(1, 8):
        state.bind(Placement(1, (g,), PodSpec(1000, 0, 1, 1000)))
    pinned = MovablePod(0, 0, (0,), small, lost_work_s=400.0, remaining_s=5000.0, movable=False)
    assert DefragPlanner().plan(state, [pinned], PodSpec(8000, 1024, 8, 1000)) is None


@pytest.mark.parametrize(
    "run_time, interval, phase, lost",
    [
        (1000.0, 600.0, 0.0, 400.0),  # checkpoints at 600: 1000 - 600
        (1000.0, 600.0, 100.0, 300.0),  # checkpoints at 100, 700: 1000 - 700
        (50.0, 600.0, 100.0, 50.0),  # before the first checkpoint: all of it
        (1200.0, 600.0, 0.0, 0.0),  # exactly on a checkpoint
    ],
)
def test_lost_work_since_last_checkpoint(run_time, interval, phase, lost):
    # the work since the last checkpoint mark is what a stop would lose
    assert run_time - last_checkpoint_work_s(run_time, interval, phase) == pytest.approx(lost)


def test_blocked_by_fragmentation_needs_enough_free_in_total(gen):
    state = gen.build_cluster([("G2", 8, 96000, 393216), ("G2", 8, 96000, 393216)])
    for node in (0, 1):
        for g in range(4):
            state.bind(Placement(node, (g,), PodSpec(1000, 0, 1, 1000)))
    assert blocked_by_fragmentation(state, PodSpec(8000, 1024, 8, 1000))  # 8 free, split 4 + 4
    assert not blocked_by_fragmentation(state, PodSpec(8000, 1024, 4, 1000))  # fits node 0
    assert not blocked_by_fragmentation(
        state, PodSpec(8000, 1024, 8, 1000, gpu_model_mask=1 << 0)
    )  # A10 only


# ----------------------------------------------------------------------------- the search's helpers
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fits_on_view_agrees_with_place_on_view_and_leaves_the_view_alone(data, gen):
    state = data.draw(gen.clusters(max_nodes=3))
    pod = data.draw(gen.pods())
    for n in range(state.num_nodes):
        view = _view(state, n)
        before = view.copy()
        assert fits_on_view(view, pod) == (place_on_view(view.copy(), pod) is not None)
        assert view == before


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_occupy_undoes_release(data, gen):
    state, placements, _ = data.draw(scenarios(gen, max_nodes=2))
    for p in _running(state, placements, data):
        view = _view(state, p.node)
        before = view.copy()
        release(view, p)
        assert view != before
        occupy(view, p)
        assert view == before


# ----------------------------------------------------------------------------- the cheapest plan
def test_the_cheapest_plan_moves_the_pod_that_loses_least(gen):
    """Node 0 (2 GPUs): half-GPU pod A (GPU 0, 500 s lost if moved) and whole-GPU pod W (GPU 1,
    nothing lost).  Node 1 (2 GPUs, little CPU): half-GPU pod B (not movable) on GPU 0, GPU 1
    free.  The blocked pod needs a whole GPU and more CPU than node 1 has: W can go to node 1's
    free GPU, or A can join B on GPU 0."""
    state = gen.build_cluster([("G2", 2, 64000, 262144), ("G2", 2, 8000, 262144)])
    half, whole, other = (
        PodSpec(1000, 1024, 1, 500),
        PodSpec(1000, 1024, 1, 1000),
        PodSpec(2000, 1024, 1, 500),
    )
    state.bind(Placement(0, (0,), half))
    state.bind(Placement(0, (1,), whole))
    state.bind(Placement(1, (0,), other))
    a = MovablePod(0, 0, (0,), half, lost_work_s=500.0, remaining_s=5000.0)
    w = MovablePod(1, 0, (1,), whole, lost_work_s=0.0, remaining_s=5000.0)
    b = MovablePod(2, 1, (0,), other, lost_work_s=0.0, remaining_s=5000.0, movable=False)
    config = PlannerConfig(max_moves=2, migration=_instant(60.0), margin=0.0)
    plan = DefragPlanner(config).plan(state, [a, w, b], PodSpec(16000, 1024, 1, 1000))
    # the cheapest plan moves W (1 GPU x 60 s) into node 1's free GPU, not A (0.5 x (500 + 60))
    assert plan is not None and [(m.pod_id, m.to_node, m.to_gpus) for m in plan.moves] == [(1, 1, (1,))]
    assert plan.cost_gpu_s == pytest.approx(60.0)
