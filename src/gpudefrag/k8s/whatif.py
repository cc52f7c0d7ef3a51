"""What-if analysis of a cluster snapshot (read-only): fragmentation now, the pending pods it
blocks, a defragmentation plan for them, and the allocation our placement would reach.

* **Fragmentation now**: FGD's measure (expected GPU milli unusable by the typical pods; the
  typical pods are the snapshot's own, running + pending, :func:`snapshot_typical`) over every
  node, in GPUs and as % of the unallocated GPUs; allocation = allocated GPU milli / capacity.
* **Pending pods**, each alone on the current state of the *usable* nodes (Ready, schedulable):
  it fits now, it is blocked by fragmentation (:func:`~gpudefrag.defrag.planner.blocked_by_fragmentation`),
  or there is not enough free capacity.
* **Plan**: for the blocked pods in scheduling order (priority, then age), the
  :class:`~gpudefrag.defrag.planner.DefragPlanner` plan on the state the earlier plans leave
  (their moved pods on their targets and fixed, their sources held through the grace period,
  their freed node taken).  A move loses the pod's run time since its last checkpoint
  (``gpudefrag.io/last-checkpoint``; none: since ``status.startTime``) plus the eviction grace
  period, then ``restart_s``: ``cost = GPUs x (lost + restart_s)`` GPU-seconds.  Pods marked
  ``gpudefrag.io/do-not-disrupt: "true"``, without a controller ``ownerReference``, in a gang or
  being deleted are never moved.  A snapshot does not say how long pods will run, so none is
  assumed to finish on its own: every plan found passes the planner's hysteresis.
* **Placement** with the policy, pods in creation order (a gang's pending members all or
  none): (a) the pending pods on the current state, (b) the same after the plans' moves (each
  blocked pod first, on the node freed for it), (c) every pod, running and pending, from an
  empty cluster; each against the current layout.  Unusable nodes take no new pod.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpudefrag.defrag.cost import MovablePod, move_cost_gpu_s
from gpudefrag.defrag.planner import DefragPlanner, PlannerConfig, blocked_by_fragmentation
from gpudefrag.frag.tracker import FragTracker
from gpudefrag.frag.typical import TypicalPods, typical_pods
from gpudefrag.k8s.checkpoints import lost_work_s, never_moved_reason
from gpudefrag.k8s.nodes import cluster_state
from gpudefrag.k8s.requests import ObjectError, PodRequest
from gpudefrag.k8s.snapshot import Snapshot
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import ANY_GPU_MODEL, GPU_MILLI_PER_GPU
from gpudefrag.model.fit import fits_now_mask, node_view, place_on_view
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.pods import pod_batch
from gpudefrag.policies.base import Policy
from gpudefrag.policies.registry import make_policy

__all__ = [
    "Layout",
    "MoveRow",
    "PlanRow",
    "WhatIf",
    "snapshot_typical",
    "what_if",
]


@dataclass(frozen=True)
class Layout:
    """A layout's figures: allocated GPU milli of the capacity, FGD fragmentation (GPUs), pods
    placed and the ones that found no place."""

    allocated_gpu_milli: int
    capacity_gpu_milli: int
    frag_gpus: float
    placed: int
    unplaced: tuple[str, ...] = ()

    @property
    def allocation_pct(self) -> float:
        return 100.0 * self.allocated_gpu_milli / self.capacity_gpu_milli if self.capacity_gpu_milli else 0.0

    @property
    def frag_pct_of_unallocated(self) -> float:
        free_milli = self.capacity_gpu_milli - self.allocated_gpu_milli
        return 100.0 * self.frag_gpus * GPU_MILLI_PER_GPU / free_milli if free_milli > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "allocated_gpus": self.allocated_gpu_milli / GPU_MILLI_PER_GPU,
            "capacity_gpus": self.capacity_gpu_milli / GPU_MILLI_PER_GPU,
            "allocation_pct": round(self.allocation_pct, 3),
            "frag_gpus": round(self.frag_gpus, 3),
            "frag_pct_of_unallocated": round(self.frag_pct_of_unallocated, 3),
            "placed": self.placed,
            "unplaced": list(self.unplaced),
        }


@dataclass(frozen=True)
class MoveRow:
    pod: str
    from_node: str
    to_node: str
    gpus: tuple[int, ...]
    cost_gpu_s: float


@dataclass(frozen=True)
class PlanRow:
    """The moves that free ``target_node`` for the blocked ``pod``."""

    pod: str
    target_node: str
    moves: tuple[MoveRow, ...]
    cost_gpu_s: float


@dataclass
class WhatIf:
    """Everything ``gpudefrag plan`` prints (module docstring)."""

    policy: str
    now_s: float
    restart_s: float
    unusable_nodes: list[str]
    current: Layout
    fits_now: list[str]
    blocked: list[str]
    no_capacity: list[str]
    plans: list[PlanRow]
    unplanned: list[str]
    pending_placed: Layout
    after_plan: Layout
    repacked: Layout
    skipped: list[str] = field(default_factory=list)

    @property
    def total_cost_gpu_s(self) -> float:
        return sum((p.cost_gpu_s for p in self.plans), 0.0)


# ----------------------------------------------------------------------------- running pods
def _movables(snapshot: Snapshot, now_s: float, grace_s: float) -> list[MovablePod]:
    index = snapshot.node_index()
    out = []
    for i, (req, node, gpus) in enumerate(snapshot.running):
        obj = snapshot.objects[req.key]
        try:
            lost = lost_work_s(obj, now_s)
        except ObjectError as e:
            raise snapshot.error(req.key, e) from None
        fixed = never_moved_reason(obj, req) is not None
        out.append(MovablePod(i, index[node], gpus, req.spec, lost + grace_s, math.inf, not fixed))
    return out


# ----------------------------------------------------------------------------- measures
def snapshot_typical(snapshot: Snapshot) -> TypicalPods:
    """FGD's typical pods of the snapshot's pods (running + pending); a model constraint is
    keyed by its models' names in id order, so ``A|B`` and ``B|A`` are one key."""
    reqs = [r for r, _, _ in snapshot.running] + snapshot.pending
    specs = [_model_spec(snapshot, r.spec.gpu_model_mask) for r in reqs]
    return typical_pods(pod_batch([r.spec for r in reqs], specs), mask_of=snapshot.models.mask_of)


