"""A v1 Pod's JSON -> gpudefrag's request (:class:`PodRequest`), with one rule per convention.

**CPU and memory** (:func:`effective_request`): per container, ``resources.requests`` (the
``limits`` when a request is absent); the pod's request is what Kubernetes computes: the larger
of (the sum over ``containers`` plus the sidecar init containers, ``restartPolicy: Always``) and
each regular init container's request plus the sidecars started before it; plus
``spec.overhead``.

**GPUs**, exactly one of three conventions (a second one on the same pod is an error):

* whole GPUs (:func:`whole_gpus`): ``nvidia.com/gpu`` in the containers' ``limits`` (else
  ``requests``), an integer, combined over containers like CPU -> ``n`` GPUs of 1000 milli;
  more than 8 on one pod is an error (a pod lives on one node: use a gang);
* openb (:func:`openb_gpus`): annotations ``alibabacloud.com/gpu-milli`` (1..1000, per GPU) and
  ``alibabacloud.com/gpu-count`` (1..8, default 1); a multi-GPU pod must ask whole GPUs;
* KAI (:func:`kai_gpus`): annotation ``gpu-fraction`` ``f`` with ``0 < f <= 1`` -> one GPU of
  ``round(f * 1000)`` milli.

``alibabacloud.com/gpu-card-model`` (``|``-separated models) restricts the GPU models.
Every malformed value raises :class:`ObjectError` naming the object and the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from gpudefrag.k8s import names
from gpudefrag.k8s.quantity import QuantityError, cpu_milli, memory_mib, parse_quantity
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_GPUS_PER_NODE
from gpudefrag.model.jobs import Constraint
from gpudefrag.model.pods import PodSpec, check_pod_shape

__all__ = [
    "ModelMasks",
    "ObjectError",
    "PodRequest",
    "effective_request",
    "gpu_assignment",
    "gpu_index_value",
    "gpu_request",
    "kai_gpus",
    "openb_gpus",
    "parse_time_s",
    "pod_ref",
    "pod_request",
    "whole_gpus",
]


class ObjectError(ValueError):
    """A Kubernetes object we cannot read: ``str(e)`` is ``"<obj>: <field>: <reason>"``, e.g.
    ``pods/default/foo: annotation 'alibabacloud.com/gpu-milli': 'abc' is not an integer in 1..1000``."""

    def __init__(self, obj: str, field: str, reason: str) -> None:
        self.obj = obj
        self.field = field
        self.reason = reason
        super().__init__(f"{obj}: {field}: {reason}")


@dataclass(frozen=True)
class PodRequest:
    """One pod as gpudefrag sees it.  ``spec.name`` is ``"namespace/name"``."""

    namespace: str
    name: str
    uid: str
    spec: PodSpec
    pod_group: str | None
    """Label ``scheduling.x-k8s.io/pod-group`` (a gang's PodGroup, same namespace)."""
    constraint: Constraint | None
    """From the Kueue TAS annotations; ``level`` is the node label key (required wins)."""
    priority: int
    created_s: float
    """``metadata.creationTimestamp`` in epoch seconds (0 when absent)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ModelMasks(Protocol):
    """What reading a pod needs of :class:`gpudefrag.k8s.nodes.ModelRegistry` (kept as a
    protocol so that this module does not import that one)."""

    def mask_of(self, spec: str) -> int: ...


Annotations = Mapping[str, str]
GpuShape = tuple[int, int]
"""``(num_gpu, gpu_milli)``."""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def pod_ref(obj: Mapping[str, Any]) -> str:
    """``pods/<namespace>/<name>``, the name errors use."""
    meta = _dict(obj.get("metadata"))
    return f"pods/{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"


def parse_time_s(text: Any, ref: str, field: str) -> float:
    """An RFC 3339 time (``2024-05-01T12:00:00Z``, fractions and offsets allowed) in epoch
    seconds; a time without an offset is UTC."""
    if not isinstance(text, str):
        raise ObjectError(ref, field, f"{text!r} is not an RFC 3339 time")
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ObjectError(ref, field, f"{text!r} is not an RFC 3339 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


# ----------------------------------------------------------------------------- containers
def _amount(where: str, container: Mapping[str, Any], resource: str, kinds: Sequence[str]) -> tuple[Any, str]:
    """The container's value of ``resource`` from the first of ``kinds`` that has it (and the
    field it came from), or ``(None, "")``."""
    res = _dict(container.get("resources"))
    for kind in kinds:
        value = _dict(res.get(kind)).get(resource)
        if value is not None:
            return value, f"{where}.resources.{kind}['{resource}']"
    return None, ""


def effective_request(
    ref: str,
    spec: Mapping[str, Any],
    resource: str,
    parse: Callable[[Any], int],
    kinds: Sequence[str] = ("requests", "limits"),
) -> int:
    """The pod's request of ``resource`` as Kubernetes computes it (module docstring), each
    container's value read by ``parse`` (raising :class:`QuantityError` or ``ValueError``)."""

    def read(where: str, c: Any) -> int:
        value, field = _amount(where, _dict(c), resource, kinds)
        if value is None:
            return 0
        try:
            return parse(value)
        except ValueError as e:
            raise ObjectError(ref, field, str(e)) from None

    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    if not isinstance(containers, list) or not isinstance(inits, list):
        raise ObjectError(ref, "spec.containers", "must be a list")
    app = sum(read(f"spec.containers[{i}]", c) for i, c in enumerate(containers))
    sidecars = 0
    peak_init = 0
    for i, c in enumerate(inits):
        amount = read(f"spec.initContainers[{i}]", c)
        if _dict(c).get("restartPolicy") == "Always":
            sidecars += amount
        else:
            peak_init = max(peak_init, sidecars + amount)
    overhead = _dict(spec.get("overhead")).get(resource)
    extra = 0
    if overhead is not None:
        try:
            extra = parse(overhead)
        except ValueError as e:
            raise ObjectError(ref, f"spec.overhead['{resource}']", str(e)) from None
    return max(app + sidecars, peak_init) + extra


