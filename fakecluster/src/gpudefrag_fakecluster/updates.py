"""The API server's rules for an update (replace or patch) on the fake store: which body may
replace an object, and what of the old object the new version keeps."""

from __future__ import annotations

from typing import Any

from gpudefrag_fakecluster.api import STATUS_SUBRESOURCE_KINDS, ApiError

_KEPT_METADATA = (
    "uid",
    "creationTimestamp",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
"""Metadata an update cannot change (the old object's values are kept)."""


def updated(kind: str, old: dict[str, Any], new: dict[str, Any], sub: str | None) -> dict[str, Any]:
    """The next version of ``old`` from the replacement body ``new`` (``sub="status"``: only its
    ``.status``; other kinds of :data:`STATUS_SUBRESOURCE_KINDS` keep their status otherwise).
    400 BadRequest for another name; 409 Conflict for a stale ``metadata.resourceVersion``; 404
    for an unknown subresource; 422 Invalid when a pod's ``spec.nodeName`` would change."""
    meta, old_meta = new.get("metadata") or {}, old["metadata"]
    name = old_meta["name"]
    if meta.get("name", name) != name:
        raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
    if meta.get("resourceVersion") and meta["resourceVersion"] != old_meta["resourceVersion"]:
        msg = (
            f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        raise ApiError(409, "Conflict", msg, {"name": name, "kind": kind})
    if sub is not None:
        if sub != "status" or kind not in STATUS_SUBRESOURCE_KINDS:
            raise ApiError(404, "NotFound", f"{kind} has no subresource {sub!r}")
        return {**old, "status": new.get("status") or {}}
    out = {**new, "metadata": {**meta, **{k: old_meta[k] for k in _KEPT_METADATA if k in old_meta}}}
    if kind in STATUS_SUBRESOURCE_KINDS:
        out["status"] = old.get("status") or {}
    node_now, node_before = ((o.get("spec") or {}).get("nodeName") or "" for o in (out, old))
    if kind == "pods" and node_now != node_before:
        msg = f'Pod "{name}" is invalid: spec.nodeName: Forbidden: set only through the binding subresource'
        raise ApiError(422, "Invalid", msg)
    return out
