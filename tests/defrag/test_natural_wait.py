"""The natural wait averaged over joint draws of the running pods' remaining run times."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import InMemoryCluster
from gpudefrag.defrag.benefit import plan_benefit_gpu_s
from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.cost import MovablePod
from gpudefrag.defrag.natural_wait import NEVER_S, RunningDraws, mean_wait_beyond_s, stratified_levels
from gpudefrag.defrag.planner import DefragPlanner
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.model.cluster import Placement
from gpudefrag.model.constants import MAX_PODS_PER_NODE
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import PendingPod, RunningPod

G2 = ("G2", 8, 96000, 393216)
ONE_GPU = PodSpec(4000, 1024, 1, 1000)


def _fill(state, node: int, remaining: list[float], first_id: int) -> list[MovablePod]:
    """One 1-GPU pod per entry of ``remaining`` on ``node`` (GPUs 0, 1, ...)."""
    out = []
    for g, left in enumerate(remaining):
        state.bind(Placement(node, (g,), ONE_GPU))
        out.append(MovablePod(first_id + g, node, (g,), ONE_GPU, lost_work_s=100.0, remaining_s=left))
    return out


def _fixed(state, running: list[MovablePod], k: int = 3) -> RunningDraws:
    """Draws that all equal each pod's ``remaining_s``."""
    draws = np.repeat(np.array([[p.remaining_s] for p in running]), k, axis=1)
    return RunningDraws.build(state.num_nodes, running, draws)


def test_with_every_draw_at_the_mean_it_is_the_averaged_estimate(gen):
    # node 0 (X) frees a GPU in 1000 s; nodes 1-3 free one in 60, 400 and 2000 s
    state = gen.build_cluster([G2] * 4)
    running = []
    for node, first in enumerate([1000.0, 60.0, 400.0, 2000.0]):
        running += _fill(state, node, [first] + [5000.0] * 7, 8 * node)
    draws = _fixed(state, running)
    for competing in (1, 2, 3, 4, 50):
        for delay in (0.0, 30.0, 90.0):
            want = plan_benefit_gpu_s(state, running, ONE_GPU, 0, range(4), delay, competing)
            got = mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(4), delay, competing)
            assert got == pytest.approx(want), (competing, delay)


def test_a_node_freeing_several_gpus_holds_several_rooms(gen):
    # node 1 frees four GPUs at 60 s; node 2 one at 500 s; X frees one at 5000 s
    state = gen.build_cluster([G2] * 3)
    running = _fill(state, 0, [5000.0] * 8, 0)
    running += _fill(state, 1, [60.0] * 4 + [9000.0] * 4, 8)
    running += _fill(state, 2, [500.0] + [9000.0] * 7, 16)
    draws = _fixed(state, running)
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(3), 0.0, competing=4) == pytest.approx(60.0)
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(3), 0.0, competing=5) == pytest.approx(500.0)
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(3), 0.0, competing=6) == pytest.approx(5000.0)
    # a two-GPU pod: node 1's four GPUs are two rooms, node 2 has none before 9000 s, X all at 5000 s
    two = PodSpec(4000, 1024, 2, 1000)
    assert mean_wait_beyond_s(state, draws, two, 0, range(3), 0.0, competing=2) == pytest.approx(60.0)
    assert mean_wait_beyond_s(state, draws, two, 0, range(3), 0.0, competing=3) == pytest.approx(5000.0)
    assert mean_wait_beyond_s(state, draws, two, 2, range(3), 0.0, competing=3) == pytest.approx(5000.0)
    assert mean_wait_beyond_s(state, draws, two, 2, range(3), 0.0, competing=7) == pytest.approx(9000.0)


