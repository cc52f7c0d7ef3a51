"""Invariant checks of the time-driven simulator (see the :mod:`gpudefrag.sim.timed` docstring).

:class:`InvariantChecks` holds the ``_Sim`` methods that check *capacity* and
*resource-accounting* (per node, in one kernel call; on a full check also the count of wholly
free GPUs) and *pod-sets* after an event.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.sim.timed_types import EVENT_NAMES, PENDING, RUNNING, STATUS_NAMES, InvariantError


class InvariantChecks:
    """The simulator's invariant checks (mixed into :class:`gpudefrag.sim.timed._Sim`)."""

    def _fail(self, t: float, cls: int, payload: tuple, rule: str, detail: str) -> None:
        raise InvariantError(
            f"invariant '{rule}' violated after {EVENT_NAMES[cls]} event at "
            f"t={t!r} s (payload {payload}): {detail}"
        )

    def _check(self, t: float, cls: int, payload: tuple) -> None:
        every = self.config.full_check_every
        full = every > 0 and self.log.count % every == 0
        s = self.state
        nodes = (
            np.arange(s.num_nodes)
            if full
            else np.fromiter(self.touched_nodes, dtype=np.int64, count=len(self.touched_nodes))
        )
        if nodes.size:
            rule, n = _first_bad_node(
                nodes,
                s.cpu_milli_left,
                s.cpu_capacity_milli,
                s.memory_mib_left,
                s.memory_capacity_mib,
                s.gpu_milli_left,
                self.slot_cap,
                self.exp_cpu,
                self.exp_mem,
                self.exp_gpu,
            )
            if rule:
                self._fail(t, cls, payload, *self._node_detail(rule, n))
        if full:
            whole = int((s.gpu_milli_left == GPU_MILLI_PER_GPU).sum())
            if whole != self.whole_free_gpus:
                self._fail(
                    t,
                    cls,
                    payload,
                    "resource-accounting",
                    f"the simulator counts {self.whole_free_gpus} wholly free GPUs but the state has {whole}",
                )
        self._check_pods(t, cls, payload, full)

    def _node_detail(self, rule: int, n: int) -> tuple[str, str]:
        s = self.state
        cpu, mem, gpu = int(s.cpu_milli_left[n]), int(s.memory_mib_left[n]), s.gpu_milli_left[n]
        ccap, mcap, gcap = int(s.cpu_capacity_milli[n]), int(s.memory_capacity_mib[n]), self.slot_cap[n]
        if rule == 1:
            return "capacity", (
                f"node {n} ({s.names[n]}) has cpu_milli_left {cpu} of {ccap}, "
                f"memory_mib_left {mem} of {mcap}, gpu_milli_left {gpu.tolist()} "
                "(each must be within 0..capacity)"
            )
        return "resource-accounting", (
            f"node {n} ({s.names[n]}): running pods request cpu {int(self.exp_cpu[n])}, memory "
            f"{int(self.exp_mem[n])}, gpu {self.exp_gpu[n].tolist()} but the state has cpu "
            f"{ccap - cpu}, memory {mcap - mem}, gpu {(gcap - gpu).tolist()} allocated"
        )

    def _check_pods(self, t: float, cls: int, payload: tuple, full: bool) -> None:
        ns = self.n_status
        sets = {"pending": len(self.active) + len(self.parked_of), "running": len(self.running)}
        for label, status in (("pending", PENDING), ("running", RUNNING)):
            if ns[status] != sets[label]:
                self._fail(
                    t,
                    cls,
                    payload,
                    "pod-sets",
                    f"{ns[status]} pods have status {STATUS_NAMES[status]} but the "
                    f"{label} set holds {sets[label]}",
                )
        if full:
            pend = np.zeros(self.n, dtype=np.int64)
            pend[np.fromiter(self.active, np.int64, len(self.active))] += 1
            pend[np.fromiter(self.parked_of, np.int64, len(self.parked_of))] += 1
            run = np.zeros(self.n, dtype=bool)
            run[np.fromiter(self.running, np.int64, len(self.running))] = True
            bad = (pend != (self.status == PENDING)) | (run != (self.status == RUNNING))
            pods = np.flatnonzero(bad)[:1].tolist()
        else:
            pods = self.touched_pods
        for i in pods:
            member = ((i in self.active) + (i in self.parked_of), i in self.running)
            want = {PENDING: (1, False), RUNNING: (0, True)}.get(int(self.status[i]), (0, False))
            if member != want:
                self._fail(
                    t,
                    cls,
                    payload,
                    "pod-sets",
                    f"pod {i} has status {STATUS_NAMES[self.status[i]]} but is in "
                    f"{member[0]} pending set(s) and {'' if member[1] else 'not '}in the "
                    "running set (each pod must be in exactly one of pending, running, "
                    "completed, rejected)",
                )


@njit(cache=True)
def _first_bad_node(nodes, cpu, ccap, mem, mcap, gpu, gcap, exp_cpu, exp_mem, exp_gpu):
    """``(rule, node)`` of the first violation among ``nodes``: rule 1 capacity, 2 resource
    accounting; ``(0, -1)`` when all is well."""
    for k in range(nodes.shape[0]):
        n = nodes[k]
        bad = cpu[n] < 0 or cpu[n] > ccap[n] or mem[n] < 0 or mem[n] > mcap[n]
        for g in range(gpu.shape[1]):
            bad = bad or gpu[n, g] < 0 or gpu[n, g] > gcap[n, g]
        if bad:
            return 1, n
        ok = exp_cpu[n] == ccap[n] - cpu[n] and exp_mem[n] == mcap[n] - mem[n]
        for g in range(gpu.shape[1]):
            ok = ok and exp_gpu[n, g] == gcap[n, g] - gpu[n, g]
        if not ok:
            return 2, n
    return 0, -1
