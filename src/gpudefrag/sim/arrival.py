"""Arrival-only simulation, FGD's protocol (spec §2.3 step 10, §3.1).

Pods arrive one at a time and never leave.  Each is placed where the policy says, or dropped
for good when it fits nowhere; a dropped pod still counts toward the arrived GPU request.
After every arrival we record the allocated GPU milli, the arrived GPU milli and (optionally)
the cluster's fragmentation amount, one row per pod, as the reference's ``[Alloc]`` and
``[Report]`` log lines do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpudefrag.frag.tracker import FragTracker
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodBatch
from gpudefrag.policies.base import Policy


@dataclass(frozen=True)
class ArrivalResult:
    """Per-pod outcome and metrics, in arrival order.

    ``node[i]`` is the node index pod ``i`` went to (-1: dropped); ``gpu_mask[i]`` has bit ``g`` set
    for every GPU it uses.  ``used_gpu_milli``, ``arrived_gpu_milli`` and ``frag_milli`` are the
    values after pod ``i``'s event.
    """

    node: np.ndarray
    gpu_mask: np.ndarray
    used_gpu_milli: np.ndarray
    arrived_gpu_milli: np.ndarray
    frag_milli: np.ndarray | None
    wall_s: float

    @property
    def failed(self) -> int:
        return int((self.node < 0).sum())


class ArrivalRecorder:
    """Collects the per-pod rows of an arrival replay (node, GPUs, allocation, fragmentation)."""

    def __init__(self, state: ClusterState, arrivals: PodBatch, frag: FragTracker | None) -> None:
        n = len(arrivals)
        self.state, self.frag = state, frag
        self.node = np.full(n, -1, dtype=np.int64)
        self.gpu_mask = np.zeros(n, dtype=np.int64)
        self.used = np.zeros(n, dtype=np.int64)
        self.arrived = np.cumsum(arrivals.total_gpu_milli)
        self.frag_milli = np.zeros(n, dtype=np.float64) if frag is not None else None
        if frag is not None:
            frag.refresh(state)
        self.started = time.perf_counter()

    def record(self, i: int, placement: Placement | None) -> None:
        """Bind pod ``i``'s placement (if any) and record the row after its event."""
        if placement is not None:
            self.state.bind(placement)
            self.node[i] = placement.node
            self.gpu_mask[i] = sum(1 << g for g in placement.gpus)
            if self.frag is not None:
                self.frag.update(self.state, placement.node)
        self.used[i] = self.state.used_gpu_milli
        if self.frag_milli is not None and self.frag is not None:
            self.frag_milli[i] = self.frag.total_milli

    def result(self) -> ArrivalResult:
        return ArrivalResult(
            self.node,
            self.gpu_mask,
            self.used,
            self.arrived,
            self.frag_milli,
            time.perf_counter() - self.started,
        )


def run_arrivals(
    state: ClusterState,
    arrivals: PodBatch,
    policy: Policy,
    frag: FragTracker | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> ArrivalResult:
    """Replay ``arrivals`` on ``state`` (mutated) with ``policy``; see the module docstring."""
    rec = ArrivalRecorder(state, arrivals, frag)
    policy.attach(state)
    n = len(arrivals)
    for i in range(n):
        rec.record(i, policy.select(state, arrivals.pod(i)))
        if on_progress is not None and (i + 1) % 1000 == 0:
            on_progress(1000)
    if on_progress is not None and n % 1000:
        on_progress(n % 1000)
    return rec.result()
