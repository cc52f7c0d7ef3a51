"""The simulator's side of the decision port (:mod:`gpudefrag.model.port`).

:class:`SessionCycle` is what the scheduler reads in one session; :class:`ClusterView` is what
the defragmenter reads after a session; :class:`TrueRuntimes` is the oracle run-time
estimator (each pod's true remaining run time), for experiments only.  Lists the reader may
not need are built on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.migration import last_checkpoint_work_s
from gpudefrag.model.port import PendingPod, RunningPod
from gpudefrag.sim.core import SimCore
from gpudefrag.sim.running import RUN


def _pending(core: SimCore, pods: list[int]) -> list[PendingPod]:
    parked, views = core.waitq.parked_of, core.as_pending
    return [views[i][i in parked] for i in pods]


def _running(core: SimCore, now_s: float, ids: list[int]) -> list[RunningPod]:
    """The running pods ``ids`` as the port shows them at ``now_s``."""
    running, intervals, phases, keep = (
        core.running,
        core.checkpoint_interval_s,
        core.checkpoint_phase_s,
        core.do_not_disrupt,
    )
    out = []
    for i in ids:
        r = running[i]
        done = r.work_done(now_s)
        p = r.placement
        interval = intervals[i]
        out.append(
            RunningPod(
                i,
                p.pod,
                p.node,
                p.gpus,
                r.start_s,
                interval,
                done,
                last_checkpoint_work_s(done, interval, phases[i]),
                keep[i],
                r.phase != RUN,
            )
        )
    return out


class SessionCycle:
    """One session: the masked snapshot, the offered pods and the parked ones, in queue order,
    and the pods running on each node."""

    def __init__(self, core: SimCore, now_s: float, state: ClusterState, offered: list[int]) -> None:
        self._core = core
        self.now_s = now_s
        self.state = state
        active = core.as_pending
        self.pending = [active[i][0] for i in offered]  # offered pods are never parked
        self._blocked: list[PendingPod] | None = None

    @property
    def blocked(self) -> list[PendingPod]:
        if self._blocked is None:  # built on first use: most schedulers never ask
            waitq = self._core.waitq
            self._blocked = _pending(self._core, waitq.in_order(waitq.parked_of))
        return self._blocked

    def running_on(self, node: int) -> list[RunningPod]:
        return _running(self._core, self.now_s, list(self._core.on_node[node]))


class ClusterView:
    """The cluster as a controller reads it at ``now_s``."""

    def __init__(self, core: SimCore, now_s: float) -> None:
        self._core = core
        self.now_s = now_s
        self.reservations: dict[int, int] = {n: r.pod for n, r in core.reservations.by_node.items()}

    def snapshot(self) -> ClusterState:
        return self._core.ledger.state.copy()

    @cached_property
    def pending(self) -> list[PendingPod]:
        waitq = self._core.waitq
        return _pending(self._core, waitq.in_order(waitq.active | waitq.parked_of.keys()))

    @cached_property
    def running(self) -> list[RunningPod]:
        return _running(self._core, self.now_s, list(self._core.running))


class TrueRuntimes:
    """The oracle: each pod's true run time (a pending pod) and true remaining run time."""

    def __init__(self, core: SimCore) -> None:
        self._core = core

    def remaining_s(self, pod: RunningPod, now_s: float) -> float:
        core = self._core
        return float(core.workload.duration_s[pod.pod_id]) - core.running[pod.pod_id].work_done(now_s)

    def remaining_all_s(self, pods: Sequence[RunningPod], now_s: float) -> npt.NDArray[np.float64]:
        return np.asarray([self.remaining_s(p, now_s) for p in pods], dtype=np.float64)

    def expected_s(self, pod: PendingPod) -> float:
        return float(self._core.workload.duration_s[pod.pod_id])

    def remaining_quantiles_s(
        self, pods: Sequence[RunningPod], now_s: float, levels: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64]:
        """Every quantile is the true remaining run time."""
        rem = np.asarray([self.remaining_s(p, now_s) for p in pods], dtype=np.float64)
        return np.broadcast_to(rem[:, None], np.shape(levels)).copy()
