"""The batch objective and its exact evaluation on a state.

Lexicographic, best first: (1) placed GPU milli plus the placed pods' age bonuses (0 unless
the placer weighs waits: :func:`gpudefrag.batch.bonuses.age_bonus_milli`), maximised; (2) placed
pods, maximised (so CPU-only pods are not dropped for free); (3) total fragmentation of the
touched nodes after placement, minimised (FGD's F against the typical pods, milli-GPU).

:func:`evaluate_plan` replays a plan on the state (undone before it returns), checking every
placement, and returns the exact objective; it is the referee for both the solver's and FGD's
answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.frag.kernels import node_frag_milli
from gpudefrag.frag.typical import TypicalArrays, TypicalPods
from gpudefrag.model.cluster import ClusterState, Placement

FRAG_EPS_MILLI = 1e-6
"""Fragmentation differences below this are ties (float noise, not a real improvement)."""


@dataclass(frozen=True, order=False)
class Objective:
    """Placed GPU milli, placed pods, total fragmentation of touched nodes (milli-GPU), and the
    placed pods' age bonuses (milli, counted with the GPU milli)."""

    gpu_milli: int
    pods: int
    frag_milli: float
    age_milli: int = 0

    @property
    def value_milli(self) -> int:
        """The first term: placed GPU milli plus age bonuses."""
        return self.gpu_milli + self.age_milli

    def better_than(self, other: Objective) -> bool:
        """Strictly better in the lexicographic order (fragmentation within ``FRAG_EPS_MILLI`` ties)."""
        if self.value_milli != other.value_milli:
            return self.value_milli > other.value_milli
        if self.pods != other.pods:
            return self.pods > other.pods
        return self.frag_milli < other.frag_milli - FRAG_EPS_MILLI

    def at_least(self, other: Objective) -> bool:
        """Not worse than ``other``."""
        return not other.better_than(self)


def node_frag(state: ClusterState, node: int, typical_args: TypicalArrays) -> float:
    """F(node) on ``state`` (milli-GPU)."""
    return float(
        node_frag_milli(
            state.cpu_milli_left[node],
            state.gpu_milli_left[node],
            state.gpu_count[node],
            state.model_id[node],
            *typical_args,
        )
    )


class PlanError(ValueError):
    """A plan that cannot be applied: names the pod and the reason."""


def evaluate_plan(
    state: ClusterState,
    plan: list[Placement],
    typical: TypicalPods,
    nodes: set[int] | None = None,
    protected: frozenset[int] = frozenset(),
    protect_penalty_milli: float = 0.0,
    age_milli: int = 0,
) -> Objective:
    """Exact objective of applying ``plan`` to ``state``; raises :class:`PlanError`.  The plan
    is bound on ``state`` while it is measured and unbound before this returns or raises.

    ``protect_penalty_milli`` is added for every node of ``protected`` the plan uses;
    ``age_milli`` is the plan's placed pods' age bonuses, summed by the caller.
    Pods are identified by object identity (the batch's ``PodSpec`` objects), so a plan that
    places one pod twice is rejected even when pods share a name.

    Fragmentation is summed over ``nodes`` (default: the nodes the plan touches), so two plans for
    the same batch are compared on the union of the nodes either touches.
    """
    seen: set[int] = set()
    bound: list[Placement] = []
    try:
        for p in plan:
            if id(p.pod) in seen:
                raise PlanError(f"pod {p.pod.name!r} placed twice")
            seen.add(id(p.pod))
            why = state.why_not_fits(p.node, p.pod, p.gpus)
            if why is not None:
                raise PlanError(f"pod {p.pod.name!r} on node {p.node}: {why}")
            state.bind(p)
            bound.append(p)
        touched = {p.node for p in plan} if nodes is None else nodes
        args = typical.kernel_args
        frag = sum(node_frag(state, n, args) for n in sorted(touched))
    finally:
        for p in reversed(bound):
            state.unbind(p)
    used = {p.node for p in plan}
    if protect_penalty_milli:
        frag += protect_penalty_milli * len(used & protected)
    return Objective(
        gpu_milli=sum(p.pod.gpu_milli * len(p.gpus) for p in plan),
        pods=len(plan),
        frag_milli=frag,
        age_milli=age_milli,
    )
