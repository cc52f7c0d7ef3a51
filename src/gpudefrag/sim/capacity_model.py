"""Suite 3's simulator (:mod:`gpudefrag.sim.capacity_sim`): its settings, the events' order, and
what a run returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpudefrag.capacity.elastic_config import ElasticConfig
from gpudefrag.gangs.metrics import Meter
from gpudefrag.model.jobs import Job

__all__ = [
    "ARRIVE",
    "CAUSES",
    "END",
    "FAIL",
    "POWERED",
    "REFUSED",
    "REPAIR",
    "STARTED",
    "TICK",
    "WAITING",
    "WAKE",
    "BoolArray",
    "ElasticConfig",
    "Job3Record",
    "Sim3Config",
    "Sim3Result",
    "Waiting",
]

BoolArray = npt.NDArray[np.bool_]
CAUSES = ("failure", "preemption", "migration")
FAIL, REPAIR, POWERED, ARRIVE, END, TICK, WAKE = 0, 1, 2, 3, 4, 5, 6  # order at equal times
# WAKE: a failed gang's hold ends, or a job waiting for checkpoints asks again: a scheduling pass


STARTED, REFUSED, WAITING = "started", "refused", "waiting"  # what a preemption attempt did


@dataclass(frozen=True, slots=True)
class Waiting:
    """A queued job waiting for its victims' checkpoints: it asks the rule again at
    ``asks_at_s``; its wait ends at ``ends_s``; until ``asks_at_s``, ``victims`` are not offered
    to other jobs below production."""

    asks_at_s: float
    ends_s: float
    victims: frozenset[int]


@dataclass(frozen=True)
class Sim3Config:
    """Window, checkpoints and restarts, spare policy, and safety checks."""

    measure_start_s: float
    measure_end_s: float
    checkpoint_interval_s: float = 1800.0
    restart_s: float = 300.0
    spare_policy: str = "none"
    hold_failed_gang_s: float = 3600.0
    check_every_event: bool = False
    elastic: ElasticConfig | None = None
    standby_nodes: int = 0  # elastic mode: the highest-numbered nodes that start powered off
    checkpoint_wait_s: float = 0.0  # how long a job below production may wait for checkpoints

    def __post_init__(self) -> None:
        if self.standby_nodes < 0 or (self.standby_nodes and self.elastic is None):
            raise ValueError("standby_nodes must be >= 0, and only elastic mode has them")
        if not (0.0 <= self.checkpoint_wait_s < self.checkpoint_interval_s):
            raise ValueError(
                f"checkpoint_wait_s={self.checkpoint_wait_s}: must be >= 0 and below the checkpoint "
                f"interval ({self.checkpoint_interval_s} s)"
            )


@dataclass
class Job3Record:
    """One job submitted inside the window: first start, end, and what happened to it."""

    job: Job
    start_s: float | None = None
    end_s: float | None = None
    kills: int = 0
    moves: int = 0


@dataclass
class Sim3Result:
    records: list[Job3Record]
    meter: Meter
    total_gpus: int  # the capacity shares are measured against: every node but the standby ones
    lost_gpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    restart_gpu_s: float = 0.0
    restart_gpu_s_by_cause: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    failures: int = 0
    jobs_killed_by_failure: int = 0
    restart_times_s: list[tuple[int, float]] = field(default_factory=list)  # (job GPUs, failure -> working)
    restart_censored: int = 0  # of restart_times_s: jobs still not working at the end (end - failure)
    preemptions: int = 0
    preempted_jobs: int = 0
    preemption_waits: int = 0  # plans a blocked job chose to wait for (checkpoint_wait_s)
    moves: int = 0
    spare_evictions: int = 0
    plans_refused: int = 0
    victim_calls_s: list[float] = field(default_factory=list)
    node_s: float = 0.0  # node-seconds powered (on or provisioning) inside the window
    powered_on: int = 0
    powered_off: int = 0
    drains: int = 0
    spare_swaps: int = 0  # nodes given the spare role in place of spares a failed job took
    wall_s: float = 0.0
    event_hash: str = ""
    pending_at_end: int = 0
    running_at_end: int = 0
    completed: int = 0

    @property
    def span_gpu_s(self) -> float:
        return self.meter.span_s * self.total_gpus

    @property
    def allocation(self) -> float:
        return self.meter.alloc_gpu_s / self.span_gpu_s

    @property
    def node_hours(self) -> float:
        return self.node_s / 3600.0

    @property
    def goodput(self) -> float:
        """Useful GPU time as a share of capacity: in use, less lost work and restarts."""
        waste = sum(self.lost_gpu_s.values()) + self.restart_gpu_s
        return (self.meter.alloc_gpu_s - waste) / self.span_gpu_s
