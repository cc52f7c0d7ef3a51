"""What the Kubernetes driver keeps of one pod (:class:`PodRecord`) and of one reservation the
defragmentation controller made (:class:`Reservation`)."""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.k8s.requests import PodRequest
from gpudefrag.model.cluster import Placement

__all__ = ["FINISHED", "PodRecord", "Reservation", "pod_key"]

FINISHED = ("Succeeded", "Failed")


@dataclass
class PodRecord:
    """What the cache knows of one pod (keyed by UID)."""

    uid: str
    key: str
    pod_id: int
    obj: dict
    request: PodRequest | None
    error: str | None
    node: str | None
    phase: str
    deleting: bool
    gated: bool
    ours: bool
    placement: Placement | None = None
    counted_on: str | None = None
    assumed: bool = False

    @property
    def pod_group(self) -> str | None:
        return self.request.pod_group if self.request is not None else None


@dataclass
class Reservation:
    """A node held by the defragmentation controller for one pending pod (node annotations)."""

    node: str
    pod_key: str
    until_s: float
    plan: str = ""


def pod_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
