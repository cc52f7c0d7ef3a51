"""Node taints and pod tolerations (Kubernetes' rules, for the effects that keep pods off a node).

A node's ``spec.taints`` with effect ``NoSchedule`` or ``NoExecute`` keep every pod that does not
tolerate them off the node (``PreferNoSchedule`` is a preference and is ignored).  A toleration
tolerates a taint when its ``effect`` is empty or equal, and either its ``operator`` is
``Exists`` and its ``key`` is empty (everything) or equal, or its operator is ``Equal`` (the
default) with an equal ``key`` and ``value``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Taint = tuple[str, str, str]
"""``(key, value, effect)``."""

BLOCKING = ("NoSchedule", "NoExecute")


def node_taints(spec: Mapping[str, Any]) -> tuple[Taint, ...]:
    """The taints of a Node's ``spec`` that keep pods off it."""
    out = []
    for t in spec.get("taints") or []:
        if isinstance(t, dict) and t.get("effect") in BLOCKING:
            out.append((str(t.get("key") or ""), str(t.get("value") or ""), str(t["effect"])))
    return tuple(out)


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """The module docstring's rule for one toleration and one taint."""
    key, value, effect = taint
    if toleration.get("effect") not in (None, "", effect):
        return False
    t_key = toleration.get("key") or ""
    if toleration.get("operator") == "Exists":
        return t_key in ("", key)
    return t_key == key and (toleration.get("value") or "") == value


def tolerates_all(tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Taint]) -> bool:
    """Every taint is tolerated by at least one toleration."""
    return all(any(tolerates(t, taint) for t in tolerations) for taint in taints)
