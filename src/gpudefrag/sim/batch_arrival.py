"""Arrival-only simulation with batches: the next ``batch_size`` arrivals are decided jointly.

Same protocol as :mod:`gpudefrag.sim.arrival` otherwise: a pod the decision leaves unplaced is
dropped for good; one metrics row per pod, in arrival order, after its batch is bound.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.stats import BatchStats
from gpudefrag.frag.tracker import FragTracker
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.pods import PodBatch
from gpudefrag.sim.arrival import ArrivalRecorder, ArrivalResult


def run_batched(
    state: ClusterState,
    arrivals: PodBatch,
    placer: BatchPlacer,
    batch_size: int,
    frag: FragTracker | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[ArrivalResult, list[BatchStats]]:
    """Replay ``arrivals`` in consecutive batches; returns per-pod results and per-batch stats."""
    rec = ArrivalRecorder(state, arrivals, frag)
    stats: list[BatchStats] = []
    for lo in range(0, len(arrivals), batch_size):
        hi = min(lo + batch_size, len(arrivals))
        decision = placer.place(state, [arrivals.pod(i) for i in range(lo, hi)])
        stats.append(decision.stats)
        for offset, placement in enumerate(decision.placements):
            rec.record(lo + offset, placement)
        if on_progress is not None:
            on_progress(hi - lo)
    return rec.result(), stats