def test_it_averages_the_earliest_room_not_the_earliest_mean(gen):
    # two other nodes, each with a pod that ends after 10 s or 1000 s (mean 505 s); in each
    # draw one of them ends after 10 s, so the pod never waits more than 10 s
    state = gen.build_cluster([G2] * 3)
    running = _fill(state, 0, [9000.0] * 8, 0)
    running += _fill(state, 1, [505.0] + [9000.0] * 7, 8)
    running += _fill(state, 2, [505.0] + [9000.0] * 7, 16)
    draws = np.full((len(running), 2), 9000.0)
    draws[8] = [10.0, 1000.0]
    draws[16] = [1000.0, 10.0]
    sampled = RunningDraws.build(3, running, draws)
    assert mean_wait_beyond_s(state, sampled, ONE_GPU, 0, range(3), 0.0) == pytest.approx(10.0)
    assert plan_benefit_gpu_s(state, running, ONE_GPU, 0, range(3), 0.0) == pytest.approx(505.0)
    # pods that always end together wait as long as either
    draws[16] = [10.0, 1000.0]
    together = RunningDraws.build(3, running, draws)
    assert mean_wait_beyond_s(state, together, ONE_GPU, 0, range(3), 0.0) == pytest.approx(505.0)


def test_rooms_that_never_appear_count_as_never(gen):
    state = gen.build_cluster([G2, G2])
    for node in (0, 1):  # both nodes full of pods nobody listed
        _fill(state, node, [9000.0] * 8, 8 * node)
    draws = RunningDraws.build(2, [], np.zeros((0, 3)))
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(2), 30.0) == pytest.approx(NEVER_S - 30.0)


def test_without_a_target_it_bounds_every_target(gen):
    rng = np.random.default_rng(7)
    state = gen.build_cluster([G2] * 6)
    running = []
    for node in range(6):
        running += _fill(state, node, list(rng.uniform(10, 3000, size=8)), 8 * node)
    draws = RunningDraws.build(6, running, rng.exponential(800.0, size=(len(running), 16)))
    for spec in (ONE_GPU, PodSpec(4000, 1024, 4, 1000)):
        for competing in (1, 3, 9):
            bound = mean_wait_beyond_s(state, draws, spec, None, range(6), 30.0, competing)
            values = [mean_wait_beyond_s(state, draws, spec, x, range(6), 30.0, competing) for x in range(6)]
            assert max(values) <= bound + 1e-9
            assert max(values) > 0.0


