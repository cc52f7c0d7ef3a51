"""Label and field selectors, as the API server reads them from ``labelSelector`` /
``fieldSelector`` query strings, and the structured ``LabelSelector`` of a PodDisruptionBudget.

Label selector strings: requirements joined by commas (AND); each is ``k=v``, ``k==v``,
``k!=v`` (also true when ``k`` is absent), ``k`` (present), ``!k`` (absent), ``k in (a,b)``
(present with one of the values) or ``k notin (a,b)`` (absent, or none of the values).

Field selector strings: ``path=v``, ``path==v`` or ``path!=v`` joined by commas (AND), on the
paths in :data:`FIELD_PATHS`; a missing field reads as ``""``.

A malformed selector raises :class:`ValueError` (the server answers 400 BadRequest).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

FIELD_PATHS = frozenset(
    {
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.schedulerName",
        "status.phase",
        # Events (the real API server offers these for them; here they work on every kind).
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "involvedObject.uid",
        "reason",
        "type",
    }
)
"""Field paths a field selector may use."""

_KEY = re.compile(r"^([a-z0-9A-Z]([-a-z0-9A-Z_./]*[a-z0-9A-Z])?)$")
_VALUE = re.compile(r"^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?)?$")
_SET_OP = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


class LabelRequirement(NamedTuple):
    """One requirement: ``op`` is ``in``, ``notin``, ``exists`` or ``!exists``."""

    key: str
    op: str
    values: frozenset[str]


class FieldRequirement(NamedTuple):
    """One requirement: ``equal`` says ``=``/``==`` (else ``!=``)."""

    path: str
    equal: bool
    value: str


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, each part stripped; ``""`` -> ``[]``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    if depth != 0:
        raise ValueError(f"unbalanced parentheses in selector {text!r}")
    if parts == [""]:
        return []
    if "" in parts:
        raise ValueError(f"empty requirement in selector {text!r}")
    return parts


def _key(text: str) -> str:
    if not _KEY.match(text):
        raise ValueError(f"invalid label key {text!r}")
    return text


def _value(text: str) -> str:
    if not _VALUE.match(text):
        raise ValueError(f"invalid label value {text!r}")
    return text


def _label_requirement(part: str) -> LabelRequirement:
    m = _SET_OP.match(part)
    if m:
        values = [v.strip() for v in m.group(3).split(",")]
        if values == [""]:
            raise ValueError(f"{m.group(2)} needs at least one value: {part!r}")
        return LabelRequirement(_key(m.group(1)), m.group(2), frozenset(_value(v) for v in values))
    for token, op in (("!=", "notin"), ("==", "in"), ("=", "in")):
        if token in part:
            key, _, value = part.partition(token)
            return LabelRequirement(_key(key.strip()), op, frozenset({_value(value.strip())}))
    if part.startswith("!"):
        return LabelRequirement(_key(part[1:].strip()), "!exists", frozenset())
    return LabelRequirement(_key(part), "exists", frozenset())


def parse_label_selector(text: str | None) -> tuple[LabelRequirement, ...]:
    """The requirements of a label selector string (``None`` or ``""``: none, matches all)."""
    return tuple(_label_requirement(p) for p in _split_top_level(text or ""))


def labels_match(requirements: tuple[LabelRequirement, ...], labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy every requirement."""
    labels = labels or {}
    for key, op, values in requirements:
        present = key in labels
        if op == "in" and not (present and labels[key] in values):
            return False
        if op == "notin" and present and labels[key] in values:
            return False
        if (op == "exists" and not present) or (op == "!exists" and present):
            return False
    return True


def parse_field_selector(text: str | None) -> tuple[FieldRequirement, ...]:
    """The requirements of a field selector string (``None`` or ``""``: none, matches all)."""
    out = []
    for part in _split_top_level(text or ""):
        for token, equal in (("!=", False), ("==", True), ("=", True)):
            if token in part:
                path, _, value = part.partition(token)
                path = path.strip()
                if path not in FIELD_PATHS:
                    raise ValueError(f'field label not supported: "{path}"')
                out.append(FieldRequirement(path, equal, value.strip()))
                break
        else:
            raise ValueError(f"invalid field selector requirement {part!r}")
    return tuple(out)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value at the dotted ``path`` of ``obj`` as a string; ``""`` when missing."""
    node: Any = obj
    for step in path.split("."):
        if not isinstance(node, Mapping) or step not in node:
            return ""
        node = node[step]
    return "" if node is None else str(node)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` satisfies every field requirement."""
    return all((field_value(obj, path) == value) == equal for path, equal, value in requirements)


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether a structured ``LabelSelector`` (``matchLabels`` + ``matchExpressions`` with
    operators In, NotIn, Exists, DoesNotExist) selects ``labels``.  ``None`` selects nothing;
    ``{}`` selects everything (policy/v1 PodDisruptionBudget rules)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
    requirements = []
    for expr in selector.get("matchExpressions") or []:
        if expr.get("operator") not in ops:
            raise ValueError(f"unknown label selector operator {expr.get('operator')!r}")
        values = frozenset(expr.get("values") or ())
        requirements.append(LabelRequirement(expr["key"], ops[expr["operator"]], values))
    return labels_match(tuple(requirements), labels)
