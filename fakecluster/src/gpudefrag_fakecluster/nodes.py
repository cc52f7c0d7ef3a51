"""Fake GPU nodes for the fake cluster: a Ready v1 Node manifest and a helper that creates
numbered ones in a store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpudefrag.k8s import names
from gpudefrag_fakecluster.store import Store


def node_manifest(
    name: str, gpus: int, gpu_model: str, cpu_milli: int, memory_mib: int, labels: dict[str, str]
) -> dict[str, Any]:
    """A Ready v1 Node with ``gpus`` GPUs of ``gpu_model`` (capacity = allocatable)."""
    cpu = str(cpu_milli // 1000) if cpu_milli % 1000 == 0 else f"{cpu_milli}m"
    resources = {"cpu": cpu, "memory": f"{memory_mib}Mi", names.NVIDIA_GPU: str(gpus), "pods": "110"}
    all_labels = {
        "kubernetes.io/hostname": name,
        names.ALIBABA_GPU_MODEL: gpu_model,
        names.NVIDIA_GPU_PRODUCT: gpu_model,
    }
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**all_labels, **labels}},
        "spec": {},
        "status": {"capacity": resources, "allocatable": dict(resources), "conditions": [ready]},
    }


def make_nodes(
    store: Store,
    count: int,
    gpus_per_node: int = 8,
    gpu_model: str = "V100M16",
    cpu_milli: int = 96_000,
    memory_mib: int = 786_432,
    labels_fn: Callable[[int], dict[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """Create nodes ``node-0000``.. in ``store`` (extra labels from ``labels_fn(i)``, e.g. a
    topology's ``gpudefrag.io/leaf``); returns the stored objects."""
    out = []
    for i in range(count):
        body = node_manifest(
            f"node-{i:04d}",
            gpus_per_node,
            gpu_model,
            cpu_milli,
            memory_mib,
            labels_fn(i) if labels_fn else {},
        )
        created = store.create("nodes", None, body)
        if not (created.get("status") or {}).get("allocatable"):  # a store that drops status on create
            created = store.patch(
                "nodes", None, body["metadata"]["name"], {"status": body["status"]}, "status"
            )
        out.append(created)
    return out
