"""Time-integrated measures of the job-level simulator, over the measurement window only.

Between two events the state is constant, so each measure is a step function; :meth:`Meter.
advance` adds ``value x overlap`` of the step with the window ``[start_s, end_s)``:

* ``alloc_gpu_s``: GPUs in use (shared GPUs by their used milli);
* ``whole_nodes_s``: nodes with every GPU free;
* ``whole_domains_s[l]``: domains of level l with every node wholly free;
* ``stranded_gpu_s``: free GPUs not on wholly free nodes, counted only while a multi-node gang
  waits (``gang_wait_s`` is that time): room a whole-node gang cannot use.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpudefrag.model.gang_state import GangState

__all__ = ["Meter", "Snapshot"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The measures at one moment."""

    used_gpus: float
    whole_nodes: int
    whole_domains: tuple[int, ...]
    stranded_gpus: float


def snapshot(state: GangState) -> Snapshot:
    whole = state.whole_free_nodes()
    topo = state.topology
    doms = []
    for li in range(len(topo.levels)):
        d = topo.domains(li)
        n_dom = topo.num_domains(li)
        all_whole = np.bincount(d, weights=(~whole).astype(np.float64), minlength=n_dom) == 0
        doms.append(int(all_whole.sum()))
    free_total = float(state.free_milli.sum()) / 1000.0
    free_whole = float(topo.gpus_per_node[whole].sum())
    return Snapshot(state.used_gpus(), int(whole.sum()), tuple(doms), free_total - free_whole)


@dataclass
class Meter:
    start_s: float
    end_s: float
    alloc_gpu_s: float = 0.0
    whole_nodes_s: float = 0.0
    whole_domains_s: list[float] = field(default_factory=list)
    stranded_gpu_s: float = 0.0
    gang_wait_s: float = 0.0

    def advance(self, t0_s: float, t1_s: float, snap: Snapshot, gang_waiting: bool) -> None:
        """Account the step ``[t0_s, t1_s)`` during which the state was ``snap``."""
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

    @property
    def span_s(self) -> float:
        return self.end_s - self.start_s