def _model_spec(snapshot: Snapshot, mask: int) -> str:
    if mask == ANY_GPU_MODEL:
        return ""
    return "|".join(n for i, n in enumerate(snapshot.models.names) if (mask >> i) & 1)


def _layout(
    state: ClusterState,
    typical: TypicalPods,
    usable: np.ndarray,
    base_frag: np.ndarray,
    placed: int,
    unplaced: Sequence[str] = (),
) -> Layout:
    """Figures of ``state``; the fragmentation of unusable nodes (masked on ``state``) is
    taken from ``base_frag`` (they took no new pod)."""
    frag = FragTracker(typical, state).frag_milli
    total_milli = float(frag[usable].sum() + base_frag[~usable].sum())
    return Layout(
        state.used_gpu_milli,
        state.gpu_capacity_milli,
        total_milli / GPU_MILLI_PER_GPU,
        placed,
        tuple(unplaced),
    )


def _masked(state: ClusterState, usable: np.ndarray) -> ClusterState:
    out = state.copy()
    for n in np.flatnonzero(~usable):
        out.mask(int(n))
    return out


# ----------------------------------------------------------------------------- placing
def place_in_order(state: ClusterState, reqs: Sequence[PodRequest], policy: Policy) -> tuple[int, list[str]]:
    """Place ``reqs`` with ``policy`` in creation order; a gang's members (same namespace and
    pod group) together, at its first member's turn, all or none.  Returns (pods placed, keys
    of pods not placed)."""
    units: dict[tuple[str, str], list[PodRequest]] = {}
    for r in sorted(reqs, key=lambda r: (r.created_s, r.key)):
        units.setdefault((r.namespace, r.pod_group) if r.pod_group else ("", r.key), []).append(r)
    placed = 0
    unplaced: list[str] = []
    for members in units.values():
        done: list[Placement] = []
        for r in members:
            p = policy.select(state, r.spec)
            if p is None:
                break
            state.bind(p)
            done.append(p)
        if len(done) == len(members):
            placed += len(done)
            continue
        for p in reversed(done):
            state.unbind(p)
        unplaced += [r.key for r in members]
    return placed, unplaced


# ----------------------------------------------------------------------------- the analysis
@dataclass
class _Planned:
    rows: list[PlanRow]
    unplanned: list[str]
    moves: list[tuple[int, int, tuple[int, ...]]]  # (running index, to node, to GPUs)
    targets: list[tuple[PodRequest, int]]


def _classify(state: ClusterState, pending: Sequence[PodRequest]) -> tuple[list[str], list[str], list[str]]:
    fits, blocked, short = [], [], []
    for r in pending:
        if fits_now_mask(state, r.spec).any():
            fits.append(r.key)
        elif blocked_by_fragmentation(state, r.spec):
            blocked.append(r.key)
        else:
            short.append(r.key)
    return fits, blocked, short


def _plan(
    snapshot: Snapshot,
    state: ClusterState,
    usable: np.ndarray,
    blocked: Sequence[PodRequest],
    planner: DefragPlanner,
    movables: list[MovablePod],
) -> _Planned:
    out = _Planned([], [], [], [])
    excluded = {int(n) for n in np.flatnonzero(~usable)}
    restart_s = planner.config.migration.restart_s
    for req in sorted(blocked, key=lambda r: (-r.priority, r.created_s, r.key)):
        if not blocked_by_fragmentation(state, req.spec):
            out.unplanned.append(req.key)  # the earlier plans took the room it needed
            continue
        plan = planner.plan(state, movables, req.spec, frozenset(excluded))
        if plan is None:
            out.unplanned.append(req.key)
            continue
        rows = []
        for m in plan.moves:
            mp = movables[m.pod_id]
            state.bind(Placement(m.to_node, m.to_gpus, mp.spec))  # the source stays held (grace)
            movables[m.pod_id] = replace(mp, movable=False)
            rows.append(
                MoveRow(
                    snapshot.running[m.pod_id][0].key,
                    state.names[m.from_node],
                    state.names[m.to_node],
                    m.to_gpus,
                    move_cost_gpu_s(mp, restart_s),
                )
            )
            out.moves.append((m.pod_id, m.to_node, m.to_gpus))
        state.mask(plan.target_node)
        excluded.add(plan.target_node)
        out.rows.append(PlanRow(req.key, state.names[plan.target_node], tuple(rows), plan.cost_gpu_s))
        out.targets.append((req, plan.target_node))
    return out


