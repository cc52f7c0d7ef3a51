"""A pod's node selection by labels: ``spec.nodeSelector`` and the required node affinity
(``spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``), with
Kubernetes' rules: every ``nodeSelector`` label must be equal; of the ``nodeSelectorTerms`` at
least one must hold, and a term holds when all its ``matchExpressions`` do (``In``, ``NotIn``,
``Exists``, ``DoesNotExist``, ``Gt``, ``Lt`` on the node's labels).  ``matchFields`` and the
preferred affinity are not used."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def selects_every_node(pod_spec: Mapping[str, Any]) -> bool:
    """Whether the pod has no node selector and no required node affinity (every node's labels
    satisfy it: :func:`selects` is true whatever the labels)."""
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return not pod_spec.get("nodeSelector") and not required.get("nodeSelectorTerms")


def selects(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a node with ``labels`` satisfies the pod's node selector and required affinity."""
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(k) != str(v):
            return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(all(_expression(e, labels) for e in term.get("matchExpressions") or []) for term in terms)
