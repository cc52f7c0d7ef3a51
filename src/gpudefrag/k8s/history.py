"""A Kubernetes pod history (``kubectl get pods -A -o json`` dumps) -> the jobs of a job-trace CSV.

Input: one or more JSON files, each a ``List`` of Pods (what ``kubectl get pods -A -o json``
prints) or one Pod; dumps taken over time, or one dump that still holds finished pods.
Rules (``docs/import.md``):

* A pod is known by its ``metadata.uid``.  Its views in several dumps are merged field by field:
  created and started at the earliest time any view shows (a container restart does not move
  the start), ended at the latest finish of a view that has ended.  A dump's time is the latest
  time it shows.  A pod that is not ended in any view but missing from a later dump ended while
  nobody looked: it ends at the time of the last dump it was in (a lower bound, counted); one
  that ended without a finish time ends at its dump's time (counted).  The order the dumps are
  given in does not matter.
* GPUs by the conventions the scheduler reads (:func:`~gpudefrag.k8s.requests.gpu_request`:
  ``nvidia.com/gpu``, openb's ``gpu-milli``/``gpu-count``, KAI's ``gpu-fraction``); a pod
  without GPUs is skipped (counted).  ``priority`` is ``spec.priority``.
* Times: submitted at ``metadata.creationTimestamp``; started at the earliest container start
  (``state.running.startedAt`` or ``state.terminated.startedAt``), else ``status.startTime``;
  ended at the latest ``state.terminated.finishedAt`` once the phase is ``Succeeded`` or
  ``Failed``.  A pod that never started is skipped (counted); one still running ends at
  ``now_s`` (default: the latest time in the dumps);
  :func:`~gpudefrag.workloads.import_common.finish` applies its rules (clock skew, lower bounds).
* A gang is the pods of one PodGroup (label ``scheduling.x-k8s.io/pod-group``, per namespace),
  one job per incarnation: the members in creation order, a new incarnation beginning when a
  member's pod name comes again (its workload controller recreated the gang).  An incarnation is
  one job of all its members' GPUs, submitted with its first member, started when its last
  member started, ended with its last member, at its members' highest priority.  One with a
  member that never started is skipped (counted); members must ask whole GPUs.

Every malformed pod raises :class:`~gpudefrag.errors.InputError` naming the file, the item
(its index and ``pods/<namespace>/<name>``) and the field.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpudefrag.errors import InputError
from gpudefrag.k8s import names
from gpudefrag.k8s.requests import ObjectError, gpu_request, parse_time_s, pod_ref
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.workloads.import_common import Imported, RawJob, finish

__all__ = ["PodView", "import_pod_dumps", "read_dump"]

_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodView:
    """One pod as one dump shows it (epoch seconds; ``None``: not yet); ``ended``: its phase is
    Succeeded or Failed (``end_s`` may still be unknown)."""

    uid: str
    ref: str
    group: str | None  # "namespace/podgroup" of a gang member
    created_s: float
    start_s: float | None
    end_s: float | None
    gpus: int
    gpu_milli: int
    priority: int
    ended: bool = False
    dump_s: float = 0.0  # the time of the dump it is in


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _times(ref: str, status: Mapping[str, Any]) -> tuple[float | None, float | None, bool]:
    """(start, end, ended) of a pod from its status (module docstring)."""
    starts: list[float] = []
    ends: list[float] = []
    statuses = status.get("containerStatuses") or []
    if not isinstance(statuses, list):
        raise ObjectError(ref, "status.containerStatuses", "not a list")
    for i, cs in enumerate(statuses):
        state = _map(_map(cs).get("state"))
        for kind in ("running", "terminated"):
            when = _map(state.get(kind)).get("startedAt")
            if when is not None:
                starts.append(
                    parse_time_s(when, ref, f"status.containerStatuses[{i}].state.{kind}.startedAt")
                )
        finished = _map(state.get("terminated")).get("finishedAt")
        if finished is not None:
            ends.append(
                parse_time_s(finished, ref, f"status.containerStatuses[{i}].state.terminated.finishedAt")
            )
    start = min(starts) if starts else None
    if start is None and status.get("startTime") is not None:
        start = parse_time_s(status["startTime"], ref, "status.startTime")
    ended = status.get("phase") in _ENDED
    end = max(ends) if ended and ends else None
    return start, end, ended


def pod_view(obj: Mapping[str, Any]) -> PodView:
    """One Pod object -> its view (``gpus`` 0: a pod without GPUs); raises :class:`ObjectError`."""
    ref = pod_ref(obj)
    meta = _map(obj.get("metadata"))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ObjectError(ref, "spec", "missing or not a map")
    ann = {k: v for k, v in _map(meta.get("annotations")).items() if isinstance(v, str)}
    num_gpu, milli = gpu_request(ref, spec, ann)
    if meta.get("creationTimestamp") is None:
        raise ObjectError(ref, "metadata.creationTimestamp", "missing (when was the pod created?)")
    created = parse_time_s(meta["creationTimestamp"], ref, "metadata.creationTimestamp")
    priority = spec.get("priority") or 0
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ObjectError(ref, "spec.priority", f"{priority!r} is not an integer")
    start, end, ended = _times(ref, _map(obj.get("status")))
    group = _map(meta.get("labels")).get(names.POD_GROUP_LABEL)
    namespace = str(meta.get("namespace") or "default")
    uid = str(meta.get("uid") or f"{ref}@{meta['creationTimestamp']}")
    return PodView(
        uid,
        ref,
        f"{namespace}/{group}" if group else None,
        created,
        start,
        end,
        num_gpu,
        milli,
        priority,
        ended,
    )


def read_dump(path: Path) -> list[PodView]:
    """The pods of one dump file, in its order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON: {e.msg}", e.lineno) from None
    items = data.get("items") if isinstance(data, dict) and "items" in data else [data]
    if not isinstance(items, list):
        raise InputError(path, "'items' is not a list", column="items")
    out: list[PodView] = []
    for i, obj in enumerate(items):
        if not isinstance(obj, dict) or obj.get("kind", "Pod") != "Pod":
            kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
            raise InputError(path, f"item {i}: a {kind}, not a Pod (dump pods: kubectl get pods -A -o json)")
        try:
            out.append(pod_view(obj))
        except ObjectError as e:
            raise InputError(path, f"item {i} ({e.obj}): {e.reason}", column=e.field) from None
    dump_s = max((t for v in out for t in (v.created_s, v.start_s, v.end_s) if t is not None), default=0.0)
    return [replace(v, dump_s=dump_s) for v in out]


