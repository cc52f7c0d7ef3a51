"""Time-integrated measures of the job-level simulator, over the measurement window only.

Between two events the state is constant, so each measure is a step function; :meth:`Meter.
advance` adds ``value x overlap`` of the step with the window ``[start_s, end_s)``:

* ``alloc_gpu_s``: GPUs in use (shared GPUs by their used milli);
* ``whole_nodes_s``: nodes with every GPU free;
* ``whole_domains_s[l]``: domains of level l with every node wholly free;
* ``stranded_gpu_s``: free GPUs not on wholly free nodes, counted only while a multi-node gang
  waits (``gang_wait_s`` is that time): room a whole-node gang cannot use;
* the idle GPU time split by what the queue could have used of it (only when the simulator
  passes a :class:`QueueRoom`), the four parts summing to the idle GPU time:

  - ``idle_empty_gpu_s``: nothing queued;
  - ``idle_blocked_gpu_s``: every queued job asks more GPUs than are free in total, so no
    placement and no move could start one (only a preemption could);
  - ``idle_reachable_gpu_s``: ``min(free, sum of the GPUs of the queued jobs that each ask no
    more than are free)``: room that queued jobs fit by count, which a perfect placement or
    defragmentation could have filled at that moment;
  - ``idle_surplus_gpu_s``: the rest of the free GPUs while some job fits (more room than the
    fitting jobs ask).

  ``idle_reachable_gpu_s`` bounds, to first order, what any placement or move-based
  defragmenter could add to this run's allocation: it is the only idle time a queued job could
  have used.  (Only to first order: a different policy follows a different trajectory.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudefrag.model.cluster import ClusterState

__all__ = ["Meter", "QueueRoom", "Snapshot", "queue_room"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The measures at one moment."""

    used_gpus: float
    whole_nodes: int
    whole_domains: tuple[int, ...]
    stranded_gpus: float


def snapshot(state: ClusterState) -> Snapshot:
    """The measures of ``state`` now; a domain counts as wholly free when every node of it is
    (read from the state's domain aggregates)."""
    whole = state.whole_free_nodes()
    topo = state.topology
    counts, index = state.domain_counts(), state.index
    doms = [int((counts.whole[li] == index.member_counts[li]).sum()) for li in range(len(topo.levels))]
    free_total = float(state.gpu_milli_left.sum()) / 1000.0
    free_whole = float(topo.gpus_per_node[whole].sum())
    return Snapshot(state.used_gpus(), int(whole.sum()), tuple(doms), free_total - free_whole)


@dataclass(frozen=True, slots=True)
class QueueRoom:
    """What the queue could use of the free GPUs at one moment, by GPU count alone."""

    queued: int
    free_gpus: float
    reachable_gpus: float


def queue_room(state: ClusterState, queued_milli: dict[tuple[int, bool], int]) -> QueueRoom:
    """The :class:`QueueRoom` of ``state`` for a queue given as ``(GPU milli the job asks in
    total, whether it shares a GPU) -> number of queued jobs``.  A whole-GPU job fits by count
    when it asks at most the wholly free GPUs; a sharing pod when it asks at most the free milli."""
    free_milli = int(state.gpu_milli_left.sum())
    whole_milli = int(state.free_gpus.sum()) * 1000
    queued = fit = 0
    for (milli, sharing), count in queued_milli.items():
        queued += count
        if milli <= (free_milli if sharing else whole_milli):
            fit += milli * count
    return QueueRoom(queued, free_milli / 1000.0, min(free_milli, fit) / 1000.0)


@dataclass
class Meter:
    start_s: float
    end_s: float
    alloc_gpu_s: float = 0.0
    whole_nodes_s: float = 0.0
    whole_domains_s: list[float] = field(default_factory=list)
    stranded_gpu_s: float = 0.0
    gang_wait_s: float = 0.0
    idle_empty_gpu_s: float = 0.0
    idle_blocked_gpu_s: float = 0.0
    idle_reachable_gpu_s: float = 0.0
    idle_surplus_gpu_s: float = 0.0

    def advance(
        self, t0_s: float, t1_s: float, snap: Snapshot, gang_waiting: bool, room: QueueRoom | None = None
    ) -> None:
        """Account the step ``[t0_s, t1_s)`` during which the state was ``snap`` (and the queue
        could use ``room`` of it)."""
        lo, hi = max(t0_s, self.start_s), min(t1_s, self.end_s)
        if hi <= lo:
            return
        dt = hi - lo
        self.alloc_gpu_s += snap.used_gpus * dt
        self.whole_nodes_s += snap.whole_nodes * dt
        if not self.whole_domains_s:
            self.whole_domains_s = [0.0] * len(snap.whole_domains)
        for i, w in enumerate(snap.whole_domains):
            self.whole_domains_s[i] += w * dt
        if gang_waiting:
            self.stranded_gpu_s += snap.stranded_gpus * dt
            self.gang_wait_s += dt
        if room is None:
            return
        if room.queued == 0:
            self.idle_empty_gpu_s += room.free_gpus * dt
        elif room.reachable_gpus == 0:
            self.idle_blocked_gpu_s += room.free_gpus * dt
        else:
            self.idle_reachable_gpu_s += room.reachable_gpus * dt
            self.idle_surplus_gpu_s += (room.free_gpus - room.reachable_gpus) * dt

    @property
    def span_s(self) -> float:
        return self.end_s - self.start_s
