"""The batch placer: never worse than FGD, exact against brute force, trusts no solver answer."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudefrag.batch import cpsat
from gpudefrag.batch import placer as placer_mod
from gpudefrag.batch.cpsat import best_single, pattern_value, solve_patterns, weights
from gpudefrag.batch.objective import Objective, evaluate_plan, node_frag
from gpudefrag.batch.patterns import NodeView, assign_subset
from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.model.cluster import Placement
from gpudefrag.model.pods import PodSpec

FAST = SolverConfig(time_limit_s=2.0, deterministic_time=0.05)


def _batch(data, gen, max_pods: int) -> list[PodSpec]:
    return data.draw(gen.batches(max_pods))


def _plan_objective(state, plan, typical, nodes) -> Objective:
    return evaluate_plan(state, [p for p in plan if p is not None], typical, nodes)


# --------------------------------------------------------------------- never worse than FGD
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_never_worse_than_fgd_on_the_batch_objective(data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=8, max_prior=12))
    pods = _batch(data, gen, 8)
    before = state.snapshot()
    placer = BatchPlacer(typical_small, FAST)
    result = placer.place(state, pods)
    assert state.snapshot() == before, "place() must not mutate the state"
    fgd = placer.fgd_plan(state, pods)
    nodes = {p.node for p in fgd if p is not None} | {p.node for p in result.placements if p is not None}
    chosen = _plan_objective(state, result.placements, typical_small, nodes)  # raises if invalid
    reference = _plan_objective(state, fgd, typical_small, nodes)
    assert chosen.at_least(reference)
    if result.stats.source == "solver":
        assert chosen.better_than(reference)
    assert len(result.placements) == len(pods)
    for pod, p in zip(pods, result.placements):
        assert p is None or p.pod is pod


# --------------------------------------------------------------------- CP-SAT optimum = brute force
def _brute_force_best(state, pods, typical) -> int:
    """Max over every assignment pod -> node or unplaced, each node's pods placed by the same
    canonical rule the patterns use, of the model's integer objective."""
    w_gpu, w_pod = weights(len(pods))
    args = typical.kernel_args
    n_nodes = state.num_nodes
    best = 0  # placing nothing
    views = []
    for n in range(n_nodes):
        count = int(state.gpu_count[n])
        views.append(
            NodeView(
                int(state.cpu_milli_left[n]),
                int(state.memory_mib_left[n]),
                int(state.pod_count[n]),
                [int(v) for v in state.gpu_milli_left[n, :count]],
                int(state.model_id[n]),
            )
        )
    import numpy as np

    from gpudefrag.batch.patterns import Pattern
    from gpudefrag.frag.kernels import node_frag_milli

    for assignment in itertools.product(range(-1, n_nodes), repeat=len(pods)):
        total = 0
        ok = True
        for n in range(n_nodes):
            members = tuple(i for i, a in enumerate(assignment) if a == n)
            if not members:
                continue
            placed = assign_subset(views[n], pods, members)
            if placed is None:
                ok = False
                break
            view, _ = placed
            row = np.zeros(8, dtype=np.int64)
            row[: len(view.gpu_left)] = view.gpu_left
            after = float(node_frag_milli(view.cpu_milli, row, len(view.gpu_left), view.model, *args))
            pat = Pattern(
                n,
                members,
                (),
                sum(pods[i].total_gpu_milli for i in members),
                after,
                node_frag(state, n, args),
            )
            total += pattern_value(pat, w_gpu, w_pod)
        if ok:
            best = max(best, total)
    return best


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_memoised_assignments_equal_assign_subset_in_any_visiting_order(data, gen):
    """The patterns' memo answers every subset exactly as :func:`assign_subset` does, in
    whatever order the subsets are asked (so a memoised prefix is never stale)."""
    from gpudefrag.batch.patterns import _Assignments
    from gpudefrag.model.fit import node_view

    state = data.draw(gen.clusters(min_nodes=1, max_nodes=2, max_prior=8))
    pods = _batch(data, gen, 5)
    base = node_view(state, 0)
    subsets = [c for k in range(1, len(pods) + 1) for c in itertools.combinations(range(len(pods)), k)]
    memo = _Assignments(base, pods)
    for members in data.draw(st.permutations(subsets)):
        expected = assign_subset(base, pods, members)
        got = memo.of(members)
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert got[1] == expected[1]
            assert got[0] == expected[0]
    assert base == node_view(state, 0), "the base view must stay as it was"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cpsat_optimum_equals_brute_force_on_tiny_instances(data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=3, max_prior=6))
    pods = _batch(data, gen, 6)
    exhaustive = SolverConfig(
        time_limit_s=20.0,
        deterministic_time=10.0,
        candidates_per_pod=state.num_nodes,
        max_pattern_size=len(pods),
        max_patterns_per_node=10_000,
        prune_infeasible=False,
    )
    placer = BatchPlacer(typical_small, exhaustive)
    # No hint: only the canonical patterns, which is what brute force enumerates.
    patterns, _ = placer.patterns(state, pods, [None] * len(pods))
    outcome = solve_patterns(patterns, len(pods), [], 20.0, 10.0)
    assert outcome.status == "optimal"
    assert outcome.objective == _brute_force_best(state, pods, typical_small)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_single_pod_choice_equals_cpsat_optimum(data, gen, typical_small):
    """A one-pod batch is decided without CP-SAT; its choice must be CP-SAT's optimum."""
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=8, max_prior=12))
    pods = _batch(data, gen, 1)
    placer = BatchPlacer(typical_small, FAST)
    hint = placer.fgd_plan(state, pods)
    patterns, hint_idx = placer.patterns(state, pods, hint)
    exact = best_single(patterns, hint_idx)
    solved = solve_patterns(patterns, 1, hint_idx, 20.0, 10.0)
    assert exact.status == solved.status == "optimal"
    assert exact.objective == solved.objective
    assert exact.hint_objective == solved.hint_objective
    assert len(exact.chosen) == (1 if patterns else 0)
    if exact.chosen and exact.objective == exact.hint_objective:
        assert exact.chosen == hint_idx, "a tie keeps FGD's pattern"


