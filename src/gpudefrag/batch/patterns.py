"""Patterns: for one node, a subset of the batch's pods that fit on it together.

A pattern carries the exact GPU assignment and the node's fragmentation afterwards, so the
solver only chooses among exact, pre-validated alternatives.  The GPU assignment of a subset
is a fixed function of the subset: pods are placed in canonical order (more GPUs first, then
larger per-GPU milli, then batch order); whole-GPU pods take the lowest-index free GPUs and
sharing pods the tightest fitting GPU (lowest index on ties).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudefrag.frag.kernels import node_frag_milli
from gpudefrag.frag.typical import TypicalArrays
from gpudefrag.model.fit import NodeView, place_on_view
from gpudefrag.model.pods import PodSpec


@dataclass(frozen=True)
class Pattern:
    """Pods ``members`` (batch indices) on ``node`` with GPUs ``gpus[i]`` for ``members[i]``."""

    node: int
    members: tuple[int, ...]
    gpus: tuple[tuple[int, ...], ...]
    gpu_milli: int
    frag_after_milli: float
    frag_before_milli: float
    age_milli: int = 0
    """The members' age bonuses (:func:`gpudefrag.batch.bonuses.age_bonus_milli`), summed."""

    @property
    def frag_delta_milli(self) -> float:
        return self.frag_after_milli - self.frag_before_milli


def canonical_order(pods: list[PodSpec], members: tuple[int, ...]) -> list[int]:
    """Members sorted: more GPUs first, then larger per-GPU milli, then batch order."""
    return sorted(members, key=lambda i: (-pods[i].num_gpu, -pods[i].gpu_milli, i))


def assign_subset(
    base: NodeView, pods: list[PodSpec], members: tuple[int, ...]
) -> tuple[NodeView, dict[int, tuple[int, ...]]] | None:
    """Place the members in canonical order on a copy of ``base``; ``None`` if any does not fit."""
    view = base.copy()
    gpus: dict[int, tuple[int, ...]] = {}
    for i in canonical_order(pods, members):
        used = place_on_view(view, pods[i])
        if used is None:
            return None
        gpus[i] = used
    return view, gpus


class _Assignments:
    """:func:`assign_subset` on one base node, memoised by the members in canonical order: a
    subset's assignment is its canonical prefix's (all members but the canonically last one)
    with that last member placed on a copy, so each subset costs one placement, not one per
    member, whenever its prefix was assigned before."""

    def __init__(self, base: NodeView, pods: list[PodSpec]) -> None:
        self.base = base
        self.pods = pods
        self.memo: dict[tuple[int, ...], tuple[NodeView, tuple[tuple[int, ...], ...]] | None] = {}

    def of(self, members: tuple[int, ...]) -> tuple[NodeView, dict[int, tuple[int, ...]]] | None:
        """What ``assign_subset(base, pods, members)`` returns; the view is shared with the
        memo, so read it only."""
        order = tuple(canonical_order(self.pods, members))
        found = self._canonical(order)
        if found is None:
            return None
        view, used = found
        return view, dict(zip(order, used))

    def _canonical(self, order: tuple[int, ...]) -> tuple[NodeView, tuple[tuple[int, ...], ...]] | None:
        if order in self.memo:
            return self.memo[order]
        prev = (self.base, ()) if len(order) == 1 else self._canonical(order[:-1])
        result = None
        if prev is not None:
            view = prev[0].copy()
            used = place_on_view(view, self.pods[order[-1]])
            if used is not None:
                result = (view, prev[1] + (used,))
        self.memo[order] = result
        return result


def enumerate_patterns(
    node: int,
    base: NodeView,
    frag_before: float,
    pods: list[PodSpec],
    candidates: list[int],
    typical_args: TypicalArrays,
    max_size: int,
    max_patterns: int,
    prune: bool = True,
) -> list[Pattern]:
    """Non-empty subsets of ``candidates`` (in the given priority order) that fit on ``node``.

    Depth-first.  With ``prune``, a subset that does not fit is not extended (adding pods only
    consumes more; the greedy GPU assignment could in rare cases fit a superset anyway, so
    ``prune=False`` enumerates every subset, for exhaustive checks on small instances).
    At most ``max_size`` pods per pattern and ``max_patterns`` patterns per node.
    """
    out: list[Pattern] = []
    gpu_count = len(base.gpu_left)
    assignments = _Assignments(base, pods)

    def frag_of(view: NodeView) -> float:
        row = np.zeros(8, dtype=np.int64)
        row[:gpu_count] = view.gpu_left
        return float(node_frag_milli(view.cpu_milli, row, gpu_count, view.model, *typical_args))

    def visit(start: int, members: tuple[int, ...]) -> None:
        for j in range(start, len(candidates)):
            if len(out) >= max_patterns:
                return
            subset = members + (candidates[j],)
            assigned = assignments.of(subset)
            if assigned is None:
                if not prune and len(subset) < max_size:
                    visit(j + 1, subset)
                continue
            view, gpus = assigned
            ordered = tuple(sorted(subset))
            out.append(
                Pattern(
                    node,
                    ordered,
                    tuple(gpus[i] for i in ordered),
                    sum(pods[i].gpu_milli * pods[i].num_gpu for i in subset),
                    frag_of(view),
                    frag_before,
                )
            )
            if len(subset) < max_size:
                visit(j + 1, subset)

    visit(0, ())
    return out