def _gpu_count(value: Any) -> int:
    q = parse_quantity(value)
    if q < 0 or q.denominator != 1:
        raise QuantityError(f"{value!r} is not a whole number of GPUs")
    return int(q)


# ----------------------------------------------------------------------------- GPU conventions
def whole_gpus(ref: str, spec: Mapping[str, Any]) -> GpuShape | None:
    """``nvidia.com/gpu`` (limits, else requests) -> ``(n, 1000)``; None when no GPU is asked."""
    n = effective_request(ref, spec, names.NVIDIA_GPU, _gpu_count, kinds=("limits", "requests"))
    if n == 0:
        return None
    if n > MAX_GPUS_PER_NODE:
        raise ObjectError(
            ref,
            f"resources '{names.NVIDIA_GPU}'",
            f"{n} GPUs on one pod; a node has at most {MAX_GPUS_PER_NODE} (use a gang of pods)",
        )
    return n, GPU_MILLI_PER_GPU


def _int_annotation(ref: str, ann: Annotations, key: str, lo: int, hi: int) -> int | None:
    text = ann.get(key)
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        raise ObjectError(ref, f"annotation '{key}'", f"{text!r} is not an integer in {lo}..{hi}")
    return value


def openb_gpus(ref: str, ann: Annotations) -> GpuShape | None:
    """``alibabacloud.com/gpu-milli`` (1..1000) x ``gpu-count`` (1..8, default 1); None when
    neither annotation is present."""
    milli = _int_annotation(ref, ann, names.ALIBABA_GPU_MILLI, 1, GPU_MILLI_PER_GPU)
    count = _int_annotation(ref, ann, names.ALIBABA_GPU_COUNT, 1, MAX_GPUS_PER_NODE)
    if milli is None:
        if count is not None:
            raise ObjectError(
                ref, f"annotation '{names.ALIBABA_GPU_COUNT}'", f"needs '{names.ALIBABA_GPU_MILLI}' too"
            )
        return None
    count = 1 if count is None else count
    if count > 1 and milli != GPU_MILLI_PER_GPU:
        raise ObjectError(
            ref,
            f"annotation '{names.ALIBABA_GPU_MILLI}'",
            f"a {count}-GPU pod must ask whole GPUs ({GPU_MILLI_PER_GPU}), got {milli}",
        )
    return count, milli


def kai_gpus(ref: str, ann: Annotations) -> GpuShape | None:
    """``gpu-fraction`` ``f`` (``0 < f <= 1``) -> ``(1, round(f * 1000))``; None when absent."""
    text = ann.get(names.KAI_GPU_FRACTION)
    if text is None:
        return None
    try:
        f = float(str(text).strip())
    except ValueError:
        f = math.nan
    milli = round(f * GPU_MILLI_PER_GPU) if math.isfinite(f) else 0
    if not (0 < f <= 1 and milli >= 1):
        raise ObjectError(
            ref, f"annotation '{names.KAI_GPU_FRACTION}'", f"{text!r} is not a fraction in (0, 1] (>= 0.001)"
        )
    return 1, milli


