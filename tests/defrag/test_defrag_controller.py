"""The defragmentation controller inside the time-driven simulator (issue 4).

Every scenario is two 8-GPU G2 nodes, each running four 1-GPU pods L0-L3 (node 0) and L4-L7
(node 1), bound at t = 1 (arrival 0 + 1 s decision latency), with checkpoints every 600 s of
work.  So 8 GPUs are free, but split 4 + 4.  An 8-GPU pod B arrives at t = 1000; its session
ends at T0 = 1001 with B pending, and the controller is asked for a plan.

One migration model serves the simulator and the planner: a 30 s eviction grace and a 60 s
restart (MIGRATION).  Planner arithmetic at T0 (max_moves=4, margin=0.5): each L pod has done
1000 s of work, 400 s since its checkpoint at 600; the controller adds the 30 s grace, so a
move costs 1 GPU x (430 + 60) = 490 GPU-s and freeing a node costs 4 x 490 = 1960 GPU-s.
Benefit = 8 GPUs x (the time until a node would free itself, i.e. the longest remaining work
of its pods, less the 30 s grace before the freed node is ready); a plan needs benefit >=
1.5 x 1960 = 2940, i.e. remaining work >= 367.5 + 30 = 397.5 s.

Unless a test says otherwise the controller knows the true run times: the simulator's oracle
(``Simulator.true_runtimes``).
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import place_in_order
from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.model.cluster import Placement
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.sim.events import Event
from gpudefrag.sim.latency import LatencyModel
from gpudefrag.sim.timed import Simulator, TimedConfig
from gpudefrag.workloads.synthetic import SyntheticWorkload

G2 = ("G2", 8, 96000, 393216)
T0 = 1001.0  # B's first session ends (arrival 1000 + 1 s latency): the plan is made here
GRACE, RESTART = 30.0, 60.0
MIGRATION = MigrationModel(eviction_grace_s=GRACE, restart_s=RESTART)
LONG = 20_000.0  # work of the L pods in scenario (a): they would finish at 20_001
B = 8  # B's pod id


class Pinned:
    """Places each pod on its pinned node (by name) or else the lowest node that fits (the 1 s
    latency is the run's config)."""

    name = "pinned"

    def __init__(self, pins: dict[str, int]) -> None:
        self.pins = pins

    def reset(self) -> None:
        pass

    def decide(self, cycle):
        def nodes(pod, work):
            return [self.pins[pod.name]] if pod.name in self.pins else range(work.num_nodes)

        return place_in_order(cycle, nodes)


def scenario(long_s: float = LONG, dnd=()) -> SyntheticWorkload:
    """L0-L7 (1 GPU, ``long_s`` of work) arrive at 0; B (8 GPUs, 1000 s) at 1000."""
    specs = [PodSpec(1000, 1024, 1, 1000, -1, f"L{i}") for i in range(8)]
    specs.append(PodSpec(1000, 1024, 8, 1000, -1, "B"))
    n = len(specs)
    return SyntheticWorkload(
        pods=pod_batch(specs),
        arrival_s=np.array([0.0] * 8 + [1000.0]),
        duration_s=np.array([long_s] * 8 + [1000.0]),
        checkpoint_interval_s=np.full(n, 600.0),
        checkpoint_phase_s=np.zeros(n),
        do_not_disrupt=np.isin(np.arange(n), list(dnd)),
        priority=np.zeros(n, np.int64),
        warmup_s=0.0,
        horizon_s=30_000.0,
        offered_load=1.0,
    )


def controller(runtimes, max_moves: int = 4, margin: float = 0.5, **fields) -> DefragController:
    """A controller planning every session with ``runtimes``; ``fields`` set its other knobs."""
    ctl = DefragController.with_config(
        PlannerConfig(max_moves=max_moves, migration=MIGRATION, margin=margin), runtimes
    )
    ctl.tick_interval_s = 0.0
    for name, value in fields.items():
        setattr(ctl, name, value)
    return ctl


def oracle(**kwargs):
    """:func:`controller` with the simulator's true run times, for :func:`run` to build."""
    return lambda sim: controller(sim.true_runtimes, **kwargs)


def run(gen, wl: SyntheticWorkload, make_defrag=None, hook=None, extra_nodes=()):
    """The scenario's run; ``make_defrag(sim)`` builds the defragmenter (none by default)."""
    pins = {f"L{i}": i // 4 for i in range(8)}
    sim = Simulator(
        gen.build_cluster([G2, G2, *extra_nodes]),
        wl,
        Pinned(pins),
        TimedConfig(migration=MIGRATION, latency=LatencyModel.constant(1.0), full_check_every=1),
        hook,
    )
    return sim.run(None if make_defrag is None else make_defrag(sim))


def assert_no_moves(r, b_start: float, blocked: int = B) -> None:
    assert r.migrations_executed == r.migrations_aborted == r.plans_aborted == 0
    assert r.reservations_made == 0 and r.gpu_hours_lost == 0 and r.gpu_hours_held_twice == 0
    assert r.first_bind_s[blocked] == pytest.approx(b_start)


# ----------------------------------------------------------------------------- (a) the plan runs
def test_controller_frees_a_node_for_the_blocked_pod(gen):
    events = []

    def hook(sim, t, cls, payload):
        if cls in (Event.EVICT_DONE, Event.RESTART_DONE):
            pod = payload[0]
            events.append((cls, t, pod, sim.running[pod].placement.node))

    r = run(gen, scenario(), oracle(), hook)
    assert r.first_node[:8].tolist() == [0] * 4 + [1] * 4
    # the cheapest plans tie (4 x 490 on either node): node 0, tried first, is freed; its four
    # pods move to node 1 and node 0 is reserved for B
    assert r.migrations_executed == 4 and r.migrations_aborted == 0 and r.plans_aborted == 0
    assert r.reservations_made == r.reservations_fulfilled == 1 and r.reservation_expiries == 0
    # the sources are released after the grace period; B's session starts then and lands 1 s later
    evicts = [e for e in events if e[0] == Event.EVICT_DONE]
    assert sorted(e[2] for e in evicts) == [0, 1, 2, 3]
    assert all(e[1] == pytest.approx(T0 + GRACE) and e[3] == 1 for e in evicts)
    assert r.first_bind_s[B] == pytest.approx(T0 + GRACE + 1.0) and r.first_node[B] == 0
    assert r.completion_s[B] == pytest.approx(T0 + GRACE + 1.0 + 1000.0)
    # the moved pods resume on node 1 after grace + restart
    restarts = [e for e in events if e[0] == Event.RESTART_DONE]
    assert sorted(e[2] for e in restarts) == [0, 1, 2, 3]
    assert all(e[1] == pytest.approx(T0 + GRACE + RESTART) and e[3] == 1 for e in restarts)
    # each falls back to its checkpoint at 600: 430 s of work lost (400 before the move + the
    # grace period), so it finishes 430 + 60 = 490 s late; the unmoved pods are not delayed
    assert r.completion_s[:4] == pytest.approx([1 + LONG + 490.0] * 4)
    assert r.completion_s[4:8] == pytest.approx([1 + LONG] * 4)
    assert r.gpu_hours_lost > 0
    assert r.gpu_hours_lost_work == pytest.approx(4 * 430 / 3600)
    assert r.gpu_hours_lost_restart == pytest.approx(4 * RESTART / 3600)
    assert r.gpu_hours_held_twice == pytest.approx(4 * GRACE / 3600)
    assert r.final_state.used_gpu_milli == 0 and r.completed == 9
    # useful allocation leaves out that GPU time: 4 x (430 + 60 + 30) = 2080 GPU-s of the
    # window's 30,000 s x 16 GPUs
    assert r.goodput_pct == pytest.approx(r.gpu_alloc_pct - 100 * 2080 / (30_000 * 16))

    # without the controller B waits until the long pods finish (at 20_001) and one more session
    base = run(gen, scenario())
    assert_no_moves(base, 1 + LONG + 1.0)
    assert base.goodput_pct == base.gpu_alloc_pct
    assert base.first_bind_s[B] > r.first_bind_s[B] + 18_000


# ----------------------------------------------------------------------------- (b) too many moves
def test_no_plan_when_it_needs_more_than_max_moves(gen):
    # freeing 8 GPUs on either node takes 4 moves of 1-GPU pods
    r = run(gen, scenario(), oracle(max_moves=3))
    assert_no_moves(r, 1 + LONG + 1.0)


# ----------------------------------------------------------------------------- (c) do-not-disrupt
@pytest.mark.parametrize(
    "dnd, freed",
    [
        ((0, 1, 2, 3), 1),  # node 0 is pinned: node 1 is freed instead (L4-L7 move)
        ((0, 4), None),  # one pinned pod per node blocks both (3 movable on each)
        (tuple(range(8)), None),  # everything pinned
    ],
)
def test_do_not_disrupt_pods_are_never_moved(gen, dnd, freed):
    r = run(gen, scenario(dnd=dnd), oracle())
    if freed is None:
        assert_no_moves(r, 1 + LONG + 1.0)
        return
    assert r.migrations_executed == 4 and r.reservations_fulfilled == 1
    assert r.first_node[B] == freed and r.first_bind_s[B] == pytest.approx(T0 + GRACE + 1.0)
    moved = np.flatnonzero(r.completion_s[:8] > 1 + LONG + 1.0).tolist()
    assert moved == [4, 5, 6, 7] and not set(moved) & set(dnd)


# ----------------------------------------------------------------------------- (d) hysteresis
def test_hysteresis_skips_moves_when_the_blockers_finish_soon(gen):
    # 300 s of work left at T0: benefit 8 x (300 - 30) = 2160 < 2940 -> no plan; B starts when
    # the L pods finish at 1301 (one session later)
    soon = scenario(long_s=1300.0)
    assert_no_moves(run(gen, soon, oracle()), 1302.0)
    # the margin is what refuses it: without it 2160 >= 1960 and the node is freed
    assert run(gen, soon, oracle(margin=0.0)).migrations_executed == 4
    # 400 s left: benefit 8 x (400 - 30) = 2960 >= 2940 -> the plan goes ahead
    later = run(gen, scenario(long_s=1400.0), oracle())
    assert later.migrations_executed == 4
    assert later.first_bind_s[B] == pytest.approx(T0 + GRACE + 1.0)


# ----------------------------------------------------------------------------- (e) determinism
def test_controller_runs_are_deterministic(gen):
    a, b = (run(gen, scenario(), oracle()) for _ in range(2))
    assert a.event_hash == b.event_hash and a.events_processed == b.events_processed
    assert np.array_equal(a.completion_s, b.completion_s, equal_nan=True)
    assert a.event_hash != run(gen, scenario()).event_hash


# ----------------------------------------------------------------------------- (f) headroom
@pytest.mark.parametrize(
    "headroom_fraction, planned",
    [
        (0.0, True),
        (0.11, True),  # with B placed 2 of 18 GPUs (0.111) stay free: enough
        (0.12, False),  # ... not enough: B waits for the long pods, as without the controller
    ],
)
def test_headroom_gates_plans_for_multi_gpu_pods(gen, headroom_fraction, planned):
    # a third, empty 2-GPU node: B still fits no node, and with it placed 2 GPUs stay free
    make = oracle(headroom_fraction=headroom_fraction)
    r = run(gen, scenario(), make, extra_nodes=[("G2", 2, 96000, 393216)])
    if planned:
        assert r.migrations_executed == 4 and r.reservations_fulfilled == 1
        assert r.first_bind_s[B] == pytest.approx(T0 + GRACE + 1.0)
    else:
        assert_no_moves(r, 1 + LONG + 1.0)


def test_headroom_never_gates_pods_of_one_gpu_or_less(gen):
    ctl = DefragController.with_config(PlannerConfig(), ResidualLife([1000.0]))
    ctl.headroom_fraction = 0.99
    state = gen.build_cluster([G2])
    state.bind(Placement(0, (0, 1, 2, 3, 4, 5, 6), PodSpec(1000, 1024, 7, 1000, -1, "full")))
    assert ctl.leaves_headroom(state, PodSpec(1000, 1024, 1, 1000, -1, "one"))
    assert ctl.leaves_headroom(state, PodSpec(1000, 1024, 1, 300, -1, "shared"))
    assert not ctl.leaves_headroom(state, PodSpec(1000, 1024, 2, 1000, -1, "two"))
    with pytest.raises(ValueError, match="headroom_fraction"):
        DefragController(ctl.planner, ctl.runtimes, headroom_fraction=1.0)


# ----------------------------------------------------------------------------- (g) run-time estimates
@pytest.mark.parametrize(
    "long_s, history_s, planned",
    [
        # the L pods finish 300 s after T0 (no plan with true run times); history says pods run
        # 20,000 s, so after 1000 s each has ~19,000 s left: benefit 8 x 18,970 >= 2940, plan
        (1300.0, [20_000.0], True),
        # the L pods run to 20,001 (a plan with true run times); history says 1300 s, so 300 s
        # left: benefit 8 x 270 = 2160 < 2940, no plan, and B waits for the L pods
        (LONG, [1300.0], False),
    ],
)
def test_history_estimates_replace_true_run_times(gen, long_s, history_s, planned):
    r = run(gen, scenario(long_s=long_s), lambda sim: controller(ResidualLife(history_s)))
    if planned:
        assert r.migrations_executed == 4 and r.first_bind_s[B] == pytest.approx(T0 + GRACE + 1.0)
    else:
        assert_no_moves(r, 1 + long_s + 1.0)


# ----------------------------------------------------------------------------- (h) small-pod margin
def _shared_scenario() -> SyntheticWorkload:
    """S0, S1 (half a GPU each, 1300 s of work) arrive at 0; P (one whole GPU, 1000 s) at 1000."""
    specs = [PodSpec(1000, 1024, 1, 500, -1, "S0"), PodSpec(1000, 1024, 1, 500, -1, "S1")]
    specs.append(PodSpec(1000, 1024, 1, 1000, -1, "P"))
    return SyntheticWorkload(
        pods=pod_batch(specs),
        arrival_s=np.array([0.0, 0.0, 1000.0]),
        duration_s=np.array([1300.0, 1300.0, 1000.0]),
        checkpoint_interval_s=np.full(3, 600.0),
        checkpoint_phase_s=np.zeros(3),
        do_not_disrupt=np.zeros(3, dtype=bool),
        priority=np.zeros(3, np.int64),
        warmup_s=0.0,
        horizon_s=5_000.0,
        offered_load=1.0,
    )


@pytest.mark.parametrize("small_margin, planned", [(None, False), (0.5, False), (-0.5, True)])
def test_small_pods_have_a_margin_of_their_own(gen, small_margin, planned):
    # S0 and S1 share no GPU (one-GPU nodes 0 and 1), so P is blocked by fragmentation.  At
    # T0 each S pod has run 1000 s, 400 s since its checkpoint at 600: moving one costs
    # 0.5 x (400 + 30 + 60) = 245 GPU-s and saves P 1 x (300 - 30) = 270 GPU-s of wait.  The
    # planner's margin 0.5 asks for 367.5 and refuses; a small-pod margin of -0.5 asks for 122.5
    def make(sim):
        return controller(sim.true_runtimes, small_pods_per_tick=2, small_margin=small_margin)

    one_gpu = ("G2", 1, 96000, 393216)
    sim = Simulator(
        gen.build_cluster([one_gpu, one_gpu]),
        _shared_scenario(),
        Pinned({"S0": 0, "S1": 1}),
        TimedConfig(migration=MIGRATION, latency=LatencyModel.constant(1.0), full_check_every=1),
    )
    r = sim.run(make(sim))
    if planned:
        assert r.migrations_executed == 1 and r.reservations_fulfilled == 1
        assert r.first_bind_s[2] == pytest.approx(T0 + GRACE + 1.0)
    else:
        assert_no_moves(r, 1301.0 + 1.0, blocked=2)


def test_small_margin_must_be_above_minus_one():
    ctl = DefragController.with_config(PlannerConfig(), ResidualLife([1000.0]))
    with pytest.raises(ValueError, match="small_margin"):
        DefragController(ctl.planner, ctl.runtimes, small_margin=-1.0)
