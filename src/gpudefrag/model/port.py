"""The port of the decision core: what a decision reads from a cluster and what it returns.

The scheduler and the defragmentation controller see a cluster only through these types, so
the same decision code runs in the simulator (:mod:`gpudefrag.sim`) and behind a real API
server.  A driver implements the read side and executes the returned actions.

**Read side.**

* :class:`SchedulingCycle` (one scheduling cycle): the time, a snapshot of the state to
  decide on (nodes the cycle must not use are masked; the driver's, which a scheduler may bind
  on while it decides but must leave as it found it), the pods to place now
  in queue order, the pods known not to fit now (*blocked*) in queue order, and the pods
  running on a node (what a scheduler that weighs how long nodes stay busy reads).
* :class:`ClusterPort` (what a controller reads): the time, a state snapshot, every pending
  pod in queue order (with whether it is blocked), the running pods with what the cluster
  knows of them, and the reservations (node -> pod).

A running pod (:class:`RunningPod`) carries only what a cluster knows: where it runs, when it
first started, its declared checkpoint interval, how much run time it has banked and the run
time at its last checkpoint (what a checkpointing job reports as its progress).  Its run time is not known: a decision that needs it asks a
:class:`RuntimeEstimator` (history-based by default; an oracle only in experiments).

**Actions** (values; the driver validates each before executing it):

* :class:`Bind` -- start a pending pod on a node and GPUs.
* :class:`Move` -- migrate a running pod to a node and GPUs (see
  :class:`~gpudefrag.model.migration.MigrationModel`).
* :class:`Reserve` -- hold a node for a pending pod while it is being freed.  It applies to
  the :class:`Move` actions that follow it: it is checked with the first of them and made once
  that move has started; if a move of its group fails, the rest of the list is dropped and
  the reservations made by the list are released.
* :class:`Release` -- end a reservation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol, cast

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec


class PendingPod(NamedTuple):
    """A pod waiting to be scheduled (``now_s - arrival_s`` is its age)."""

    pod_id: int
    spec: PodSpec
    arrival_s: float
    priority: int
    blocked: bool
    """True when it did not fit at its last try and nothing it fits has been freed since."""
    excluded_nodes: frozenset[int] = frozenset()
    """Nodes this pod may not use (a driver's node selectors, affinity, taints, unusable
    nodes); a defragmenter neither frees them for it nor counts their room."""


class RunningPod(NamedTuple):
    """A running pod as the cluster knows it at the port's ``now_s``.

    ``start_s``: when it first started (its age counts from here).  Progress is measured in the
    pod's own run time: ``run_time_s`` is the work it has banked (run time since its first
    start, less the work it lost to restarts), ``last_checkpoint_run_s`` the run time at its
    last checkpoint (0 if it has none: a restart would begin from scratch).  ``migrating``: a
    move of it is under way.
    """

    pod_id: int
    spec: PodSpec
    node: int
    gpus: tuple[int, ...]
    start_s: float
    checkpoint_interval_s: float
    run_time_s: float
    last_checkpoint_run_s: float
    do_not_disrupt: bool
    migrating: bool
    excluded_nodes: frozenset[int] = frozenset()
    """Nodes this pod may not be moved to (its node selectors, affinity and taints)."""

    @property
    def work_since_checkpoint_s(self) -> float:
        """Run time a stop now would lose: what it ran since its last checkpoint."""
        return self.run_time_s - self.last_checkpoint_run_s


class Bind(NamedTuple):
    pod_id: int
    placement: Placement


class Move(NamedTuple):
    pod_id: int
    to_node: int
    to_gpus: tuple[int, ...]


class Reserve(NamedTuple):
    node: int
    pod_id: int


class Release(NamedTuple):
    node: int


Action = Bind | Move | Reserve | Release


class SchedulingCycle(Protocol):
    """What a scheduler reads in one cycle (module docstring)."""

    @property
    def now_s(self) -> float: ...

    @property
    def state(self) -> ClusterState: ...

    @property
    def pending(self) -> Sequence[PendingPod]: ...

    @property
    def blocked(self) -> Sequence[PendingPod]: ...

    def running_on(self, node: int) -> Sequence[RunningPod]:
        """The pods running on ``node`` (as :attr:`ClusterPort.running` shows them)."""
        ...


class ClusterPort(Protocol):
    """What a controller reads (module docstring)."""

    @property
    def now_s(self) -> float: ...

    def snapshot(self) -> ClusterState:
        """A private copy of the state, which the caller may change."""
        ...

    @property
    def pending(self) -> Sequence[PendingPod]: ...

    @property
    def running(self) -> Sequence[RunningPod]: ...

    @property
    def reservations(self) -> Mapping[int, int]: ...


class RuntimeEstimator(Protocol):
    """Run-time knowledge, made explicit."""

    def remaining_s(self, pod: RunningPod, now_s: float) -> float:
        """Expected further run time of a running pod."""
        ...

    def remaining_all_s(self, pods: Sequence[RunningPod], now_s: float) -> npt.NDArray[np.float64]:
        """``remaining_s`` of every pod of ``pods``, in order (one call for a whole tick)."""
        ...

    def expected_s(self, pod: PendingPod) -> float:
        """Expected run time of a pod that has not started."""
        ...

    def remaining_quantiles_s(
        self, pods: Sequence[RunningPod], now_s: float, levels: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """``out[i, k]``: the ``levels[i, k]``-quantile (levels in (0, 1)) of the further run
        time of ``pods[i]``; one row per pod, shaped like ``levels``."""
        ...


class SchedulingDecision(NamedTuple):
    """A scheduler's answer for one cycle: binds for some of the first ``considered`` pods of
    ``cycle.pending`` (in that order), and the work it took: ``deterministic_s`` a
    machine-independent measure (0 when there is none; the simulator's latency model may use
    it), ``wall_s`` the wall-clock seconds (diagnostic only: a reproducible run never uses it)."""

    binds: list[Bind]
    considered: int
    wall_s: float
    deterministic_s: float


class Scheduler(Protocol):
    """Decides a cycle without changing ``cycle.state`` (it may bind on it while deciding, if
    it unbinds all before it returns)."""

    name: str

    def decide(self, cycle: SchedulingCycle) -> SchedulingDecision: ...

    def reset(self) -> None:
        """Forget per-run memory; called when a run starts."""
        ...


class IndexingScheduler(Protocol):
    """A scheduler that can keep an incremental index of one long-lived state that its cycles
    are given again and again (the simulator's own state, the Kubernetes cache's decision
    view): ``attach(state)`` before a cycle on it, and decisions on that state cost what changed
    since the last cycle instead of a scan of every node (the same decisions).  Optional: a
    driver asks :func:`indexing` whether a scheduler has it."""

    def attach(self, state: ClusterState) -> None: ...


def indexing(scheduler: Scheduler) -> IndexingScheduler | None:
    """``scheduler`` when it keeps an index (it has ``attach``), else ``None``; a plain attribute
    test, cheaper than ``isinstance`` on a protocol, for a driver to ask once per cycle."""
    return cast(IndexingScheduler, scheduler) if callable(getattr(scheduler, "attach", None)) else None


class Defragmenter(Protocol):
    def plan(self, cluster: ClusterPort) -> list[Action]: ...
