"""Configuration of one time-driven run (:class:`gpudefrag.sim.timed.Simulator`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudefrag.model.migration import MigrationModel
from gpudefrag.sim.latency import LatencyModel


@dataclass(frozen=True)
class TimedConfig:
    """Knobs of :func:`gpudefrag.sim.timed.run_timed` (times in seconds)."""

    migration: MigrationModel = field(default_factory=MigrationModel)
    latency: LatencyModel = field(default_factory=LatencyModel)
    reservation_timeout_s: float = 600.0
    park_unschedulable: bool = True
    hold_reserved_pods: bool = False
    """A pod whose room is being freed (it holds a reservation) is not offered to the scheduler
    elsewhere: it waits for its reserved node (at most the eviction grace period, unless a move
    fails).  Off: it may start wherever the scheduler finds room first."""
    stranded_wait_s: float = 3600.0
    check_invariants: bool = True
    full_check_every: int = 1000
