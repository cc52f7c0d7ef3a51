"""The result of one time-driven run, and how it is computed (the configuration: :mod:`gpudefrag.sim.config`).

Metrics (:class:`TimedResult`) are taken over the window ``[warmup_s, horizon_s]``.  The GPU
capacity not allocated is split, time-averaged, into *whole free GPUs* (nothing on them) and
the free remainders of *shared GPUs* (partly used), so ``gpu_alloc_pct + gpu_idle_whole_pct +
gpu_idle_shared_pct = 100``.  Allocation counts GPUs that migrations waste (work redone after
an eviction, a restarting pod's GPUs, the source held through the grace period);
``goodput_pct`` is ``gpu_alloc_pct`` less that GPU time, for the moves started in the
window, as a share of the window's capacity.  Waits count window arrivals; a pod still
pending counts ``horizon - arrival``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.sim.core import SimCore
from gpudefrag.sim.lifecycle import PodPhase
from gpudefrag.sim.reservations import PlanRecord

FloatArray = npt.NDArray[np.float64]


@dataclass
class TimedResult:
    """Metrics of one run over the window ``[warmup_s, horizon_s]`` (module docstring)."""

    scheduler: str
    horizon_s: float
    warmup_s: float
    arrived: int
    rejected: int
    completed: int
    running_at_end: int
    pending_at_end: int
    gpu_alloc_pct: float
    gpu_idle_whole_pct: float
    gpu_idle_shared_pct: float
    goodput_pct: float
    wait_p50_s: float
    wait_p95_s: float
    wait_p99_s: float
    waits_counted: int
    eight_gpu_arrived: int  # 8-GPU pods arrived in the window
    stranded_8gpu: int  # ... that waited > stranded_wait_s or are still pending
    sessions: int
    decision_latency_p99_s: float
    bind_conflicts: int
    reservation_filtered: int
    reservations_made: int
    reservations_fulfilled: int  # ended by their pod binding on the reserved node
    reservations_bound_elsewhere: int  # ended by their pod binding on another node first
    reservation_expiries: int
    reservations_released: int  # released because a later move of their plan failed
    migrations_executed: int  # moves started in the window
    migrations_aborted: int  # moves not executed because a move of their plan failed
    plans_aborted: int
    migrations_overtaken: int  # pods that completed during their grace period
    gpu_hours_lost_work: float
    gpu_hours_lost_restart: float
    gpu_hours_held_twice: float  # GPUs held on both nodes during grace periods
    event_hash: str
    events_processed: int
    wall_s: float
    abort_reasons: dict[str, int] = field(default_factory=dict)
    first_bind_s: FloatArray | None = None
    first_node: npt.NDArray[np.int64] | None = None
    completion_s: FloatArray | None = None
    end_status: npt.NDArray[np.int8] | None = None
    final_state: ClusterState | None = None
    plans: tuple[PlanRecord, ...] = ()  # every executed plan's reservation, in the order made

    @property
    def gpu_hours_lost(self) -> float:
        return self.gpu_hours_lost_work + self.gpu_hours_lost_restart


def percentile(values: npt.ArrayLike, q: float) -> float:
    arr = np.asarray(values)
    return float(np.percentile(arr, q)) if len(arr) else 0.0


def build_result(
    core: SimCore,
    scheduler: str,
    latencies_s: list[float],
    area: float,
    whole_area: float,
    span: float,
    wall: float,
) -> TimedResult:
    """The result of a finished run: ``area`` and ``whole_area`` are the window's allocated and
    wholly free GPU milli x seconds, ``span`` its length."""
    w, st, count = core.workload, core.lifecycle.phase, core.lifecycle.count
    H, W = float(w.horizon_s), float(w.warmup_s)
    window = (w.arrival_s >= W) & (w.arrival_s <= H) & (st != PodPhase.FUTURE) & (st != PodPhase.REJECTED)
    bound = ~np.isnan(core.first_bind)
    wait = np.where(bound, core.first_bind - w.arrival_s, H - w.arrival_s)
    waits = wait[window]
    eight = window & (w.pods.num_gpu == 8)
    stranded = eight & ((wait > core.config.stranded_wait_s) | (st == PodPhase.PENDING))
    window_milli_s = span * core.ledger.state.gpu_capacity_milli

    def pct(milli_s: float) -> float:  # share of the window's GPU capacity
        return 100.0 * milli_s / window_milli_s if window_milli_s > 0 else 0.0

    c = core.counters
    plans = tuple(core.reservations.log)
    ended = Counter(r.outcome for r in plans)
    alloc_pct = pct(area)
    return TimedResult(
        scheduler=scheduler, horizon_s=H, warmup_s=W, arrived=int(sum(count[1:])),
        rejected=count[PodPhase.REJECTED], completed=count[PodPhase.COMPLETED],
        running_at_end=count[PodPhase.RUNNING], pending_at_end=count[PodPhase.PENDING],
        gpu_alloc_pct=alloc_pct, gpu_idle_whole_pct=pct(whole_area),
        gpu_idle_shared_pct=pct(window_milli_s - area - whole_area),
        goodput_pct=alloc_pct - pct(3600.0 * GPU_MILLI_PER_GPU * c.gpu_hours_wasted),
        wait_p50_s=percentile(waits, 50), wait_p95_s=percentile(waits, 95), wait_p99_s=percentile(waits, 99),
        waits_counted=int(window.sum()), eight_gpu_arrived=int(eight.sum()), stranded_8gpu=int(stranded.sum()),
        sessions=c.sessions, decision_latency_p99_s=percentile(latencies_s, 99),
        bind_conflicts=c.bind_conflicts, reservation_filtered=c.reservation_filtered,
        reservations_made=len(plans), reservations_fulfilled=ended["fulfilled"],
        reservations_bound_elsewhere=ended["bound_elsewhere"],
        reservation_expiries=ended["expired"], reservations_released=ended["released"],
        migrations_executed=c.migrations_executed,
        migrations_aborted=c.migrations_aborted, plans_aborted=c.plans_aborted,
        migrations_overtaken=c.migrations_overtaken, gpu_hours_lost_work=float(c.gpu_hours_lost_work),
        gpu_hours_lost_restart=float(c.gpu_hours_lost_restart), gpu_hours_held_twice=float(c.gpu_hours_held_twice),
        event_hash=core.log.hexdigest(), events_processed=core.log.count, wall_s=wall,
        abort_reasons=dict(c.abort_reasons), first_bind_s=core.first_bind, first_node=core.first_node,
        completion_s=core.completion, end_status=st.copy(), final_state=core.ledger.state,
        plans=plans,
    )  # fmt: skip
