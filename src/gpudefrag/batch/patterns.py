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
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_PODS_PER_NODE
from gpudefrag.model.gpu_models import mask_accepts
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

    @property
    def frag_delta_milli(self) -> float:
        return self.frag_after_milli - self.frag_before_milli


@dataclass
class NodeView:
    """Mutable scratch copy of one node's free resources."""

    cpu_milli: int
    memory_mib: int
    pods: int
    gpu_left: list[int]
    model: int

    def copy(self) -> NodeView:
        return NodeView(self.cpu_milli, self.memory_mib, self.pods, list(self.gpu_left), self.model)


def node_view(state, node: int) -> NodeView:
    """A scratch copy of ``node``'s free resources on ``state`` (a ``ClusterState``)."""
    count = int(state.gpu_count[node])
    return NodeView(
        int(state.cpu_milli_left[node]),
        int(state.memory_mib_left[node]),
        int(state.pod_count[node]),
        [int(v) for v in state.gpu_milli_left[node, :count]],
        int(state.model_id[node]),
    )


def canonical_order(pods: list[PodSpec], members: tuple[int, ...]) -> list[int]:
    """Members sorted: more GPUs first, then larger per-GPU milli, then batch order."""
    return sorted(members, key=lambda i: (-pods[i].num_gpu, -pods[i].gpu_milli, i))


def fits_on_view(view: NodeView, pod: PodSpec) -> bool:
    """Would :func:`place_on_view` place ``pod`` on the scratch node?  (Without changing it.)"""
    if (
        view.cpu_milli < pod.cpu_milli
        or view.memory_mib < pod.memory_mib
        or view.pods + 1 > MAX_PODS_PER_NODE
    ):
        return False
    if pod.gpu_milli <= 0:
        return True
    if not view.gpu_left or not mask_accepts(pod.gpu_model_mask, view.model):
        return False
    if pod.is_sharing:
        return any(left >= pod.gpu_milli for left in view.gpu_left)
    return sum(1 for left in view.gpu_left if left == GPU_MILLI_PER_GPU) >= pod.num_gpu


def place_on_view(view: NodeView, pod: PodSpec, shared_gpus_only: bool = False) -> tuple[int, ...] | None:
    """Place ``pod`` on the scratch node (mutating it); the GPUs used, or ``None`` if it does not fit.

    A sharing pod takes the tightest GPU with room; with ``shared_gpus_only``, only a GPU that
    is already partly used (never a whole free one).  Whole-GPU pods take the lowest free GPUs.
    """
    if not fits_on_view(view, pod):
        return None
    gpus: tuple[int, ...] = ()
    if pod.gpu_milli > 0:
        if pod.is_sharing:
            best = -1
            for g, left in enumerate(view.gpu_left):
                if shared_gpus_only and left >= GPU_MILLI_PER_GPU:
                    continue
                if left >= pod.gpu_milli and (best < 0 or left < view.gpu_left[best]):
                    best = g
            if best < 0:
                return None
            gpus = (best,)
        else:
            gpus = tuple(g for g, left in enumerate(view.gpu_left) if left == GPU_MILLI_PER_GPU)[
                : pod.num_gpu
            ]
        for g in gpus:
            view.gpu_left[g] -= pod.gpu_milli
    view.cpu_milli -= pod.cpu_milli
    view.memory_mib -= pod.memory_mib
    view.pods += 1
    return gpus


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


def enumerate_patterns(
    node: int,
    base: NodeView,
    frag_before: float,
    pods: list[PodSpec],
    candidates: list[int],
    typical_args: tuple,
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

    def frag_of(view: NodeView) -> float:
        row = np.zeros(8, dtype=np.int64)
        row[:gpu_count] = view.gpu_left
        return float(node_frag_milli(view.cpu_milli, row, gpu_count, view.model, *typical_args))

    def visit(start: int, members: tuple[int, ...]) -> None:
        for j in range(start, len(candidates)):
            if len(out) >= max_patterns:
                return
            subset = members + (candidates[j],)
            assigned = assign_subset(base, pods, subset)
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
