"""Resource counting for the fake kubelet: what a node offers (:func:`node_capacity`), what a
bound pod takes (:func:`pod_usage`) and by how much pods together exceed a node
(:func:`overcommit`).  Quantities are read exactly by :mod:`gpudefrag.k8s.quantity` and rounded
once, to the nearest unit counted here (millicores, bytes)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpudefrag.k8s import names
from gpudefrag.k8s.quantity import parse_quantity

__all__ = [
    "GPU_MILLI_PER_GPU",
    "NodeCapacity",
    "PodUsage",
    "node_capacity",
    "overcommit",
    "parse_quantity",
    "pod_usage",
]

GPU_MILLI_PER_GPU = 1000


@dataclass(frozen=True)
class NodeCapacity:
    """A node's allocatable resources."""

    cpu_milli: int
    memory_bytes: int
    gpus: int


@dataclass(frozen=True)
class PodUsage:
    """What a bound pod takes on its node: CPU, memory, GPU milli on named indices, whole GPUs
    without indices, and fractional GPU milli without indices (counted in the node's total)."""

    cpu_milli: int = 0
    memory_bytes: int = 0
    gpu_milli_by_index: tuple[tuple[int, int], ...] = ()
    unindexed_gpus: int = 0
    unindexed_gpu_milli: int = 0


def node_capacity(node: dict[str, Any]) -> NodeCapacity:
    """``status.allocatable`` (else ``status.capacity``) of a Node object."""
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    return NodeCapacity(
        cpu_milli=round(parse_quantity(alloc.get("cpu", 0)) * 1000),
        memory_bytes=round(parse_quantity(alloc.get("memory", 0))),
        gpus=int(parse_quantity(alloc.get(names.NVIDIA_GPU, 0))),
    )


def _container_sum(pod: dict[str, Any], resource: str, limits_first: bool) -> Fraction:
    """``resource`` summed over the pod's containers, each from its first of requests/limits
    (limits/requests with ``limits_first``) that names it."""
    total = Fraction(0)
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        order = ("limits", "requests") if limits_first else ("requests", "limits")
        for part in order:
            if resource in (res.get(part) or {}):
                total += parse_quantity(res[part][resource])
                break
    return total


def pod_usage(pod: dict[str, Any]) -> PodUsage:
    """Resources of a pod: CPU and memory requests (limits when no request), whole GPUs
    (``nvidia.com/gpu`` limits) at 1000 milli each, or ``alibabacloud.com/gpu-milli`` ×
    ``gpu-count`` (``gpu-fraction`` × 1000 of one GPU).  The GPUs sit on the indices of the
    ``alibabacloud.com/gpu-index`` annotation; GPUs beyond the listed indices are unindexed."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    whole = round(_container_sum(pod, names.NVIDIA_GPU, limits_first=True))
    if whole > 0:
        per_gpu_milli, count = GPU_MILLI_PER_GPU, whole
    elif names.ALIBABA_GPU_MILLI in ann:
        per_gpu_milli, count = int(ann[names.ALIBABA_GPU_MILLI]), int(ann.get(names.ALIBABA_GPU_COUNT, "1"))
    elif names.KAI_GPU_FRACTION in ann:
        per_gpu_milli, count = round(float(ann[names.KAI_GPU_FRACTION]) * GPU_MILLI_PER_GPU), 1
    else:
        per_gpu_milli, count = 0, 0
    text = ann.get(names.ALIBABA_GPU_INDEX, "")
    indices = [int(i) for i in text.split(",") if i.strip()] if per_gpu_milli else []
    rest = max(0, count - len(indices))
    return PodUsage(
        cpu_milli=round(_container_sum(pod, "cpu", limits_first=False) * 1000),
        memory_bytes=round(_container_sum(pod, "memory", limits_first=False)),
        gpu_milli_by_index=tuple((i, per_gpu_milli) for i in indices),
        unindexed_gpus=rest if per_gpu_milli == GPU_MILLI_PER_GPU else 0,
        unindexed_gpu_milli=0 if per_gpu_milli == GPU_MILLI_PER_GPU else rest * per_gpu_milli,
    )


def overcommit(capacity: NodeCapacity, usages: Iterable[PodUsage]) -> dict[str, float]:
    """Resource -> excess over ``capacity`` of the pods together (empty when they fit).

    GPU excess (in GPUs) is the larger of: milli above 1000 on any index, milli on indices the
    node does not have, and unindexed whole GPUs beyond the untouched indices (all three
    summed); and the total milli above ``gpus × 1000``."""
    cpu_milli = memory_bytes = unindexed_gpus = unindexed_milli = 0
    by_index: dict[int, int] = {}
    for u in usages:
        cpu_milli += u.cpu_milli
        memory_bytes += u.memory_bytes
        unindexed_gpus += u.unindexed_gpus
        unindexed_milli += u.unindexed_gpu_milli
        for index, milli in u.gpu_milli_by_index:
            by_index[index] = by_index.get(index, 0) + milli
    excess: dict[str, float] = {}
    if cpu_milli > capacity.cpu_milli:
        excess["cpu"] = (cpu_milli - capacity.cpu_milli) / 1000
    if memory_bytes > capacity.memory_bytes:
        excess["memory"] = float(memory_bytes - capacity.memory_bytes)
    valid = range(capacity.gpus)
    local = sum(max(0, m - GPU_MILLI_PER_GPU) if i in valid else m for i, m in by_index.items())
    untouched = sum(1 for i in valid if by_index.get(i, 0) == 0)
    local += max(0, unindexed_gpus - untouched) * GPU_MILLI_PER_GPU
    total = sum(by_index.values()) + unindexed_gpus * GPU_MILLI_PER_GPU + unindexed_milli
    gpu_excess_milli = max(local, total - capacity.gpus * GPU_MILLI_PER_GPU)
    if gpu_excess_milli > 0:
        excess[names.NVIDIA_GPU] = gpu_excess_milli / GPU_MILLI_PER_GPU
    return excess
