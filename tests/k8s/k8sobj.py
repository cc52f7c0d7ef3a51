"""Hand-written Kubernetes objects (plain dicts) for the driver's unit tests."""

from __future__ import annotations

import itertools

_uids = itertools.count(1)


def node(
    name: str, gpus: int = 8, model: str = "V100M16", cpu: str = "96", memory: str = "768Gi", **labels: str
) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": {"kubernetes.io/hostname": name, "alibabacloud.com/gpu-card-model": model, **labels},
            "annotations": {},
        },
        "spec": {},
        "status": {
            "capacity": dict(alloc),
            "allocatable": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    gpus: int = 0,
    milli: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    node_name: str | None = None,
    gpu_index: str | None = None,
    ns: str = "default",
    scheduler: str = "gpudefrag",
    created: str = "2026-12-01T00:00:00Z",
    phase: str = "Pending",
    group: str | None = None,
    annotations: dict | None = None,
    owner: bool = True,
    priority: int = 0,
    uid: str | None = None,
) -> dict:
    """A pod asking for ``gpus`` whole GPUs, or a ``milli`` share of one GPU."""
    ann = dict(annotations or {})
    limits: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if milli:
        ann["alibabacloud.com/gpu-milli"] = str(milli)
        ann["alibabacloud.com/gpu-count"] = "1"
    if gpu_index is not None:
        ann["alibabacloud.com/gpu-index"] = gpu_index
    labels = {"app": name}
    if group:
        labels["scheduling.x-k8s.io/pod-group"] = group
    meta: dict = {
        "name": name,
        "namespace": ns,
        "uid": uid or f"uid-{next(_uids)}",
        "creationTimestamp": created,
        "labels": labels,
        "annotations": ann,
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "j", "controller": True}
        ]
    spec: dict = {
        "schedulerName": scheduler,
        "priority": priority,
        "containers": [
            {"name": "main", "image": "x", "resources": {"requests": dict(limits), "limits": dict(limits)}}
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def pod_group(name: str, min_member: int, ns: str = "default") -> dict:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member},
    }
