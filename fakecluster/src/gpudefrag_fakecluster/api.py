"""What the fake API server's store, its watches and its HTTP front share: the kinds served,
the API error (a ``Status`` with an HTTP code), and copy/patch helpers for JSON objects."""

from __future__ import annotations

from typing import Any, NamedTuple


class KindInfo(NamedTuple):
    api_version: str
    kind: str
    list_kind: str
    namespaced: bool


KINDS: dict[str, KindInfo] = {
    "nodes": KindInfo("v1", "Node", "NodeList", False),
    "namespaces": KindInfo("v1", "Namespace", "NamespaceList", False),  # not enforced: any namespace works
    "pods": KindInfo("v1", "Pod", "PodList", True),
    "events": KindInfo("v1", "Event", "EventList", True),
    "leases": KindInfo("coordination.k8s.io/v1", "Lease", "LeaseList", True),
    "poddisruptionbudgets": KindInfo("policy/v1", "PodDisruptionBudget", "PodDisruptionBudgetList", True),
    "podgroups": KindInfo("scheduling.x-k8s.io/v1alpha1", "PodGroup", "PodGroupList", True),
}
"""Resource plural -> (apiVersion, kind, listKind, namespaced)."""
STATUS_SUBRESOURCE_KINDS = frozenset({"nodes", "pods", "poddisruptionbudgets", "podgroups"})
"""Kinds whose ``.status`` changes only through ``/status`` (kept on other updates)."""
TERMINATED_PHASES = ("Succeeded", "Failed")
"""Pod phases after which a pod holds nothing and never runs again."""


class ApiError(Exception):
    """An API failure with its HTTP code, reason (``NotFound``, ``Conflict``...) and message."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        """The ``Status`` object the API server answers with."""
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
        out.update(message=self.message, reason=self.reason, code=self.code)
        if self.details is not None:
            out["details"] = self.details
        return out


def not_found(kind: str, name: str) -> ApiError:
    """404 NotFound for the object ``name`` of ``kind``."""
    return ApiError(404, "NotFound", f'{kind} "{name}" not found', {"name": name, "kind": kind})


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386) of ``target`` by ``patch`` as a new value: ``null`` removes a
    key, objects merge recursively, anything else replaces.  ``target`` is left unmodified."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def with_meta(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A new object: ``obj`` with ``changes`` merged into its metadata (the rest shared)."""
    return {**obj, "metadata": {**obj["metadata"], **changes}}
