"""A cluster snapshot: ``kubectl get nodes,pods -A -o json`` -> nodes, running and pending pods.

Input: a v1 ``List`` whose items are Nodes and Pods (``NodeList``/``PodList`` too, and Lists
nested in a List), JSON or YAML; several files are read as one snapshot.  Rules:

* every Node is a node, in the order listed;
* a Pod with phase ``Succeeded`` or ``Failed`` is ignored;
* a Pod with ``spec.nodeName`` is *running* on that node, whoever scheduled it (it occupies
  resources), on the GPUs of its ``alibabacloud.com/gpu-index`` annotation; without the
  annotation it gets the lowest free GPUs that fit (whole GPUs: the lowest wholly free ones; a
  shared GPU: the lowest one with room), pods taken in creation order (then name), after every
  pod whose GPUs are known.  A pod bound to a node not in the snapshot, or that does not fit
  where it is bound (an over-committed node in our model), is left out and listed in
  ``skipped``.  Its GPU-model constraint is not checked there (it runs already);
* a Pod without ``spec.nodeName`` in phase ``Pending`` (or no phase) is *pending*
  (with ``only_scheduler``: only those with that ``spec.schedulerName``; the others are
  listed in ``skipped``).  A pending pod being deleted is skipped.

A running pod's disruption state comes from its object (:mod:`gpudefrag.k8s.checkpoints`).

A malformed file (not JSON/YAML, not a List of objects) or object (bad quantity, annotation,
GPU index) raises :class:`~gpudefrag.errors.InputError` naming the file and the object:
``snap.json: pods/default/foo: annotation '...': ...``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from gpudefrag.errors import InputError
from gpudefrag.k8s import names
from gpudefrag.k8s.nodes import ModelRegistry, NodeInfo, cluster_state, node_info
from gpudefrag.k8s.requests import ObjectError, PodRequest, gpu_assignment, pod_ref, pod_request
from gpudefrag.k8s.timefmt import from_rfc3339
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import ANY_GPU_MODEL, GPU_MILLI_PER_GPU
from gpudefrag.model.pods import PodSpec

__all__ = [
    "RunningEntry",
    "Snapshot",
    "SnapshotObjects",
    "checked_snapshot",
    "load_snapshot",
    "lowest_free_gpus",
    "read_objects",
    "snapshot_from_objects",
    "snapshot_objects",
    "snapshot_time_s",
]

RunningEntry = tuple[PodRequest, str, tuple[int, ...]]
"""``(pod, node name, GPU indices)``."""

Sourced = tuple[Mapping[str, Any], str]
"""An object and the file it came from."""


@dataclass
class Snapshot:
    """Nodes, running pods (with their node and GPUs), pending pods (module docstring)."""

    nodes: list[NodeInfo]
    running: list[RunningEntry]
    pending: list[PodRequest]
    models: ModelRegistry
    skipped: list[str]
    source: str = ""
    """The file(s) read, for error messages."""
    objects: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """``namespace/name`` -> the pod's JSON, for every running and pending pod."""
    origin: dict[str, str] = field(default_factory=dict)
    """``namespace/name`` -> the file the pod came from."""

    def node_index(self) -> dict[str, int]:
        return {n.name: i for i, n in enumerate(self.nodes)}

    def cluster_state(self) -> ClusterState:
        """A fresh state of the nodes with every running pod bound (model constraints relaxed:
        the pods run already)."""
        state = cluster_state(self.nodes, self.models)
        index = self.node_index()
        for req, node, gpus in self.running:
            state.bind(Placement(index[node], gpus, _relaxed(req.spec)))
        return state

    def error(self, key: str, e: ObjectError) -> InputError:
        """An :class:`InputError` for a problem found later in pod ``key``'s object."""
        return InputError(self.origin.get(key, self.source), str(e))


def _relaxed(spec: PodSpec) -> PodSpec:
    return spec if spec.gpu_model_mask == ANY_GPU_MODEL else replace(spec, gpu_model_mask=ANY_GPU_MODEL)


def lowest_free_gpus(state: ClusterState, node: int, spec: PodSpec) -> tuple[int, ...] | None:
    """The lowest GPUs of ``node`` that fit ``spec`` (module docstring), ``()`` for a CPU-only
    pod, None when none fit."""
    if spec.gpu_milli <= 0:
        return ()
    left = [int(v) for v in state.gpu_milli_left[node, : int(state.gpu_count[node])]]
    if spec.gpu_milli >= GPU_MILLI_PER_GPU:
        free = [g for g, v in enumerate(left) if v >= GPU_MILLI_PER_GPU]
        return tuple(free[: spec.num_gpu]) if len(free) >= spec.num_gpu else None
    room = [g for g, v in enumerate(left) if v >= spec.gpu_milli]
    return (room[0],) if room else None


# ----------------------------------------------------------------------------- reading files
def _parse(p: Path) -> Any:
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror}") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise InputError(p, f"not valid YAML: {' '.join(str(e).split())}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(p, f"not valid JSON: {e}", line=e.lineno) from None