def gpu_request(ref: str, spec: Mapping[str, Any], ann: Annotations) -> GpuShape:
    """``(num_gpu, gpu_milli)`` of the pod: ``(0, 0)`` without GPUs; an error when more than
    one convention is used."""
    found = {
        f"resources '{names.NVIDIA_GPU}'": whole_gpus(ref, spec),
        f"annotation '{names.ALIBABA_GPU_MILLI}'": openb_gpus(ref, ann),
        f"annotation '{names.KAI_GPU_FRACTION}'": kai_gpus(ref, ann),
    }
    used = [(field, shape) for field, shape in found.items() if shape is not None]
    if len(used) > 1:
        raise ObjectError(
            ref, used[1][0], f"more than one GPU convention on one pod ({', '.join(f for f, _ in used)})"
        )
    return used[0][1] if used else (0, 0)


# ----------------------------------------------------------------------------- the pod
def _constraint(ref: str, ann: Annotations) -> Constraint | None:
    for mode, key in (
        ("required", names.KUEUE_REQUIRED_TOPOLOGY),
        ("preferred", names.KUEUE_PREFERRED_TOPOLOGY),
    ):
        level = ann.get(key)
        if level is None:
            continue
        if not isinstance(level, str) or not level.strip():
            raise ObjectError(ref, f"annotation '{key}'", f"{level!r} is not a node label key")
        return Constraint(mode, level.strip())
    return None


def _string_map(ref: str, meta: Mapping[str, Any], field: str) -> dict[str, str]:
    value = meta.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ObjectError(ref, f"metadata.{field}", "must be a map")
    return {str(k): str(v) if not isinstance(v, str) else v for k, v in value.items()}


def _priority(ref: str, spec: Mapping[str, Any]) -> int:
    p = spec.get("priority", 0)
    if p is None:
        return 0
    if isinstance(p, bool) or not isinstance(p, int):
        raise ObjectError(ref, "spec.priority", f"{p!r} is not an integer")
    return p


def pod_request(obj: Mapping[str, Any], models: ModelMasks) -> PodRequest:
    """Read one v1 Pod (module docstring); raises :class:`ObjectError`."""
    ref = pod_ref(obj)
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ObjectError(ref, "metadata.name", "missing")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ObjectError(ref, "spec", "missing or not a map")
    namespace = str(meta.get("namespace") or "default")
    ann = _string_map(ref, meta, "annotations")
    labels = _string_map(ref, meta, "labels")
    cpu = effective_request(ref, spec, "cpu", cpu_milli)
    mem = effective_request(ref, spec, "memory", memory_mib)
    num_gpu, gpu_milli = gpu_request(ref, spec, ann)
    model_spec = ann.get(names.ALIBABA_GPU_MODEL, "")
    try:
        mask = models.mask_of(model_spec)
    except ValueError as e:
        raise ObjectError(ref, f"annotation '{names.ALIBABA_GPU_MODEL}'", str(e)) from None
    bad = check_pod_shape(cpu, mem, num_gpu, gpu_milli)
    if bad is not None:
        raise ObjectError(ref, bad[0], bad[1])
    created = meta.get("creationTimestamp")
    return PodRequest(
        namespace=namespace,
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        spec=PodSpec(cpu, mem, num_gpu, gpu_milli, mask, f"{namespace}/{meta['name']}"),
        pod_group=labels.get(names.POD_GROUP_LABEL) or None,
        constraint=_constraint(ref, ann),
        priority=_priority(ref, spec),
        created_s=0.0 if created is None else parse_time_s(created, ref, "metadata.creationTimestamp"),
    )


def gpu_assignment(obj: Mapping[str, Any]) -> tuple[int, ...] | None:
    """GPU indices from ``alibabacloud.com/gpu-index`` (``"0"``, ``"2,3"``; ``""`` = none);
    None when the annotation is absent.  Indices are distinct integers in 0..7."""
    ref = pod_ref(obj)
    ann = _string_map(ref, _dict(obj.get("metadata")), "annotations")
    text = ann.get(names.ALIBABA_GPU_INDEX)
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    try:
        gpus = tuple(int(p) for p in parts)
    except ValueError:
        gpus = (-1,)
    if any(not 0 <= g < MAX_GPUS_PER_NODE for g in gpus) or len(set(gpus)) != len(gpus):
        raise ObjectError(
            ref,
            f"annotation '{names.ALIBABA_GPU_INDEX}'",
            f"{text!r} is not a list of distinct GPU indices in 0..{MAX_GPUS_PER_NODE - 1}",
        )
    return gpus


def gpu_index_value(gpus: Sequence[int]) -> str:
    """The ``alibabacloud.com/gpu-index`` value for ``gpus`` (inverse of :func:`gpu_assignment`)."""
    return ",".join(str(int(g)) for g in gpus)
