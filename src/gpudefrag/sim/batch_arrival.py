"""Arrival-only simulation with batches: the next ``batch_size`` arrivals are decided jointly.

Same protocol as :mod:`gpudefrag.sim.arrival` otherwise: a pod the decision leaves unplaced is
dropped for good; one metrics row per pod, in arrival order, after its batch is bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from gpudefrag.batch.placer import BatchPlacer, BatchStats
from gpudefrag.frag.tracker import FragTracker
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.pods import PodBatch
from gpudefrag.sim.arrival import ArrivalResult


def run_batched(state: ClusterState, arrivals: PodBatch, placer: BatchPlacer, batch_size: int,
                frag: FragTracker | None = None,
                on_progress: Callable[[int], None] | None = None) -> tuple[ArrivalResult, list[BatchStats]]:
    """Replay ``arrivals`` in consecutive batches; returns per-pod results and per-batch stats."""
    n = len(arrivals)
    node_of = np.full(n, -1, dtype=np.int64)
    gpu_mask = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    arrived = np.cumsum(arrivals.total_gpu_milli)
    frag_milli = np.zeros(n, dtype=np.float64) if frag is not None else None
    if frag is not None:
        frag.refresh(state)
    stats: list[BatchStats] = []
    started = time.perf_counter()
    for lo in range(0, n, batch_size):
        hi = min(lo + batch_size, n)
        pods = [arrivals.pod(i) for i in range(lo, hi)]
        decision = placer.place(state, pods)
        stats.append(decision.stats)
        for offset, placement in enumerate(decision.placements):
            i = lo + offset
            if placement is not None:
                state.bind(placement)
                node_of[i] = placement.node
                gpu_mask[i] = sum(1 << g for g in placement.gpus)
                if frag is not None:
                    frag.update(state, placement.node)
            used[i] = state.used_gpu_milli
            if frag is not None:
                frag_milli[i] = frag.total_milli
        if on_progress is not None:
            on_progress(hi - lo)
    return ArrivalResult(node_of, gpu_mask, used, arrived, frag_milli, time.perf_counter() - started), stats