def test_single_pod_without_patterns_places_nothing():
    assert best_single([], []).status == "optimal"
    assert best_single([], []).chosen == []


# --------------------------------------------------------------------- trust nothing
def _mid_state(gen):
    state = gen.build_cluster(
        [("G2", 8, 96000, 393216), ("T4", 2, 104000, 524288), ("V100M32", 4, 48000, 376832)]
    )
    gen.random_fill(
        state, [PodSpec(3152, 1024, 1, 810), PodSpec(11300, 1024, 1, 1000), PodSpec(4000, 0, 1, 160)], seed=3
    )
    pods = [
        PodSpec(3152, 1024, 1, 810, name="a"),
        PodSpec(8000, 2048, 2, 1000, name="b"),
        PodSpec(4000, 0, 1, 470, name="c"),
        PodSpec(12500, 0, name="d"),
    ]
    return state, pods


@pytest.mark.parametrize(
    "status, reason", [("unknown", "timeout"), ("infeasible", "infeasible"), ("model_invalid", "error")]
)
def test_solver_status_falls_back_to_fgd_and_is_counted(monkeypatch, gen, typical_small, status, reason):
    state, pods = _mid_state(gen)

    def fake(patterns, batch_size, hint, *args, **kwargs):
        return cpsat.SolveOutcome(status, [], None, 0, None, 0.0, 0.0, len(patterns), 0)

    monkeypatch.setattr(placer_mod, "solve_patterns", fake)
    placer = BatchPlacer(typical_small, FAST)
    result = placer.place(state, pods)
    assert result.stats.source == "fgd" and result.stats.fallback == reason
    assert placer.fallbacks[reason] == 1
    assert result.placements == placer.fgd_plan(state, pods)


def test_solver_crash_falls_back_to_fgd(monkeypatch, gen, typical_small):
    state, pods = _mid_state(gen)

    def boom(*args, **kwargs):
        raise RuntimeError("solver died")

    monkeypatch.setattr(placer_mod, "solve_patterns", boom)
    placer = BatchPlacer(typical_small, FAST)
    result = placer.place(state, pods)
    assert result.stats.fallback == "error" and placer.fallbacks["error"] == 1
    assert result.placements == placer.fgd_plan(state, pods)


