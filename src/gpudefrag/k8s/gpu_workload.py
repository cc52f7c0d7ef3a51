"""Which pods make a cluster's GPU workload: the typical pods FGD measures fragmentation against,
for the scheduler (:class:`~gpudefrag.k8s.policy.DecisionCore`) and ``gpudefrag plan`` alike.

Rule: a pod counts when it asks for a GPU (whole or shared) and is neither a DaemonSet pod (an
``ownerReference`` of kind ``DaemonSet``) nor a static pod (annotation
``kubernetes.io/config.mirror``).  CPU-only pods are left out: for a CPU-only typical pod FGD
counts every free GPU of a node as fragmented, so the system pods a cluster runs on every node
(kube-proxy, exporters, device plugins) would dominate the measure by their number although
they never use a GPU.  When no pod counts, the workload is one whole-GPU pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpudefrag.frag.typical import TypicalPods, typical_pods
from gpudefrag.k8s import names
from gpudefrag.k8s.requests import PodRequest
from gpudefrag.model.pods import PodSpec, pod_batch

__all__ = ["DEFAULT_WORKLOAD", "counts_in_gpu_workload", "gpu_workload_typical", "system_pod_reason"]

DEFAULT_WORKLOAD = PodSpec(0, 0, 1, 1000)
"""The workload when no pod counts: one whole GPU."""


def system_pod_reason(obj: Mapping[str, Any]) -> str | None:
    """``"DaemonSet pod"`` or ``"static pod"`` when the pod is one (module docstring), else None."""
    meta = obj.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    if any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners):
        return "DaemonSet pod"
    if names.MIRROR_POD in (meta.get("annotations") or {}):
        return "static pod"
    return None


def counts_in_gpu_workload(obj: Mapping[str, Any], req: PodRequest) -> bool:
    """Whether the pod is part of the GPU workload (module docstring)."""
    return req.spec.num_gpu > 0 and req.spec.gpu_milli > 0 and system_pod_reason(obj) is None


def gpu_workload_typical(
    pods: Iterable[tuple[Mapping[str, Any], PodRequest]], mask_of: Any = None
) -> TypicalPods:
    """FGD's typical pods (:func:`~gpudefrag.frag.typical.typical_pods`) of the pods that count
    (``(object, request)`` pairs), GPU models keyed by the ``alibabacloud.com/gpu-card-model``
    annotation's set of names (``B|A`` and ``A|B`` are one key, ``A|B``); ``mask_of`` turns it
    into a model mask (a :class:`~gpudefrag.k8s.nodes.ModelRegistry`'s)."""
    specs: list[PodSpec] = []
    gpu_specs: list[str] = []
    for obj, req in pods:
        if not counts_in_gpu_workload(obj, req):
            continue
        specs.append(req.spec)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        models = {
            m.strip() for m in str(annotations.get(names.ALIBABA_GPU_MODEL, "")).split("|") if m.strip()
        }
        gpu_specs.append("|".join(sorted(models)))  # one key for one set of models
    if not specs:
        return typical_pods(pod_batch([DEFAULT_WORKLOAD]))
    if mask_of is None:
        return typical_pods(pod_batch(specs, gpu_specs))
    return typical_pods(pod_batch(specs, gpu_specs), mask_of=mask_of)