def _items(source: str, data: Any, where: str = "") -> list[Mapping[str, Any]]:
    """Nodes and Pods (``kind`` set) of a List, a NodeList/PodList or a single object."""
    if not isinstance(data, dict):
        raise InputError(source, f"{where or 'the file'}: expected a v1 List of Nodes and Pods")
    items = data.get("items")
    if items is None:
        if data.get("kind") in ("Node", "Pod"):
            return [data]
        raise InputError(source, f"{where or 'the file'}: expected a v1 List of Nodes and Pods (no 'items')")
    if not isinstance(items, list):
        raise InputError(source, f"{where or 'the file'}: 'items' must be a list")
    list_kind = str(data.get("kind") or "")
    implied = list_kind[: -len("List")] if list_kind.endswith("List") and list_kind != "List" else ""
    out: list[Mapping[str, Any]] = []
    for i, item in enumerate(items):
        here = f"{where}items[{i}]"
        if not isinstance(item, dict):
            raise InputError(source, f"{here}: not an object")
        if "items" in item:
            out += _items(source, item, here + ".")
        elif not item.get("kind") and implied:
            out.append({**item, "kind": implied})
        else:
            out.append(item)
    return out


def read_objects(paths: Iterable[str | Path]) -> list[Sourced]:
    """Every object of the files, with the file it came from (Lists flattened, module docstring)."""
    sourced: list[Sourced] = []
    for p in map(Path, paths):
        sourced += [(obj, str(p)) for obj in _items(str(p), _parse(p))]
    return sourced


def load_snapshot(path: str | Path, *more: str | Path, only_scheduler: str | None = None) -> Snapshot:
    """Read one snapshot from one or more files (module docstring)."""
    paths = [Path(p) for p in (path, *more)]
    return checked_snapshot(read_objects(paths), ", ".join(str(p) for p in paths), only_scheduler)


def checked_snapshot(sourced: list[Sourced], source: str, only_scheduler: str | None = None) -> Snapshot:
    """The snapshot of objects read by :func:`read_objects` (its errors name their file)."""
    return _build(sourced, source, only_scheduler)


