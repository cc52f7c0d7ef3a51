"""What-if analysis of a cluster snapshot for ``gpudefrag plan`` (read-only), built from the parts
the scheduler and the defragmentation controller run, so that it sees what they see:

* **The cluster**: a :class:`~gpudefrag.k8s.cache.ClusterCache` of the snapshot's objects, read
  as the controller reads the API (:meth:`~gpudefrag.k8s.defrag.DefragReconciler.load`).
* **Nodes**: per node its GPUs, the wholly free ones, the free milli-GPU on GPUs shared by
  running pods, and whether new pods may go there (Ready, not cordoned; its blocking taints).
* **Fragmentation now**: FGD's measure against the scheduler's typical pods, the cluster's GPU
  workload (:mod:`gpudefrag.k8s.gpu_workload`: GPU pods, not DaemonSet or static pods), over
  every node, in GPUs and as % of the unallocated GPUs.
* **Pending pods**, each alone on the nodes it may use (:meth:`ClusterCache.off_limits`: taints,
  node selector, required node affinity, GPU model, Ready and not cordoned): it fits now, it is
  blocked by fragmentation, the nodes it may use lack free capacity, or it may use no node at
  all (with the reason).  Pods of other schedulers and gang members are shown with the reason
  the controller does not plan for them.
* **Plans**: one pass of the controller itself (dry run) with the controller's settings: the
  same plans ``gpudefrag defrag --dry-run`` prints on the same snapshot at the same time.
* **Before and after**, like with like (same capacity, same workload measure): the scheduler's
  cycle (:func:`~gpudefrag.k8s.decide.decide_cycle`) on the snapshot, and on the snapshot after
  the plans' evictions (each freed node reserved for its pod, each evicted pod recreated by its
  owner as a new pending pod, as the controller and the scheduler would have it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpudefrag.frag.tracker import FragTracker
from gpudefrag.frag.typical import TypicalPods
from gpudefrag.k8s import names
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.checkpoints import checkpoint_state
from gpudefrag.k8s.decide import decide_cycle
from gpudefrag.k8s.defrag import DefragConfig, DefragReconciler, dry_run
from gpudefrag.k8s.gpu_workload import counts_in_gpu_workload
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.requests import ObjectError
from gpudefrag.k8s.timefmt import to_rfc3339
from gpudefrag.k8s.whatif_pending import BLOCKED, PendingRow, pending_records, pending_row
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.profiles.schema import DefragmentSettings

__all__ = ["Layout", "NodeRow", "WhatIf", "after_plan_objects", "what_if"]


@dataclass(frozen=True)
class Layout:
    """A layout's figures: allocated GPU milli of the capacity, FGD fragmentation (GPUs), pods
    placed on it by the scheduler and pods left pending."""

    allocated_gpu_milli: int
    capacity_gpu_milli: int
    frag_gpus: float
    placed: int = 0
    pending: int = 0
    moved: int = 0
    """Pods the plan evicted, recreated by their owners and placed again (``placed`` excludes them)."""

    @property
    def allocated_gpus(self) -> float:
        return self.allocated_gpu_milli / GPU_MILLI_PER_GPU

    @property
    def free_gpus(self) -> float:
        return (self.capacity_gpu_milli - self.allocated_gpu_milli) / GPU_MILLI_PER_GPU

    @property
    def allocation_pct(self) -> float:
        return 100.0 * self.allocated_gpu_milli / self.capacity_gpu_milli if self.capacity_gpu_milli else 0.0

    @property
    def frag_pct_of_unallocated(self) -> float:
        free = self.free_gpus
        return 100.0 * self.frag_gpus / free if free > 0 else 0.0

    @property
    def frag_pct_of_capacity(self) -> float:
        cap = self.capacity_gpu_milli / GPU_MILLI_PER_GPU
        return 100.0 * self.frag_gpus / cap if cap > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "allocated_gpus": self.allocated_gpus,
            "free_gpus": self.free_gpus,
            "capacity_gpus": self.capacity_gpu_milli / GPU_MILLI_PER_GPU,
            "allocation_pct": round(self.allocation_pct, 3),
            "frag_gpus": round(self.frag_gpus, 3),
            "frag_pct_of_unallocated": round(self.frag_pct_of_unallocated, 3),
            "frag_pct_of_capacity": round(self.frag_pct_of_capacity, 3),
            "placed": self.placed,
            "moved_pods_placed": self.moved,
            "pending": self.pending,
        }


@dataclass(frozen=True)
class NodeRow:
    """One node: its GPUs, the wholly free ones, free milli-GPU on shared GPUs, whether new
    pods may go there (``state``: ``usable``, ``NotReady``, ``cordoned``) and its blocking
    taints, and the pod it is reserved for."""

    name: str
    model: str
    gpus: int
    free_gpus: int
    shared_free_milli: int
    state: str
    taints: tuple[str, ...]
    reserved_for: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            "gpus": self.gpus,
            "free_gpus": self.free_gpus,
            "shared_free_milli": self.shared_free_milli,
            "state": self.state,
            "taints": list(self.taints),
            "reserved_for": self.reserved_for,
        }


@dataclass
class WhatIf:
    """Everything ``gpudefrag plan`` prints (module docstring)."""

    now_s: float
    config: DefragConfig
    settings: DefragmentSettings
    """The defragmenter's settings in force (the profile's, the flags over it)."""
    policy: str
    nodes: list[NodeRow]
    typical: TypicalPods
    workload_pods: int
    current: Layout
    pending: list[PendingRow]
    plans: list[dict[str, Any]]
    pending_placed: Layout
    after_plan: Layout
    running: int
    skipped: list[str] = field(default_factory=list)
    domains: list[dict[str, Any]] | None = None
    """Free GPUs per topology domain (with the scheduler's topology levels)."""
    no_plan: dict[str, str] = field(default_factory=dict)
    """Blocked pods the controller plans for that got no plan, and why."""
    finished_runs: int = 0
    """Finished pods whose run times the controller learned (fewer than 20: it uses its prior)."""

    @property
    def total_cost_gpu_s(self) -> float:
        return sum((float(p["cost_gpu_s"]) for p in self.plans), 0.0)

    @property
    def moves(self) -> int:
        return sum(len(p["moves"]) for p in self.plans)


# ----------------------------------------------------------------------------- nodes
def _node_rows(cache: ClusterCache) -> list[NodeRow]:
    state = cache.state
    reserved = {r.node: r.pod_key for r in cache.reservations(0.0)}
    rows = []
    for i, name in enumerate(cache.order):
        info = cache.nodes[name]
        left = state.gpu_milli_left[i, : info.gpu_count]
        whole = int((left >= GPU_MILLI_PER_GPU).sum())
        shared = int(left[left < GPU_MILLI_PER_GPU].sum())
        status = "usable" if info.usable else ("NotReady" if not info.ready else "cordoned")
        taints = tuple(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in info.taints)
        rows.append(
            NodeRow(name, info.gpu_model, info.gpu_count, whole, shared, status, taints, reserved.get(name))
        )
    return rows


def _domain_rows(
    cache: ClusterCache, core: DecisionCore, nodes: list[NodeRow]
) -> list[dict[str, Any]] | None:
    """Per topology level (top first) and domain: its nodes, GPUs and wholly free GPUs on usable
    nodes; a domain is named by its label values from the top level down.  None without levels."""
    topo = core.topology
    if topo is None:
        return None
    infos = [cache.nodes[n] for n in cache.order]
    top_down = list(topo.levels[::-1])
    rows: list[dict[str, Any]] = []
    for depth, level in enumerate(top_down):
        doms = topo.domains(topo.levels.index(level))
        for d in range(int(doms.max()) + 1):
            members = [i for i in range(len(infos)) if doms[i] == d]
            if not members:
                continue
            path = "/".join(infos[members[0]].labels.get(lv, "") for lv in top_down[: depth + 1])
            rows.append(
                {
                    "level": level,
                    "domain": path,
                    "nodes": len(members),
                    "gpus": sum(nodes[i].gpus for i in members),
                    "free_gpus": sum(nodes[i].free_gpus for i in members if nodes[i].state == "usable"),
                }
            )
    return rows


# ----------------------------------------------------------------------------- layouts
RECREATED = "-recreated"
"""Suffix of the UID an evicted pod gets when its owner recreates it (:func:`after_plan_objects`)."""


def _layout(
    state: ClusterState, typical: TypicalPods, placed: int = 0, pending: int = 0, moved: int = 0
) -> Layout:
    frag = FragTracker(typical, state).frag_milli
    frag_gpus = float(frag.sum()) / GPU_MILLI_PER_GPU
    return Layout(state.used_gpu_milli, state.gpu_capacity_milli, frag_gpus, placed, pending, moved)


def _scheduled(cache: ClusterCache, core: DecisionCore, now_s: float) -> Layout:
    """The cache's state with one scheduler cycle over its pending pods applied."""
    pending = cache.pending()
    result = decide_cycle(cache, pending, core.scheduler, core.policy, core.topology, now_s, index=False)
    state = cache.state.copy()
    for _, placement in result.binds:
        state.bind(placement)
    bound = {rec.uid for rec, _ in result.binds}
    moved = sum(1 for uid in bound if uid.endswith(RECREATED))
    waiting = sum(1 for r in pending if r.uid not in bound and not r.uid.endswith(RECREATED))
    return _layout(state, core.typical, len(bound) - moved, waiting, moved)


def after_plan_objects(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    plans: Sequence[Mapping[str, Any]],
    now_s: float,
    reservation_s: float,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The objects once the plans' evictions are done: each freed node annotated as reserved
    for its pod, each evicted pod gone and recreated by its owner (a new UID, no node, created
    ``now_s``, pending)."""
    reserved = {str(p["node"]): str(p["pod"]) for p in plans}
    victims = {uid for p in plans for uid in p["victims"]}
    until = to_rfc3339(now_s + reservation_s)
    out_nodes: list[dict[str, Any]] = []
    for obj in nodes:
        n = {**obj, "metadata": dict(obj.get("metadata") or {})}
        name = str(n["metadata"].get("name", ""))
        if name in reserved:
            ann = dict(n["metadata"].get("annotations") or {})
            ann.update({names.RESERVED_FOR: reserved[name], names.RESERVED_UNTIL: until})
            n["metadata"]["annotations"] = ann
        out_nodes.append(n)
    out_pods: list[dict[str, Any]] = []
    for obj in pods:
        meta = obj.get("metadata") or {}
        if meta.get("uid") not in victims:
            out_pods.append(dict(obj))
            continue
        spec = {k: v for k, v in (obj.get("spec") or {}).items() if k != "nodeName"}
        ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k != names.ALIBABA_GPU_INDEX}
        new_meta = {**meta, "uid": f"{meta.get('uid')}{RECREATED}", "creationTimestamp": to_rfc3339(now_s)}
        new_meta["annotations"] = ann
        out_pods.append({**obj, "metadata": new_meta, "spec": spec, "status": {"phase": "Pending"}})
    return out_nodes, out_pods


def _unreadable_checkpoints(cache: ClusterCache, now_s: float) -> list[str]:
    """Running pods whose checkpoint annotations do not parse: the controller never moves them."""
    out = []
    for rec in cache.pods.values():
        if rec.counted_on is None:
            continue
        try:
            checkpoint_state(rec.obj, now_s)
        except ObjectError as e:
            out.append(f"{e}; the controller never moves it")
    return out


def _no_plan_reasons(
    cache: ClusterCache, rows: list[PendingRow], plans: list[dict[str, Any]], config: DefragConfig
) -> dict[str, str]:
    """Why each blocked pod the controller plans for got no plan: the headroom rule (the
    controller's test, on the nodes that take new pods), else no plan worth its cost."""
    planned = {p["pod"] for p in plans}
    state = cache.state.copy()
    state.mask_many(np.array(cache.unusable_nodes(), dtype=np.int64))
    free_milli = int(state.gpu_milli_left.sum())
    out = {}
    for row in rows:
        if row.verdict != BLOCKED or not row.planned_for or row.pod in planned:
            continue
        asks = row.num_gpu * row.gpu_milli
        settings = config.settings()
        keep = settings.headroom_fraction * state.gpu_capacity_milli
        if row.num_gpu >= 2 and free_milli - asks < keep:
            out[row.pod] = (
                f"the headroom rule: with it placed {(free_milli - asks) / GPU_MILLI_PER_GPU:,.2f} of "
                f"{state.gpu_capacity_milli / GPU_MILLI_PER_GPU:,.0f} GPUs would stay free on usable nodes, "
                f"under the {100 * settings.headroom_fraction:g} % kept for 2+ GPU pods (--headroom)"
            )
        else:
            out[row.pod] = (
                f"no set of at most {settings.planner.max_moves} moves frees a node for it at a cost its expected "
                "wait outweighs (or this pass tried other pods first)"
            )
    return out


# ----------------------------------------------------------------------------- the analysis
def what_if(
    node_objs: Sequence[Mapping[str, Any]],
    pod_objs: Sequence[Mapping[str, Any]],
    config: DefragConfig,
    core: DecisionCore,
    now_s: float,
    pod_groups: Sequence[Mapping[str, Any]] = (),
) -> WhatIf:
    """The analysis of the module docstring at ``now_s`` (epoch seconds), with the controller's
    ``config`` (its dry run is forced) and the scheduler's decision ``core``."""
    config = replace(config, dry_run=True)
    cache, plans, finished = dry_run([dict(n) for n in node_objs], [dict(p) for p in pod_objs], config, now_s)
    for g in pod_groups:
        cache.apply_pod_group("ADDED", dict(g))
    core.observe(cache)
    core.nodes_changed(cache)
    rows = [pending_row(cache, rec) for rec in pending_records(cache)]
    current = _layout(cache.state, core.typical)
    workload = sum(
        1 for r in cache.pods.values() if r.request is not None and counts_in_gpu_workload(r.obj, r.request)
    )
    placed_now = _scheduled(cache, core, now_s)
    nodes_after, pods_after = after_plan_objects(node_objs, pod_objs, plans, now_s, config.reservation_s)
    after = DefragReconciler(None, config, clock=lambda: now_s).load(nodes_after, pods_after)
    for g in pod_groups:
        after.apply_pod_group("ADDED", dict(g))
    after_layout = _scheduled(after, core, now_s)
    running = sum(1 for r in cache.pods.values() if r.counted_on is not None)
    skipped = [f"{k}: {why}; left out" for k, why in sorted(cache.inconsistent.items())]
    skipped += _unreadable_checkpoints(cache, now_s)
    node_rows = _node_rows(cache)
    return WhatIf(
        now_s=now_s,
        config=config,
        settings=config.settings(),
        policy=core.policy_name,
        nodes=node_rows,
        typical=core.typical,
        workload_pods=workload,
        current=current,
        pending=rows,
        plans=plans,
        pending_placed=placed_now,
        after_plan=after_layout,
        running=running,
        skipped=skipped,
        domains=_domain_rows(cache, core, node_rows),
        no_plan=_no_plan_reasons(cache, rows, plans, config),
        finished_runs=finished,
    )
