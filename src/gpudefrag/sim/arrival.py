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
from gpudefrag.model.cluster import ClusterState
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


def run_arrivals(state: ClusterState, arrivals: PodBatch, policy: Policy,
                 frag: FragTracker | None = None,
                 on_progress: Callable[[int], None] | None = None) -> ArrivalResult:
    """Replay ``arrivals`` on ``state`` (mutated) with ``policy``; see the module docstring."""
    n = len(arrivals)
    node_of = np.full(n, -1, dtype=np.int64)
    gpu_mask = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    arrived = np.cumsum(arrivals.total_gpu_milli)
    frag_milli = np.zeros(n, dtype=np.float64) if frag is not None else None
    if frag is not None:
        frag.refresh(state)
    started = time.perf_counter()
    for i in range(n):
        pod = arrivals.pod(i)
        placement = policy.select(state, pod)
        if placement is not None:
            state.bind(placement)
            node_of[i] = placement.node
            mask = 0
            for g in placement.gpus:
                mask |= 1 << g
            gpu_mask[i] = mask
            if frag is not None:
                frag.update(state, placement.node)
        used[i] = state.used_gpu_milli
        if frag is not None:
            frag_milli[i] = frag.total_milli
        if on_progress is not None and (i + 1) % 1000 == 0:
            on_progress(1000)
    if on_progress is not None and n % 1000:
        on_progress(n % 1000)
    return ArrivalResult(node_of, gpu_mask, used, arrived, frag_milli, time.perf_counter() - started)
