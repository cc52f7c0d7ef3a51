"""Trust nothing: the solver's plan is replayed on the state and kept only if it is valid and
strictly better than FGD's plan under the exact objective (:mod:`gpudefrag.batch.objective`),
compared on the union of the nodes either plan touches."""

from __future__ import annotations

from collections.abc import Sequence

from gpudefrag.batch.objective import Objective, PlanError, evaluate_plan
from gpudefrag.frag.typical import TypicalPods
from gpudefrag.model.cluster import ClusterState, Placement

__all__ = ["referee"]


def referee(
    state: ClusterState,
    typical: TypicalPods,
    penalty: float,
    hint: list[Placement | None],
    solver_plan: list[Placement | None] | None,
    protected: frozenset[int] = frozenset(),
    age_milli: Sequence[int] = (),
) -> tuple[list[Placement | None], Objective, Objective, str]:
    """Replay both plans; (chosen plan, its objective, FGD's objective, verdict).

    The solver's plan is kept only if valid and strictly better, on the union of touched nodes;
    both plans count the bonuses ``age_milli`` of the pods they place; a protected node a plan
    uses costs ``penalty`` milli-GPU of fragmentation.
    """

    def age_of(plan: list[Placement | None]) -> int:
        return sum(age_milli[i] for i, p in enumerate(plan) if p is not None) if age_milli else 0

    fgd_list = [p for p in hint if p is not None]
    fgd_age = age_of(hint)
    fgd_obj = evaluate_plan(state, fgd_list, typical, None, protected, penalty, fgd_age)
    if solver_plan is None:
        return hint, fgd_obj, fgd_obj, ""
    solver_list = [p for p in solver_plan if p is not None]
    union = {p.node for p in fgd_list} | {p.node for p in solver_list}
    try:
        solver_obj = evaluate_plan(
            state, solver_list, typical, union, protected, penalty, age_of(solver_plan)
        )
    except PlanError:
        return hint, fgd_obj, fgd_obj, "invalid"
    fgd_obj = evaluate_plan(state, fgd_list, typical, union, protected, penalty, fgd_age)
    if solver_obj.better_than(fgd_obj):
        return solver_plan, solver_obj, fgd_obj, ""
    return hint, fgd_obj, fgd_obj, "not_better"