def test_invalid_solver_answer_is_rejected(monkeypatch, gen, typical_small):
    """A 'solution' that picks two patterns sharing a pod, or that overfills a node, is caught."""
    state, pods = _mid_state(gen)
    real = solve_patterns

    def overlapping(patterns, batch_size, hint, *args, **kwargs):
        out = real(patterns, batch_size, hint, *args, **kwargs)
        # choose every pattern: pods repeat and nodes get several patterns
        return cpsat.SolveOutcome(
            "optimal",
            list(range(len(patterns))),
            out.objective,
            out.hint_objective,
            out.bound,
            out.wall_s,
            out.deterministic_s,
            out.variables,
            out.constraints,
        )

    monkeypatch.setattr(placer_mod, "solve_patterns", overlapping)
    placer = BatchPlacer(typical_small, FAST)
    result = placer.place(state, pods)
    assert result.stats.fallback == "invalid" and placer.fallbacks["invalid"] == 1
    assert result.placements == placer.fgd_plan(state, pods)


def test_evaluate_plan_rejects_overcommitted_gpu(gen, typical_small):
    state = gen.single_node("G2", 8, 96000)
    pods = [PodSpec(1000, 0, 1, 600, name="x"), PodSpec(1000, 0, 1, 600, name="y")]
    bad = [Placement(0, (0,), pods[0]), Placement(0, (0,), pods[1])]
    with pytest.raises(placer_mod.PlanError, match="GPU 0"):
        evaluate_plan(state, bad, typical_small)


def test_model_objective_is_lexicographic():
    """One milli of GPU outweighs any pod count and fragmentation; one pod outweighs any fragmentation."""
    from gpudefrag.batch.patterns import Pattern

    for batch in (1, 16, 64):
        w_gpu, w_pod = weights(batch)
        worst_frag = batch * (cpsat.MAX_NODE_FRAG_MILLI * cpsat.FRAG_SCALE + 1)
        assert w_pod > 2 * worst_frag
        assert w_gpu > w_pod * batch + 2 * worst_frag
    w_gpu, w_pod = weights(2)
    cheap = Pattern(0, (0,), ((0,),), 1, 8000.0, 0.0)  # +1 milli, worst fragmentation
    free = Pattern(0, (0,), ((),), 0, -8000.0, 0.0)  # CPU pod, best fragmentation
    assert pattern_value(cheap, w_gpu, w_pod) > pattern_value(free, w_gpu, w_pod)


def test_batched_run_is_deterministic(default_inputs):
    from gpudefrag.experiments.suite1a.suite import run_variant

    cfg = SolverConfig(deterministic_time=0.01, time_limit_s=30.0)
    a = run_variant("solver-b16", 42, "openb_pod_list_default", cfg, limit_pods=320)
    b = run_variant("solver-b16", 42, "openb_pod_list_default", cfg, limit_pods=320)
    assert a.decisions_sha256 == b.decisions_sha256
    assert [s.solver_objective for s in a.batches] == [s.solver_objective for s in b.batches]


# --------------------------------------------------------------------- the objective
def test_the_objective_trades_fgds_pod_for_a_larger_one(gen, typical_small):
    """One free GPU; the batch is [0.81 GPU, 1 GPU].  FGD starts the first pod in line; the
    objective (placed GPU milli first) prefers the larger pod."""
    state = gen.build_cluster([("G2", 1, 32000, 131072)])
    pods = [PodSpec(1000, 1024, 1, 810, name="first"), PodSpec(1000, 1024, 1, 1000, name="second")]
    plain = BatchPlacer(typical_small, FAST).place(state, pods)
    assert plain.placements[0] is None and plain.placements[1] is not None


def test_a_reset_scheduler_stops_watching_the_state_its_placer_indexed(gen, typical_small):
    """``BatchScheduler.attach`` gives the placer's FGD an index of the state; ``reset`` closes
    it, so a scheduler replaced by a new one leaves no watcher behind on a long-lived state."""
    from gpudefrag.batch.placer import BatchPlacer
    from gpudefrag.batch.scheduler import BatchScheduler

    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 20)] * 3)
    scheduler = BatchScheduler(BatchPlacer(typical_small))
    scheduler.attach(state)
    assert len(state._watchers) == 1 and scheduler.placer.fgd._index is not None
    scheduler.reset()
    assert state._watchers == [] and scheduler.placer.fgd._index is None
