"""PodDisruptionBudgets on the fake store: which budget guards an eviction, the budget maths
(as the disruption controller computes a PDB's status) and the 429 an exhausted budget gives."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

from gpudefrag_fakecluster.api import TERMINATED_PHASES, ApiError
from gpudefrag_fakecluster.selectors import label_selector_matches


class Budget(NamedTuple):
    expected_pods: int  # matching pods not terminated
    current_healthy: int  # matching pods Running, Ready=True, not being deleted
    desired_healthy: int

    @property
    def allowed(self) -> int:
        return self.current_healthy - self.desired_healthy

    def status(self, evicting: bool = False) -> dict[str, int]:
        """The PDB's status; ``evicting``: one disruption is being spent now."""
        return {
            "disruptionsAllowed": max(0, self.allowed - int(evicting)),
            "currentHealthy": self.current_healthy,
            "desiredHealthy": self.desired_healthy,
            "expectedPods": self.expected_pods,
        }


def _scaled(value: int | str, total: int) -> int:
    """An IntOrString against ``total``: ``"N%"`` -> ceil(N % of total), else the integer."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _healthy(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp")


def budget_of(pdb: dict[str, Any], pods: list[dict[str, Any]]) -> Budget:
    """The budget of ``pdb`` over ``pods`` (its namespace's): desired healthy = minAvailable, or
    expected - maxUnavailable (percentages of the expected pods, rounded up); neither: 0."""
    spec = pdb.get("spec") or {}
    matching = [p for p in pods if label_selector_matches(spec.get("selector"), p["metadata"].get("labels"))]
    expected = sum((p.get("status") or {}).get("phase") not in TERMINATED_PHASES for p in matching)
    healthy = sum(_healthy(p) for p in matching)
    desired = 0
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    return Budget(expected, healthy, desired)


def exempt(pod: dict[str, Any]) -> bool:
    """Evicted without a budget check: not bound, Pending, terminated or being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    unbound = not (pod.get("spec") or {}).get("nodeName")
    return (
        unbound or phase in ("Pending", *TERMINATED_PHASES) or bool(pod["metadata"].get("deletionTimestamp"))
    )


def guarding_budget(pod: dict[str, Any], pdbs: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The one PDB among ``pdbs`` (any namespace) whose selector matches ``pod`` in its
    namespace, or ``None`` (none, or the pod is :func:`exempt`).  500 InternalError when more
    than one matches, as the eviction subresource answers."""
    if exempt(pod):
        return None
    ns, labels = pod["metadata"]["namespace"], pod["metadata"].get("labels")
    matching = [
        pdb
        for pdb in pdbs
        if pdb["metadata"].get("namespace") == ns
        and label_selector_matches((pdb.get("spec") or {}).get("selector"), labels)
    ]
    if len(matching) > 1:
        msg = (
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
        raise ApiError(500, "InternalError", msg)
    return matching[0] if matching else None


def refusal(pdb: dict[str, Any], budget: Budget) -> ApiError:
    """429 TooManyRequests: evicting would take ``pdb`` below its desired healthy pods."""
    cause = (
        f"The disruption budget {pdb['metadata']['name']} needs {budget.desired_healthy} healthy pods "
        f"and has {budget.current_healthy} currently"
    )
    msg = "Cannot evict pod as it would violate the pod's disruption budget."
    return ApiError(
        429, "TooManyRequests", msg, {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    )