def _copies(cpu: int, mem: int, pods: int, gpu_left: list[int], req: PodSpec) -> int:
    """Copies of ``req`` a node with these free resources holds (the kernel's stated rule)."""
    c = MAX_PODS_PER_NODE - pods
    c = min(c, cpu // req.cpu_milli, mem // req.memory_mib)
    if req.gpu_milli > 0:
        c = min(c, sum(left // req.gpu_milli for left in gpu_left) // req.num_gpu)
    return c


def _brute_force_wait_s(state, running, draws_s, req, target, nodes, delay_s, competing) -> float:
    """The module's formula, draw by draw: every room on every node, sorted, no pruning."""
    total = 0.0
    for k in range(draws_s.shape[1]):
        t_x, elsewhere = NEVER_S, []
        for n in nodes:
            cpu, mem = int(state.cpu_milli_left[n]), int(state.memory_mib_left[n])
            pods, left = int(state.pod_count[n]), [int(v) for v in state.gpu_milli_left[n]]
            have = _copies(cpu, mem, pods, left, req)
            rooms = [0.0] * have
            on_n = sorted((draws_s[i, k], i) for i, p in enumerate(running) if p.node == n)
            for t, i in on_n:
                p = running[i]
                cpu, mem, pods = cpu + p.spec.cpu_milli, mem + p.spec.memory_mib, pods - 1
                for g in p.gpus:
                    left[g] += p.spec.gpu_milli
                now = _copies(cpu, mem, pods, left, req)
                rooms += [t] * max(now - have, 0)
                have = max(have, now)
            if n == target:
                t_x = rooms[0] if rooms else NEVER_S
            else:
                elsewhere += rooms
        elsewhere.sort()
        t_d = elsewhere[competing - 1] if len(elsewhere) >= competing else NEVER_S
        total += max(min(t_d, t_x) - delay_s, 0.0)
    return total / draws_s.shape[1]


@pytest.mark.parametrize("seed", range(4))
def test_it_is_the_formula_without_pruning_on_random_clusters(gen, seed):
    rng = np.random.default_rng(seed)
    state = gen.build_cluster([G2] * 7)
    half = PodSpec(2000, 512, 1, 500)
    running, pod_id = [], 0
    for node in range(7):
        for g in range(8):
            for spec in [ONE_GPU] if rng.random() < 0.5 else [half] * int(rng.integers(1, 3)):
                state.bind(Placement(node, (g,), spec))
                running.append(MovablePod(pod_id, node, (g,), spec, lost_work_s=0.0, remaining_s=1.0))
                pod_id += 1
    draws_s = rng.exponential(600.0, size=(len(running), 6))
    draws = RunningDraws.build(7, running, draws_s)
    for req in (ONE_GPU, half, PodSpec(4000, 1024, 3, 1000)):
        for target in (None, 0, 4):
            for competing in (1, 2, 5, 13, 40):
                want = _brute_force_wait_s(state, running, draws_s, req, target, range(7), 20.0, competing)
                got = mean_wait_beyond_s(state, draws, req, target, range(7), 20.0, competing)
                assert got == pytest.approx(want, rel=1e-12), (req, target, competing)


def test_a_memoised_answer_is_dropped_once_the_state_changes(gen):
    state = gen.build_cluster([G2] * 3)
    running = _fill(state, 0, [5000.0] * 8, 0)
    running += _fill(state, 1, [60.0] + [9000.0] * 7, 8)
    running += _fill(state, 2, [500.0] + [9000.0] * 6, 16)  # GPU 7 of node 2 is free
    draws = _fixed(state, running)
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(3), 0.0) == 0.0  # node 2 has room now
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(3), 0.0) == 0.0  # memoised
    state.bind(Placement(2, (7,), ONE_GPU))  # a pod nobody listed takes it
    assert mean_wait_beyond_s(state, draws, ONE_GPU, 0, range(3), 0.0) == pytest.approx(60.0)
    assert mean_wait_beyond_s(state, _fixed(state, running), ONE_GPU, 0, range(3), 0.0) == pytest.approx(60.0)


def test_bad_shapes_and_counts_are_refused(gen):
    state = gen.build_cluster([G2])
    running = _fill(state, 0, [100.0, 200.0], 0)
    with pytest.raises(ValueError, match="shape"):
        RunningDraws.build(1, running, np.zeros((3, 4)))
    with pytest.raises(ValueError, match="shape"):
        RunningDraws.build(1, running, np.zeros((2, 0)))
    with pytest.raises(ValueError, match="competing"):
        mean_wait_beyond_s(state, _fixed(state, running), ONE_GPU, 0, [0], 0.0, competing=0)
    with pytest.raises(ValueError, match="draws"):
        stratified_levels(3, 0, np.random.default_rng(0))


def test_stratified_levels_cover_the_grid_in_each_row():
    levels = stratified_levels(50, 8, np.random.default_rng(3))
    grid = (np.arange(8) + 0.5) / 8
    assert levels.shape == (50, 8)
    assert all(np.array_equal(np.sort(row), grid) for row in levels)
    assert len({tuple(row) for row in levels}) > 1  # rows are paired at random
    assert np.array_equal(levels, stratified_levels(50, 8, np.random.default_rng(3)))


def test_residual_life_quantiles_by_hand():
    est = ResidualLife([100.0, 200.0, 300.0, 400.0])
    # a pod that has run 150 s ends after 50, 150 or 250 more seconds, equally likely
    got = est.quantiles_after_s(np.array([150.0, 0.0, 500.0]), np.array([[0.1, 0.5, 0.9]] * 3))
    assert got[0].tolist() == [50.0, 150.0, 250.0]
    assert got[1].tolist() == [100.0, 300.0, 400.0]  # the floor(u x 4)-th (from 0) of the sample
    assert got[2].tolist() == [0.0, 0.0, 0.0]  # outlived every run time
    with pytest.raises(ValueError, match="shape"):
        est.quantiles_after_s(np.array([1.0, 2.0]), np.array([[0.5]]))


def test_residual_life_quantiles_average_to_the_mean_residual_life():
    rng = np.random.default_rng(11)
    est = ResidualLife(np.sort(rng.lognormal(6.0, 1.5, size=12)))
    # ages leaving 12, 6, 4 and 3 longer run times: 12 stratified levels hit each of them evenly
    d = est._sorted_s
    ages = np.array([0.0, (d[5] + d[6]) / 2, (d[7] + d[8]) / 2, (d[8] + d[9]) / 2])
    levels = stratified_levels(ages.size, 12, rng)
    means = est.quantiles_after_s(ages, levels).mean(axis=1)
    for age, mean in zip(ages, means):
        assert mean == pytest.approx(est.remaining_after_s(age), rel=1e-9)
    pods = [
        RunningPod(i, ONE_GPU, 0, (0,), 2000.0 - a, 0.0, a, 0.0, False, False) for i, a in enumerate(ages)
    ]
    assert np.allclose(est.remaining_quantiles_s(pods, 2000.0, levels), est.quantiles_after_s(ages, levels))


# ----------------------------------------------------------------------------- planner and controller
def _served_soon(gen):
    """Node 0 (X): seven long pods and a movable half-GPU pod on GPU 7; node 1: full but for
    half of GPU 7, and its pods each end after 20 s or 2000 s.  A whole-GPU pod is blocked."""
    state = gen.build_cluster([G2, G2])
    running = _fill(state, 0, [9000.0] * 7, 0)
    half = PodSpec(2000, 1024, 1, 500)
    state.bind(Placement(0, (7,), half))
    running.append(MovablePod(7, 0, (7,), half, lost_work_s=0.0, remaining_s=9000.0))
    running += _fill(state, 1, [1010.0] * 7, 8)
    state.bind(Placement(1, (7,), half))
    return state, running


def test_the_planner_uses_the_draws_and_skips_pods_a_completion_will_serve(gen):
    state, running = _served_soon(gen)
    migration = MigrationModel(eviction_grace_s=30.0, restart_s=10.0)
    planner = DefragPlanner(PlannerConfig(max_moves=2, migration=migration, margin=0.0, wait_draws=2))
    # averaged: node 1 frees a GPU after 1010 s, so the move (5 GPU-s) is worth 980 GPU-s
    averaged = planner.plan(state, running, ONE_GPU)
    assert averaged is not None and averaged.benefit_gpu_s == pytest.approx(980.0)
    # drawn: in each draw one of node 1's pods ends after 20 s, before the grace is over
    draws = np.full((len(running), 2), 9000.0)
    draws[8:15] = 2000.0
    draws[8] = [20.0, 2000.0]
    draws[9] = [2000.0, 20.0]
    assert planner.plan(state, running, ONE_GPU, draws=RunningDraws.build(2, running, draws)) is None
    # in one draw of two nothing ends before 2000 s: (0 + 1970) / 2 GPU-s
    draws[9] = [2000.0, 2000.0]
    plan = planner.plan(state, running, ONE_GPU, draws=RunningDraws.build(2, running, draws))
    assert plan is not None and plan.benefit_gpu_s == pytest.approx(985.0)
    assert [(m.pod_id, m.to_node) for m in plan.moves] == [(7, 1)]


def test_the_controller_draws_from_history_reproducibly(gen):
    state, movable = _served_soon(gen)
    running = [
        RunningPod(p.pod_id, p.spec, p.node, p.gpus, 0.0, 0.0, 100.0, 100.0, False, False) for p in movable
    ]
    pending = [PendingPod(100, ONE_GPU, 50.0, 0, True)]
    history = ResidualLife(np.r_[np.full(50, 120.0), np.full(50, 50_000.0)])

    def actions(seed: int, draws: int):
        config = PlannerConfig(
            max_moves=2, migration=MigrationModel(30.0, 10.0), margin=0.0, wait_draws=draws
        )
        ctl = DefragController(DefragPlanner(config), history, draw_seed=seed)
        return ctl.plan(InMemoryCluster(state, 100.0, pending, running))

    # half of node 1's pods end 20 s from now; with 8 of them one almost surely does
    assert actions(0, 0) != []  # the mean residual life (~25,000 s) says the move pays
    assert actions(0, 32) == []
    assert actions(5, 32) == actions(5, 32)
