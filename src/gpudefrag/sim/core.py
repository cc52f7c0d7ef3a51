"""The shared core of one time-driven run: the components that own its state, wired together,
and the few services every handler needs.

Each component owns one piece of state: the event engine and log, the typed counters, the
pods' lifecycle (:mod:`~gpudefrag.sim.lifecycle`), the ledger (:mod:`~gpudefrag.sim.ledger`,
the only path to bind and unbind), the wait queue (:mod:`~gpudefrag.sim.waitqueue`) and the
reservations (:mod:`~gpudefrag.sim.reservations`).  The core adds the running pods
(:mod:`~gpudefrag.sim.running`), the pods' specs and timings, and :meth:`SimCore.start_pod`,
the one way a pending pod starts.  Resources freed by an unbind or an ended reservation wake
the parked pods that now fit (``WaitQueue.freed``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import PendingPod
from gpudefrag.sim.config import TimedConfig
from gpudefrag.sim.counters import Counters
from gpudefrag.sim.engine import EventLog, EventQueue
from gpudefrag.sim.events import COMPLETION, Touched
from gpudefrag.sim.ledger import Ledger
from gpudefrag.sim.lifecycle import RUNNING, Lifecycle
from gpudefrag.sim.reservations import Reservations
from gpudefrag.sim.running import RunRecord
from gpudefrag.sim.waitqueue import WaitQueue
from gpudefrag.workloads.synthetic import SyntheticWorkload


class SimCore:
    def __init__(self, cluster: ClusterState, workload: SyntheticWorkload, config: TimedConfig) -> None:
        self.config, self.workload = config, workload
        self.n_pods = n = len(workload)
        self.touched = Touched()
        self.events, self.log = EventQueue(), EventLog()
        self.counters = Counters()
        self.lifecycle = Lifecycle(n, self.touched)
        self.ledger = Ledger(cluster, self.touched)
        self.waitq = WaitQueue(self.ledger.state, workload.priority.tolist(), self.touched)
        self.reservations = Reservations(config.reservation_timeout_s)
        self.ledger.on_freed = self.waitq.freed
        self.reservations.on_ended = self.waitq.freed  # unmasked for everybody else
        self.running: dict[int, RunRecord] = {}
        self.on_node: list[dict[int, None]] = [{} for _ in range(self.ledger.state.num_nodes)]
        """The running pods by the node of their placement (the target once a move started),
        in the order they came there; kept by :meth:`run_on` and :meth:`leave`."""
        self.specs: list[PodSpec] = []
        self.as_pending: list[tuple[PendingPod, PendingPod]] = []
        """Each arrived pod as the port shows it while it waits: (active, blocked)."""
        # per-pod columns of the workload the port reads, as Python lists (scalar reads are
        # cheaper from lists than from numpy arrays)
        self.checkpoint_interval_s: list[float] = workload.checkpoint_interval_s.tolist()
        self.checkpoint_phase_s: list[float] = workload.checkpoint_phase_s.tolist()
        self.do_not_disrupt: list[bool] = workload.do_not_disrupt.tolist()
        self.first_bind: npt.NDArray[np.float64] = np.full(n, np.nan)
        self.first_node: npt.NDArray[np.int64] = np.full(n, -1, dtype=np.int64)
        self.completion: npt.NDArray[np.float64] = np.full(n, np.nan)
        self._next_id = 0

    def arrive(self, pod: int, spec: PodSpec) -> None:
        """Record pod ``pod`` (arrivals come in index order) and its views for the port."""
        arrival_s, priority = float(self.workload.arrival_s[pod]), int(self.workload.priority[pod])
        self.specs.append(spec)
        self.as_pending.append(
            (
                PendingPod(pod, spec, arrival_s, priority, False),
                PendingPod(pod, spec, arrival_s, priority, True),
            )
        )

    def run_on(self, pod: int, node: int) -> None:
        """Record that running ``pod``'s placement is now on ``node``."""
        self.on_node[node][pod] = None

    def leave(self, pod: int, node: int) -> None:
        """Record that running ``pod``'s placement is no longer on ``node``."""
        del self.on_node[node][pod]

    def new_id(self) -> int:
        """A fresh id for a session, a move or a reservation (one counter for all three)."""
        self._next_id += 1
        return self._next_id

    def in_window(self, t: float) -> bool:
        return t >= self.workload.warmup_s

    def fits(self, p: Placement) -> bool:
        return self.ledger.state.why_not_fits(p.node, p.pod, p.gpus) is None

    def start_pod(self, pod: int, p: Placement, t: float) -> tuple[int, int, int]:
        """Bind pending ``pod`` at ``p``; its completion is due after its run time.  Returns the
        logged ``(pod, node, GPU mask)``."""
        self.ledger.bind(p)
        self.waitq.remove(pod)
        self.lifecycle.move(pod, RUNNING)
        self.first_bind[pod] = t
        self.first_node[pod] = p.node
        self.running[pod] = RunRecord(p, t)
        self.run_on(pod, p.node)
        self.events.push(t + float(self.workload.duration_s[pod]), COMPLETION, (pod, 0))
        node = self.reservations.node_of_pod.get(pod)
        if node is not None:  # the room freed for it was used, or it started elsewhere first
            self.reservations.end(node, "fulfilled" if node == p.node else "bound_elsewhere", t, p.node)
        return (pod, p.node, sum(1 << g for g in p.gpus))
