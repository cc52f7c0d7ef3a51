"""CP-SAT set-packing over patterns: at most one pattern per node, each pod at most once.

Variables: one Boolean ``use[p]`` per pattern ``p``.
Constraints: for each node, ``sum(use[p] for p on node) <= 1``; for each pod,
``sum(use[p] for p containing pod) <= 1``.
Objective (maximise, exact integer weights, lexicographic):
``W_GPU * (gpu_milli(p) + age_milli(p)) + W_POD * pods(p) - frag_units(p)`` summed over chosen
patterns (``age_milli``: the members' age bonuses, 0 unless the placer weighs waits), where
``frag_units`` is the pattern's fragmentation change in units of 1/``FRAG_SCALE`` milli-GPU,
rounded.  ``W_POD`` exceeds the largest possible total of ``|frag_units|`` and ``W_GPU``
exceeds the largest possible total of the two lower terms, so the order is strict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from gpudefrag.batch.patterns import Pattern

FRAG_SCALE = 10
"""Fragmentation resolution in the model: 0.1 milli-GPU."""

MAX_NODE_FRAG_MILLI = 8000
"""F(node) never exceeds the node's idle GPU milli, at most 8 GPUs."""

STATUS_NAMES = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.MODEL_INVALID: "model_invalid",
    cp_model.UNKNOWN: "unknown",
}


@dataclass(frozen=True)
class SolveOutcome:
    status: str
    chosen: list[int]
    objective: int | None
    hint_objective: int
    bound: float | None
    wall_s: float
    deterministic_s: float
    variables: int
    constraints: int
    wall_limited: bool = False


class _Model(cp_model.CpModel):
    """A ``CpModel`` without the camelCase aliases (``AddHint`` for ``add_hint``, ...) that
    ortools' constructor sets on every instance: setting them takes about 0.5 ms a model,
    longer than most of our solves.  The model and its proto are the same."""

    def _add_pre_pep8_methods(self) -> None:
        return None


def weights(batch_size: int, max_abs_delta_milli: float = MAX_NODE_FRAG_MILLI) -> tuple[int, int]:
    """(W_GPU, W_POD) making the objective lexicographic for a batch of ``batch_size`` pods whose
    patterns change fragmentation by at most ``max_abs_delta_milli`` each (at most one chosen
    pattern per pod, so at most ``batch_size`` non-empty patterns count)."""
    per_pattern = int(np.ceil(max(max_abs_delta_milli, MAX_NODE_FRAG_MILLI) * FRAG_SCALE)) + 1
    frag_bound = batch_size * per_pattern
    w_pod = 2 * frag_bound + 1
    w_gpu = w_pod * (batch_size + 1) + 2 * frag_bound + 1
    return w_gpu, w_pod


def pattern_value(p: Pattern, w_gpu: int, w_pod: int) -> int:
    return (
        w_gpu * (p.gpu_milli + p.age_milli) + w_pod * len(p.members) - round(p.frag_delta_milli * FRAG_SCALE)
    )


def best_single(patterns: list[Pattern], hint: list[int]) -> SolveOutcome:
    """The exact optimum of a one-pod batch without a solver: every pattern holds the one pod,
    so the model's best choice is the pattern of highest :func:`pattern_value` (the least
    fragmentation change; placing the pod always outweighs leaving it), or nothing when no
    pattern exists.  Ties keep the hint, then the first pattern.  Same objective and status as
    :func:`solve_patterns`; no deterministic time.
    """
    started = time.perf_counter()
    w_gpu, w_pod = weights(1, max((abs(p.frag_delta_milli) for p in patterns), default=0.0))
    values = [pattern_value(p, w_gpu, w_pod) for p in patterns]
    hint_value = sum(values[i] for i in hint)
    if not patterns:
        return SolveOutcome("optimal", [], 0, hint_value, None, time.perf_counter() - started, 0.0, 0, 0)
    best = max(range(len(values)), key=lambda i: (values[i], i in hint, -i))
    return SolveOutcome(
        "optimal",
        [best],
        values[best],
        hint_value,
        float(values[best]),
        time.perf_counter() - started,
        0.0,
        len(values),
        1,
    )


def solve_patterns(
    patterns: list[Pattern],
    batch_size: int,
    hint: list[int],
    time_limit_s: float,
    deterministic_time: float | None,
    seed: int = 0,
    workers: int = 1,
) -> SolveOutcome:
    """Build, solve and decode.  ``hint``: indices of the patterns of FGD's answer.

    ``deterministic_time`` (if given) is the work limit that makes the run reproducible;
    ``time_limit_s`` always bounds the wall clock.
    """
    started = time.perf_counter()
    w_gpu, w_pod = weights(batch_size, max((abs(p.frag_delta_milli) for p in patterns), default=0.0))
    model = _Model()
    # use[p]: pattern p is chosen.
    use = [model.new_bool_var(f"use_{i}") for i in range(len(patterns))]
    by_node: dict[int, list[int]] = {}
    by_pod: dict[int, list[int]] = {}
    for i, p in enumerate(patterns):
        by_node.setdefault(p.node, []).append(i)
        for m in p.members:
            by_pod.setdefault(m, []).append(i)
    # At most one pattern per node; each pod in at most one chosen pattern.
    for group in list(by_node.values()) + list(by_pod.values()):
        if len(group) > 1:
            model.add_at_most_one(use[i] for i in group)
    values = [pattern_value(p, w_gpu, w_pod) for p in patterns]
    model.maximize(cp_model.LinearExpr.weighted_sum(use, values))
    hinted = set(hint)
    for i, u in enumerate(use):
        model.add_hint(u, i in hinted)
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = workers
    params.random_seed = seed
    # Probing costs more than the whole search on these small set-packing models (measured:
    # 40 ms vs 9 ms mid-run at B = 16), and never changed the optimum in our checks.
    params.cp_model_probing_level = 0
    params.max_time_in_seconds = time_limit_s
    if deterministic_time is not None:
        params.max_deterministic_time = deterministic_time
    status_code = solver.solve(model)
    status = STATUS_NAMES.get(status_code, str(status_code))
    chosen: list[int] = []
    objective = bound = None
    if status_code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        chosen = [i for i, u in enumerate(use) if solver.boolean_value(u)]
        objective = round(solver.objective_value)
        bound = float(solver.best_objective_bound)
    wall_limited = (
        deterministic_time is not None
        and solver.wall_time >= time_limit_s
        and solver.deterministic_time < deterministic_time
    )
    return SolveOutcome(
        status,
        chosen,
        objective,
        sum(values[i] for i in hint),
        bound,
        time.perf_counter() - started,
        float(solver.deterministic_time),
        len(use),
        len(by_node) + len(by_pod),
        wall_limited,
    )
