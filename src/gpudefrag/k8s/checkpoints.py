"""What a running pod's object says about its checkpoints and whether it may be moved: one rule
for the controller (:mod:`gpudefrag.k8s.port`) and the what-if planner (:mod:`gpudefrag.k8s.whatif`).

* Run time: since ``status.startTime`` (0 for a pod not started).
* The run time at its last checkpoint: annotation ``gpudefrag.io/last-checkpoint`` (an RFC 3339
  time, counted from the start, at most the run time); without it, for a pod that declares
  ``gpudefrag.io/checkpoint-interval-s`` = c > 0, the last whole interval ``floor(run / c) * c``;
  else 0 (a stop loses everything it ran).
* Never moved: annotated ``gpudefrag.io/do-not-disrupt: "true"``, a gang member, a DaemonSet
  or static pod (it comes back on the same node), without a controller ``ownerReference`` (it
  would not come back), or being deleted.

Malformed annotations raise :class:`~gpudefrag.k8s.requests.ObjectError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpudefrag.k8s import names
from gpudefrag.k8s.gpu_workload import system_pod_reason
from gpudefrag.k8s.requests import ObjectError, PodRequest, parse_time_s, pod_ref


@dataclass(frozen=True)
class CheckpointState:
    start_s: float
    """``status.startTime`` (``now_s`` for a pod not started)."""
    interval_s: float
    """Declared checkpoint interval (0: none)."""
    run_s: float
    last_checkpoint_run_s: float

    @property
    def lost_work_s(self) -> float:
        """Run time a stop now would lose."""
        return self.run_s - self.last_checkpoint_run_s


def _interval_s(obj: Mapping[str, Any], ann: Mapping[str, Any]) -> float:
    text = ann.get(names.CHECKPOINT_INTERVAL_S)
    if text is None:
        return 0.0
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        field = f"annotation '{names.CHECKPOINT_INTERVAL_S}'"
        raise ObjectError(pod_ref(obj), field, f"{text!r} is not a number of seconds >= 0")
    return value


def checkpoint_state(obj: Mapping[str, Any], now_s: float) -> CheckpointState:
    """The module docstring's rule, at ``now_s``."""
    ref = pod_ref(obj)
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    interval_s = _interval_s(obj, ann)
    start = (obj.get("status") or {}).get("startTime")
    start_s = parse_time_s(start, ref, "status.startTime") if start is not None else now_s
    run_s = max(0.0, now_s - start_s)
    last = ann.get(names.LAST_CHECKPOINT)
    if last is not None:
        at_s = parse_time_s(last, ref, f"annotation '{names.LAST_CHECKPOINT}'")
        kept_s = min(run_s, max(0.0, at_s - start_s))
    elif interval_s > 0:
        kept_s = math.floor(run_s / interval_s) * interval_s
    else:
        kept_s = 0.0
    return CheckpointState(start_s, interval_s, run_s, kept_s)


def lost_work_s(obj: Mapping[str, Any], now_s: float) -> float:
    """Run time a stop at ``now_s`` loses (module docstring)."""
    return checkpoint_state(obj, now_s).lost_work_s


def has_controller_owner(obj: Mapping[str, Any]) -> bool:
    """An ``ownerReference`` with ``controller: true`` (something recreates the pod)."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(o, dict) and o.get("controller") is True for o in owners)


def never_moved_reason(obj: Mapping[str, Any], req: PodRequest) -> str | None:
    """Why the pod is never moved (module docstring), or ``None``."""
    meta = obj.get("metadata") or {}
    ann = meta.get("annotations") or {}
    if str(ann.get(names.DO_NOT_DISRUPT, "")).strip().lower() == "true":
        return "do-not-disrupt"
    if req.pod_group:
        return "gang member"
    system = system_pod_reason(obj)
    if system is not None:
        return system
    if not has_controller_owner(obj):
        return "no controller"
    if meta.get("deletionTimestamp"):
        return "being deleted"
    return None
