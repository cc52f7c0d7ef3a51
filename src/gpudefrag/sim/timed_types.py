"""Types of the time-driven simulator (:mod:`gpudefrag.sim.timed`): event and pod-status
codes, configuration, the scheduler and defragmenter interfaces and what they exchange, and the
run's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec

if TYPE_CHECKING:
    from gpudefrag.sim.migrations import SimView

# ----------------------------------------------------------------------------- events, states
COMPLETION, EVICT_DONE, RESTART_DONE, RESERVATION_EXPIRY, DECISION_DONE, ARRIVAL, SESSION_START = range(7)
EVENT_NAMES = (
    "COMPLETION",
    "EVICT_DONE",
    "RESTART_DONE",
    "RESERVATION_EXPIRY",
    "DECISION_DONE",
    "ARRIVAL",
    "SESSION_START",
)
FUTURE, PENDING, RUNNING, COMPLETED, REJECTED = range(5)
STATUS_NAMES = ("FUTURE", "PENDING", "RUNNING", "COMPLETED", "REJECTED")


class InvariantError(AssertionError):
    """A simulator invariant failed; the message names the event and the rule."""


# ----------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class LatencyModel:
    """Decision latency of one session: ``base_s + per_pod_s * pods + scale * measured``.

    ``kind`` picks ``measured``: ``"constant"`` -> 0 (the latency is ``base_s + per_pod_s *
    pods``); ``"wall"`` -> the wall-clock seconds the scheduler took (realistic, but runs are
    then not reproducible bit for bit); ``"deterministic"`` -> the solver's machine-independent
    time (BatchPlacer's ``stats.deterministic_s``; 0 for per-pod policies, use ``per_pod_s``).
    """

    kind: str = "constant"
    base_s: float = 0.05
    per_pod_s: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("constant", "wall", "deterministic"):
            raise ValueError(f"unknown latency kind {self.kind!r}; known: constant, wall, deterministic")
        if min(self.base_s, self.per_pod_s, self.scale) < 0:
            raise ValueError("latency parameters must be >= 0")

    @classmethod
    def constant(cls, seconds: float = 0.05) -> LatencyModel:
        return cls("constant", seconds)

    @classmethod
    def wall(cls, scale: float = 1.0, base_s: float = 0.0) -> LatencyModel:
        return cls("wall", base_s, 0.0, scale)

    @classmethod
    def deterministic(cls, scale: float = 1.0, base_s: float = 0.0, per_pod_s: float = 0.0) -> LatencyModel:
        return cls("deterministic", base_s, per_pod_s, scale)

    def latency(self, n_pods: int, wall_s: float, deterministic_s: float) -> float:
        measured = {"constant": 0.0, "wall": wall_s, "deterministic": deterministic_s}[self.kind]
        return self.base_s + self.per_pod_s * n_pods + self.scale * measured


@dataclass(frozen=True)
class TimedConfig:
    """Knobs of :func:`run_timed` (times in seconds)."""

    eviction_grace_s: float = 30.0
    restart_s: float = 60.0
    reservation_timeout_s: float = 600.0
    park_unschedulable: bool = True
    stranded_wait_s: float = 3600.0
    check_invariants: bool = True
    full_check_every: int = 1000


# ----------------------------------------------------------------------------- the hook's types
@dataclass(frozen=True)
class Move:
    """Move running pod ``pod_id`` to ``to_node``/``to_gpus``; optionally reserve
    ``reserve_node`` for the pending pod ``for_pod_id``."""

    pod_id: int
    to_node: int
    to_gpus: tuple[int, ...]
    for_pod_id: int | None = None
    reserve_node: int | None = None


@dataclass(frozen=True)
class PendingPod:
    pod_id: int
    spec: PodSpec
    arrival_s: float
    priority: int
    parked: bool


@dataclass(frozen=True)
class RunningPod:
    """A running pod as the defragmenter sees it (work in seconds of running time)."""

    pod_id: int
    spec: PodSpec
    node: int
    gpus: tuple[int, ...]
    start_s: float
    remaining_work_s: float
    work_since_checkpoint_s: float
    checkpoint_interval_s: float
    checkpoint_phase_s: float
    do_not_disrupt: bool
    migrating: bool


class Scheduler(Protocol):
    """Decides placements (aligned with ``pending``) on ``state`` without changing it, and
    says how long the decision took in simulated seconds.  Optional: ``max_pending`` (the
    simulator offers at most that many pods), ``reset()`` (called at the start of a run) and
    ``wants_blocked`` (when true, ``decide`` also gets ``blocked=``: the parked pods, in queue
    order)."""

    name: str

    def decide(
        self, state: ClusterState, pending: list[PodSpec], now_s: float
    ) -> tuple[list[Placement | None], float]: ...


class Defragmenter(Protocol):
    def plan(self, view: SimView, now_s: float) -> list[Move]: ...


# ----------------------------------------------------------------------------- results
@dataclass
class TimedResult:
    """Metrics of one run over the window ``[warmup_s, horizon_s]`` (see the field notes)."""

    scheduler: str
    horizon_s: float
    warmup_s: float
    arrived: int
    rejected: int
    completed: int
    running_at_end: int
    pending_at_end: int  # every pod still pending at the horizon
    gpu_alloc_pct: float  # time-averaged allocated GPU milli / capacity, in the window
    gpu_idle_whole_pct: float  # ... in GPUs with nothing on them
    gpu_idle_shared_pct: float  # ... free on partly used GPUs (100 - the two above)
    gpu_useful_pct: float  # gpu_alloc_pct less the GPU time migrations wasted (below)
    wait_p50_s: float  # window arrivals; pending ones count horizon - arrival
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
    reservations_fulfilled: int
    reservation_expiries: int
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
    first_bind_s: np.ndarray | None = None
    first_node: np.ndarray | None = None
    completion_s: np.ndarray | None = None
    end_status: np.ndarray | None = None
    final_state: ClusterState | None = None

    @property
    def gpu_hours_lost(self) -> float:
        return self.gpu_hours_lost_work + self.gpu_hours_lost_restart


def percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else 0.0