def _merge(views: list[PodView], dump_times: list[float], notes: Counter[str]) -> dict[str, PodView]:
    """One view per uid, merged field by field (module docstring)."""
    by_uid: dict[str, list[PodView]] = {}
    for v in views:
        by_uid.setdefault(v.uid, []).append(v)
    out: dict[str, PodView] = {}
    for uid, seen in by_uid.items():
        last = max(seen, key=lambda v: v.dump_s)
        starts = [v.start_s for v in seen if v.start_s is not None]
        finished = [v for v in seen if v.ended]
        ends = [v.end_s for v in finished if v.end_s is not None]
        end: float | None = max(ends) if ends else None
        if finished and end is None:
            notes["ended without a finish time (ended at its dump's time)"] += 1
            end = min(v.dump_s for v in finished)
        elif not finished and starts and any(t > last.dump_s for t in dump_times):
            notes["gone from a later dump (ended at the last dump it was in: a lower bound)"] += 1
            end = last.dump_s
        out[uid] = replace(
            last,
            created_s=min(v.created_s for v in seen),
            start_s=min(starts) if starts else None,
            end_s=end,
            ended=end is not None,
        )
    return out


def _incarnations(members: list[PodView]) -> list[list[PodView]]:
    """A PodGroup's members split where a pod name comes again (module docstring)."""
    out: list[list[PodView]] = []
    names: set[str] = set()
    for m in sorted(members, key=lambda m: (m.created_s, m.ref)):
        if not out or m.ref in names:
            out.append([])
            names = set()
        out[-1].append(m)
        names.add(m.ref)
    return out


def _job(members: list[PodView], name: str, notes: Counter[str]) -> RawJob | None:
    starts = [m.start_s for m in members]
    if any(s is None for s in starts):
        notes["never started" if len(members) == 1 else "gangs with a member that never started"] += 1
        return None
    ends = [m.end_s for m in members]
    end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
    if len(members) == 1:
        m = members[0]
        return RawJob(m.created_s, float(starts[0] or 0.0), end, m.gpus, m.gpu_milli, m.priority, name)
    if any(m.gpu_milli < GPU_MILLI_PER_GPU for m in members):
        raise ValueError(f"gang {name}: a member shares a GPU; gang members ask whole GPUs")
    return RawJob(
        min(m.created_s for m in members),
        max(s for s in starts if s is not None),
        end,
        sum(m.gpus for m in members),
        GPU_MILLI_PER_GPU,
        max(m.priority for m in members),
        name,
    )


def import_pod_dumps(paths: list[Path], now_s: float | None = None) -> Imported:
    """The jobs of one or more pod dumps (module docstring); ``now_s`` (epoch seconds) ends the
    pods still running."""
    notes: Counter[str] = Counter()
    views: list[PodView] = []
    for p in paths:
        views += read_dump(p)
    dump_times = sorted({v.dump_s for v in views})
    pods = _merge(views, dump_times, notes)
    notes["pods without GPUs"] = sum(v.gpus == 0 for v in pods.values())
    pods = {uid: v for uid, v in pods.items() if v.gpus > 0}
    if not notes["pods without GPUs"]:
        del notes["pods without GPUs"]
    latest = max(
        (t for v in pods.values() for t in (v.created_s, v.start_s, v.end_s) if t is not None), default=0.0
    )
    groups: dict[str, list[PodView]] = {}
    raw: list[RawJob] = []
    for v in sorted(pods.values(), key=lambda v: (v.created_s, v.ref)):
        if v.group is not None:
            groups.setdefault(v.group, []).append(v)
            continue
        job = _job([v], v.ref.removeprefix("pods/"), notes)
        if job is not None:
            raw.append(job)
    for name, members in sorted(groups.items()):
        parts = _incarnations(members)
        if len(parts) > 1:
            notes["gangs recreated (one job per incarnation)"] += 1
        for part in parts:
            try:
                job = _job(part, name, notes)
            except ValueError as e:
                raise InputError(part[0].ref, str(e)) from None
            if job is not None:
                raw.append(job)
    if not raw and not notes:
        raise InputError(", ".join(map(str, paths)), "no pods in the dumps")
    return finish(raw, latest if now_s is None else now_s, notes)