@dataclass
class SnapshotObjects:
    """A snapshot's objects as the API would list them: Nodes, Pods (finished ones included)
    and PodGroups; read and checked by :func:`snapshot_objects`."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    pod_groups: list[dict[str, Any]]
    source: str
    skipped: list[str]


def snapshot_objects(sourced: list[Sourced], source: str) -> SnapshotObjects:
    """The objects of :func:`read_objects`, checked as :func:`checked_snapshot` checks them (an
    :class:`InputError` naming the file and object); a pod without ``metadata.uid`` (a
    hand-made file) gets ``namespace/name`` as its UID."""
    snap = checked_snapshot(sourced, source)
    pods = []
    for obj, _ in sourced:
        if obj.get("kind") != "Pod":
            continue
        meta = dict(obj.get("metadata") or {})
        if not meta.get("uid"):
            meta["uid"] = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        pods.append({**obj, "metadata": meta})
    return SnapshotObjects(
        [dict(o) for o, _ in sourced if o.get("kind") == "Node"],
        pods,
        [dict(o) for o, _ in sourced if o.get("kind") == "PodGroup"],
        source,
        snap.skipped,
    )


_TIME_FIELDS = (
    "creationTimestamp",
    "startTime",
    "lastHeartbeatTime",
    "lastTransitionTime",
    "startedAt",
    "finishedAt",
)


def snapshot_time_s(objects: Iterable[Mapping[str, Any]]) -> float | None:
    """The newest time the objects carry (creation and start times, node heartbeats, condition
    transitions, container starts and ends): when the snapshot was taken, at the earliest;
    ``None`` when they carry none.  Malformed times are left out (the readers report them)."""
    newest: float | None = None

    def visit(value: Any) -> None:
        nonlocal newest
        if isinstance(value, dict):
            for k, v in value.items():
                if k in _TIME_FIELDS and isinstance(v, str):
                    try:
                        t = from_rfc3339(v)
                    except ValueError:
                        continue
                    newest = t if newest is None else max(newest, t)
                elif k != "managedFields":
                    visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    for obj in objects:
        visit(obj)
    return newest


def snapshot_from_objects(
    objects: Iterable[Mapping[str, Any]], source: str = "<objects>", only_scheduler: str | None = None
) -> Snapshot:
    """A snapshot from Node and Pod JSON objects (e.g. listed from an API server)."""
    return _build([(obj, source) for obj in objects], source, only_scheduler)


# ----------------------------------------------------------------------------- building
def _nodes(sourced: list[Sourced]) -> tuple[list[NodeInfo], dict[str, str]]:
    nodes: list[NodeInfo] = []
    origin: dict[str, str] = {}
    for obj, src in sourced:
        try:
            info = node_info(obj)
        except ObjectError as e:
            raise InputError(src, str(e)) from None
        if info.name in origin:
            raise InputError(src, f"nodes/{info.name}: listed twice")
        origin[info.name] = src
        nodes.append(info)
    return nodes, origin


@dataclass
class _Bound:
    order: int
    req: PodRequest
    node: int
    gpus: tuple[int, ...] | None
    src: str


def _check_known(state: ClusterState, b: _Bound, obj: Mapping[str, Any]) -> None:
    """The annotated GPUs must match the request and exist on the node."""
    assert b.gpus is not None
    spec = b.req.spec
    want = spec.num_gpu if spec.gpu_milli > 0 else 0
    field_name = f"annotation '{names.ALIBABA_GPU_INDEX}'"
    if len(b.gpus) != want:
        raise InputError(
            b.src,
            str(ObjectError(pod_ref(obj), field_name, f"names {len(b.gpus)} GPUs, the pod asks {want}")),
        )
    count = int(state.gpu_count[b.node])
    bad = [g for g in b.gpus if g >= count]
    if bad:
        reason = f"GPU {bad[0]} does not exist: node '{state.names[b.node]}' has {count} GPUs"
        raise InputError(b.src, str(ObjectError(pod_ref(obj), field_name, reason)))


def _place(
    state: ClusterState, bound: list[_Bound], objects: Mapping[str, Mapping[str, Any]], skipped: list[str]
) -> list[RunningEntry]:
    """Bind the bound pods: known GPUs first (listed order), then the others in creation order."""
    placed: list[tuple[int, RunningEntry]] = []
    known = [b for b in bound if b.gpus is not None]
    unknown = sorted((b for b in bound if b.gpus is None), key=lambda b: (b.req.created_s, b.req.key))
    for b in known + unknown:
        obj = objects[b.req.key]
        if b.gpus is not None:
            _check_known(state, b, obj)
        spec = _relaxed(b.req.spec)
        gpus = b.gpus if b.gpus is not None else lowest_free_gpus(state, b.node, spec)
        why = "no free GPU fits" if gpus is None else state.why_not_fits(b.node, spec, gpus)
        if gpus is None or why is not None:
            skipped.append(f"{pod_ref(obj)}: does not fit on node '{state.names[b.node]}' ({why}); left out")
            continue
        state.bind(Placement(b.node, gpus, spec))
        placed.append((b.order, (b.req, state.names[b.node], gpus)))
    return [entry for _, entry in sorted(placed, key=lambda t: t[0])]


def _pods(
    sourced: list[Sourced],
    models: ModelRegistry,
    index: Mapping[str, int],
    only_scheduler: str | None,
    snap: Snapshot,
) -> list[_Bound]:
    """Read the pods: pending ones go to ``snap.pending``; bound ones are returned."""
    bound: list[_Bound] = []
    for order, (obj, src) in enumerate(sourced):
        status = obj.get("status")
        phase = str(status.get("phase") or "") if isinstance(status, dict) else ""
        if phase in ("Succeeded", "Failed"):
            continue
        try:
            req = pod_request(obj, models)
            gpus = gpu_assignment(obj)
        except ObjectError as e:
            raise InputError(src, str(e)) from None
        if req.key in snap.objects:
            raise InputError(src, f"{pod_ref(obj)}: listed twice")
        spec = obj["spec"]
        node = spec.get("nodeName")
        ref = pod_ref(obj)
        if node:
            if node not in index:
                snap.skipped.append(f"{ref}: bound to node '{node}', which is not in the snapshot; left out")
                continue
            bound.append(_Bound(order, req, index[node], gpus, src))
        elif phase not in ("", "Pending"):
            snap.skipped.append(f"{ref}: phase {phase} without a node; left out")
            continue
        elif isinstance(obj.get("metadata"), dict) and obj["metadata"].get("deletionTimestamp"):
            snap.skipped.append(f"{ref}: pending and being deleted; left out")
            continue
        elif only_scheduler is not None and spec.get("schedulerName", "default-scheduler") != only_scheduler:
            snap.skipped.append(
                f"{ref}: pending for scheduler '{spec.get('schedulerName', 'default-scheduler')}'; left out"
            )
            continue
        else:
            snap.pending.append(req)
        snap.objects[req.key] = obj
        snap.origin[req.key] = src
    return bound


def _build(sourced: list[Sourced], source: str, only_scheduler: str | None) -> Snapshot:
    node_objs = [(o, s) for o, s in sourced if o.get("kind") == "Node"]
    pod_objs = [(o, s) for o, s in sourced if o.get("kind") == "Pod"]
    models = ModelRegistry()
    nodes, node_origin = _nodes(node_objs)
    try:
        state = cluster_state(nodes, models)
    except ObjectError as e:
        raise InputError(node_origin.get(e.obj.removeprefix("nodes/"), source), str(e)) from None
    snap = Snapshot(nodes, [], [], models, [], source)
    others = sorted({str(o.get("kind") or "?") for o, _ in sourced} - {"Node", "Pod", "PodGroup"})
    if others:
        snap.skipped.append(f"objects of kind {', '.join(others)} ignored")
    bound = _pods(pod_objs, models, snap.node_index(), only_scheduler, snap)
    snap.running = _place(state, bound, snap.objects, snap.skipped)
    placed = {req.key for req, _, _ in snap.running}
    for b in bound:
        if b.req.key not in placed:
            del snap.objects[b.req.key]
    return snap
