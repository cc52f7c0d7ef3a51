"""The pending pods of ``gpudefrag plan`` (:mod:`gpudefrag.k8s.whatif`), each judged alone on the
nodes it may use (:meth:`~gpudefrag.k8s.cache.ClusterCache.off_limits`: taints, node selector,
required node affinity, GPU model, Ready and not cordoned): it fits now, it is blocked by
fragmentation, those nodes lack free capacity, or it may use no node (with how many nodes each
rule rules out).  Pods of other schedulers and gang members carry the reason the controller does
not plan for them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudefrag.defrag.blocked import blocked_by_fragmentation
from gpudefrag.k8s.affinity import selects
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.records import PodRecord
from gpudefrag.k8s.taints import tolerates_all
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.fit import fits_empty_mask, fits_now_mask

__all__ = ["BLOCKED", "FITS", "NO_NODE", "SHORT", "PendingRow", "pending_records", "pending_row"]

FITS, BLOCKED, SHORT, NO_NODE = "fits now", "blocked by fragmentation", "short of capacity", "no node"


@dataclass(frozen=True)
class PendingRow:
    """One pending pod: its request, its verdict on the nodes it may use, why, and whether the
    controller plans for such a pod (ours, not a gang member)."""

    pod: str
    num_gpu: int
    gpu_milli: int
    verdict: str
    reason: str
    scheduler: str
    planned_for: bool

    @property
    def request(self) -> str:
        if self.gpu_milli <= 0:
            return "no GPU"
        if self.gpu_milli < GPU_MILLI_PER_GPU:
            return f"{self.gpu_milli / GPU_MILLI_PER_GPU:g} GPU"
        return f"{self.num_gpu} GPU" + ("s" if self.num_gpu > 1 else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "num_gpu": self.num_gpu,
            "gpu_milli": self.gpu_milli,
            "verdict": self.verdict,
            "reason": self.reason,
            "scheduler": self.scheduler,
            "controller_plans_for_it": self.planned_for,
        }


# ----------------------------------------------------------------------------- pending pods
def pending_records(cache: ClusterCache) -> list[PodRecord]:
    """Every pod waiting for a node, whoever schedules it, in queue order (priority, then
    creation): not bound, not being deleted, phase Pending, its request readable."""
    out = [
        r
        for r in cache.pods.values()
        if r.request is not None
        and r.node is None
        and not r.assumed
        and not r.deleting
        and r.phase == "Pending"
    ]
    out.sort(key=lambda r: (-r.request.priority, r.request.created_s, r.key))  # type: ignore[union-attr]
    return out


def _no_node_reason(cache: ClusterCache, rec: PodRecord) -> str:
    """Why no node takes ``rec``: how many nodes each rule keeps it off (the first rule that
    applies to a node counts it)."""
    spec = rec.obj.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    assert rec.request is not None
    fits_empty = fits_empty_mask(cache.state, rec.request.spec)
    counts = {"node selector or affinity": 0, "taints it does not tolerate": 0, "not Ready or cordoned": 0}
    small = 0
    for i, name in enumerate(cache.order):
        info = cache.nodes[name]
        if not selects(spec, info.labels):
            counts["node selector or affinity"] += 1
        elif info.taints and not tolerates_all(tolerations, info.taints):
            counts["taints it does not tolerate"] += 1
        elif not info.usable:
            counts["not Ready or cordoned"] += 1
        elif not fits_empty[i]:
            small += 1
    parts = [f"{why} rules out {n}" for why, n in counts.items() if n]
    if small:
        parts.append(f"{small} too small or of another GPU model")
    return "no node it may use: " + ("; ".join(parts) if parts else "the cluster has no node")


def pending_row(cache: ClusterCache, rec: PodRecord) -> PendingRow:
    req = rec.request
    assert req is not None
    spec = req.spec
    state = cache.state
    off = cache.off_limits(rec)
    allowed = np.ones(state.num_nodes, dtype=bool)
    if off:
        allowed[list(off)] = False
    scheduler = str((rec.obj.get("spec") or {}).get("schedulerName") or "default-scheduler")
    if not (fits_empty_mask(state, spec) & allowed).any():
        verdict, reason = NO_NODE, _no_node_reason(cache, rec)
    elif (fits_now_mask(state, spec) & allowed).any():
        verdict, reason = FITS, ""
    elif blocked_by_fragmentation(state, spec, off):
        verdict, reason = BLOCKED, "enough is free on the nodes it may use, but on no single one"
    else:
        verdict, reason = SHORT, "the nodes it may use lack free capacity in total"
    planned = rec.ours and req.pod_group is None
    if not rec.ours:
        reason = _join(reason, f"scheduler '{scheduler}': gpudefrag neither places nor frees room for it")
    elif req.pod_group is not None:
        reason = _join(
            reason, f"gang member (PodGroup {req.pod_group}): placed whole; no plan frees room for one"
        )
    return PendingRow(rec.key, spec.num_gpu, spec.gpu_milli, verdict, reason, scheduler, planned)


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b