def _after_plan(
    snapshot: Snapshot, base: ClusterState, planned: _Planned, policy: Policy
) -> tuple[ClusterState, int, list[str]]:
    """``base`` with the moves done (sources released), each planned pod on its freed node,
    then the other pending pods placed by ``policy``."""
    state = base.copy()
    for i, to_node, to_gpus in planned.moves:
        req, node, gpus = snapshot.running[i]
        state.unbind(Placement(state.names.index(node), gpus, req.spec))  # unbind checks no model
        state.bind(Placement(to_node, to_gpus, req.spec))
    placed = 0
    for req, x in planned.targets:
        chosen = place_on_view(node_view(state, x), req.spec)
        if chosen is not None and state.why_not_fits(x, req.spec, chosen) is None:
            state.bind(Placement(x, chosen, req.spec))
            placed += 1
    done = {req.key for req, _ in planned.targets}
    more, unplaced = place_in_order(state, [r for r in snapshot.pending if r.key not in done], policy)
    return state, placed + more, unplaced


def _placements(
    snapshot: Snapshot,
    typical: TypicalPods,
    policy: str,
    usable: np.ndarray,
    base: ClusterState,
    now_frag: np.ndarray,
    planned: _Planned,
    pending: Sequence[PodRequest],
) -> tuple[Layout, Layout, Layout]:
    """(a) the pending pods placed now, (b) the same after the plans, (c) every pod from empty."""
    a_state = base.copy()
    a_placed, a_unplaced = place_in_order(a_state, pending, make_policy(policy, typical))
    b_state, b_placed, b_unplaced = _after_plan(snapshot, base, planned, make_policy(policy, typical))
    empty = cluster_state(snapshot.nodes, snapshot.models)
    empty_frag = FragTracker(typical, empty).frag_milli.copy()
    c_state = _masked(empty, usable)
    every = [r for r, _, _ in snapshot.running] + list(pending)
    c_placed, c_unplaced = place_in_order(c_state, every, make_policy(policy, typical))
    return (
        _layout(a_state, typical, usable, now_frag, a_placed, a_unplaced),
        _layout(b_state, typical, usable, now_frag, b_placed, b_unplaced),
        _layout(c_state, typical, usable, empty_frag, c_placed, c_unplaced),
    )


def what_if(
    snapshot: Snapshot,
    policy: str = "fgd",
    restart_s: float = 60.0,
    now_s: float = 0.0,
    grace_s: float = 30.0,
    max_moves: int = 4,
) -> WhatIf:
    """The analysis of the module docstring at time ``now_s`` (epoch seconds).  A malformed
    checkpoint annotation raises :class:`~gpudefrag.errors.InputError`; an unknown policy
    :class:`~gpudefrag.errors.ConfigError`."""
    typical = snapshot_typical(snapshot)
    make_policy(policy, typical)  # an unknown name fails before any work
    current = snapshot.cluster_state()
    usable = np.array([n.usable for n in snapshot.nodes], dtype=bool)
    now_frag = FragTracker(typical, current).frag_milli.copy()
    base = _masked(current, usable)
    pending = sorted(snapshot.pending, key=lambda r: (r.created_s, r.key))
    fits, blocked_keys, short = _classify(base, pending)
    planner = DefragPlanner(PlannerConfig(max_moves=max_moves, migration=MigrationModel(grace_s, restart_s)))
    movables = _movables(snapshot, now_s, grace_s)
    blocked_set = set(blocked_keys)
    blocked = [r for r in pending if r.key in blocked_set]
    planned = _plan(snapshot, base.copy(), usable, blocked, planner, movables)

    a, b, c = _placements(snapshot, typical, policy, usable, base, now_frag, planned, pending)
    return WhatIf(
        policy=policy,
        now_s=now_s,
        restart_s=restart_s,
        unusable_nodes=[n.name for n in snapshot.nodes if not n.usable],
        current=Layout(
            current.used_gpu_milli,
            current.gpu_capacity_milli,
            float(now_frag.sum()) / GPU_MILLI_PER_GPU,
            len(snapshot.running),
        ),
        fits_now=fits,
        blocked=blocked_keys,
        no_capacity=short,
        plans=planned.rows,
        unplanned=planned.unplanned,
        pending_placed=a,
        after_plan=b,
        repacked=c,
        skipped=list(snapshot.skipped),
    )
