"""A v1 Node's JSON -> :class:`NodeInfo`; nodes -> :class:`~gpudefrag.model.cluster.ClusterState`.

* Capacity: ``status.allocatable`` (``cpu``, ``memory``, ``nvidia.com/gpu``), each resource
  falling back to ``status.capacity``; ``cpu`` and ``memory`` must be present, GPUs default to 0.
* GPU model: label ``alibabacloud.com/gpu-card-model``, else ``nvidia.com/gpu.product``, else
  ``""``.  :class:`ModelRegistry` numbers model names for ``ClusterState.model_id`` and the pods'
  model masks: the models gpudefrag knows keep their ids, other names get the next ids.
* ``ready``: condition ``Ready`` is ``"True"``.  ``schedulable``: not ``spec.unschedulable``.
  ``taints``: those with effect ``NoSchedule`` or ``NoExecute``; a pod may use the node only if
  it tolerates them all (:mod:`gpudefrag.k8s.taints`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from gpudefrag.k8s import names
from gpudefrag.k8s.quantity import QuantityError, cpu_milli, memory_mib, parse_quantity
from gpudefrag.k8s.requests import ObjectError
from gpudefrag.k8s.taints import Taint, node_taints
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import ANY_GPU_MODEL, MAX_GPUS_PER_NODE
from gpudefrag.model.gpu_models import MODEL_ID

__all__ = ["MAX_MODELS", "ModelRegistry", "NodeInfo", "cluster_state", "node_info", "node_model_id"]

MAX_MODELS = 62
"""Model ids 0..61: a mask is an int64 whose sign bit must stay clear (-1 means any model)."""


class ModelRegistry:
    """GPU model names -> ids (module docstring).  ``""`` (a GPU node of unknown model) gets an
    id like any name, so that no model constraint accepts it."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = dict(MODEL_ID)

    @property
    def names(self) -> tuple[str, ...]:
        """Model names in id order."""
        return tuple(sorted(self._ids, key=self._ids.__getitem__))

    def id_of(self, name: str) -> int:
        """The model's id; a new name gets the next id (more than 62 models: ValueError)."""
        found = self._ids.get(name)
        if found is not None:
            return found
        if len(self._ids) >= MAX_MODELS:
            raise ValueError(f"more than {MAX_MODELS} GPU models; cannot add {name!r}")
        self._ids[name] = len(self._ids)
        return self._ids[name]

    def mask_of(self, spec: str) -> int:
        """Bitmask of the ``|``-separated models ``spec`` accepts; ``""`` -> ``ANY_GPU_MODEL``.
        A name not seen before gets an id (a node of that model may appear later)."""
        parts = [p.strip() for p in spec.split("|") if p.strip()]
        if not parts:
            return ANY_GPU_MODEL
        mask = 0
        for part in parts:
            mask |= 1 << self.id_of(part)
        return mask


@dataclass(frozen=True)
class NodeInfo:
    """A node as gpudefrag sees it (module docstring)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    ready: bool
    schedulable: bool
    taints: tuple[Taint, ...] = ()

    @property
    def usable(self) -> bool:
        """Ready and schedulable: new pods may go there."""
        return self.ready and self.schedulable


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _resource(ref: str, status: Mapping[str, Any], resource: str) -> tuple[Any, str]:
    """The resource's value in ``allocatable``, else ``capacity`` (with the field read)."""
    for part in ("allocatable", "capacity"):
        value = _map(status.get(part)).get(resource)
        if value is not None:
            return value, f"status.{part}['{resource}']"
    return None, f"status.allocatable['{resource}']"


def _gpus(ref: str, status: Mapping[str, Any]) -> int:
    value, field = _resource(ref, status, names.NVIDIA_GPU)
    if value is None:
        return 0
    try:
        q = parse_quantity(value)
    except QuantityError as e:
        raise ObjectError(ref, field, str(e)) from None
    if q < 0 or q.denominator != 1:
        raise ObjectError(ref, field, f"{value!r} is not a whole number of GPUs")
    return int(q)


def _capacity(ref: str, status: Mapping[str, Any], resource: str, parse: Any) -> int:
    value, field = _resource(ref, status, resource)
    if value is None:
        raise ObjectError(ref, field, "missing (and no status.capacity either)")
    try:
        return int(parse(value))
    except QuantityError as e:
        raise ObjectError(ref, field, str(e)) from None


def _ready(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def _schedulable(spec: Mapping[str, Any]) -> bool:
    """Not cordoned (``spec.unschedulable``); taints are matched per pod (:mod:`gpudefrag.k8s.taints`)."""
    return spec.get("unschedulable") is not True


def _strings(ref: str, meta: Mapping[str, Any], field: str) -> Mapping[str, str]:
    value = meta.get(field) or {}
    if not isinstance(value, dict):
        raise ObjectError(ref, f"metadata.{field}", "must be a map")
    return MappingProxyType({str(k): str(v) for k, v in value.items()})


def node_info(obj: Mapping[str, Any]) -> NodeInfo:
    """Read one v1 Node (module docstring); raises :class:`ObjectError`."""
    meta = _map(obj.get("metadata"))
    name = meta.get("name")
    ref = f"nodes/{name or '?'}"
    if not isinstance(name, str) or not name:
        raise ObjectError(ref, "metadata.name", "missing")
    status = _map(obj.get("status"))
    labels = _strings(ref, meta, "labels")
    model = labels.get(names.ALIBABA_GPU_MODEL) or labels.get(names.NVIDIA_GPU_PRODUCT) or ""
    return NodeInfo(
        name=name,
        cpu_milli=_capacity(ref, status, "cpu", cpu_milli),
        memory_mib=_capacity(ref, status, "memory", memory_mib),
        gpu_count=_gpus(ref, status),
        gpu_model=model,
        labels=labels,
        annotations=_strings(ref, meta, "annotations"),
        ready=_ready(status),
        schedulable=_schedulable(_map(obj.get("spec"))),
        taints=node_taints(_map(obj.get("spec"))),
    )


def node_model_id(node: NodeInfo, models: ModelRegistry) -> int:
    """The node's model id: its model's; a node without GPUs and without a model label gets 0
    (its model is never looked at)."""
    if node.gpu_count == 0 and not node.gpu_model:
        return 0
    try:
        return models.id_of(node.gpu_model)
    except ValueError as e:
        raise ObjectError(f"nodes/{node.name}", "labels", str(e)) from None


def cluster_state(nodes: Sequence[NodeInfo], models: ModelRegistry) -> ClusterState:
    """An empty state of ``nodes`` in the given order (tie rank = that order).  A node with more
    than 8 GPUs raises :class:`ObjectError` (a node's GPU array holds 8)."""
    for n in nodes:
        if n.gpu_count > MAX_GPUS_PER_NODE:
            raise ObjectError(
                f"nodes/{n.name}",
                f"status.allocatable['{names.NVIDIA_GPU}']",
                f"{n.gpu_count} GPUs; gpudefrag handles at most {MAX_GPUS_PER_NODE} per node",
            )
    return ClusterState(
        [n.name for n in nodes],
        np.array([node_model_id(n, models) for n in nodes], dtype=np.int64),
        np.array([n.gpu_count for n in nodes], dtype=np.int64),
        np.array([n.cpu_milli for n in nodes], dtype=np.int64),
        np.array([n.memory_mib for n in nodes], dtype=np.int64),
    )
