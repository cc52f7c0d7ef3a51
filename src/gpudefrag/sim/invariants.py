"""Invariant checks of the time-driven simulator, an observer run after every event.

After each event, on the nodes and pods it touched (on all of them every ``full_check_every``
events): *capacity* (nothing negative or above capacity), *resource-accounting* (per node, the
running pods' requests equal capacity minus what is left; on a full check also the count of
wholly free GPUs) and *pod-sets* (each pod in exactly one of pending, running, completed,
rejected, as its lifecycle phase says; on a full check also *running-index*: the running pods
by node, ``SimCore.on_node``, list each running pod once, on the node of its placement).  A
violation raises :class:`InvariantError` naming the event and the rule.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.sim.core import SimCore
from gpudefrag.sim.events import Event, InvariantError, Payload
from gpudefrag.sim.lifecycle import PENDING, RUNNING, PodPhase

IntArray = npt.NDArray[np.int64]
_MEMBERSHIP = {PENDING: (1, False), RUNNING: (0, True)}
"""(pending sets, in the running set) a pod of each phase belongs to; other phases: (0, False)."""


class InvariantChecker:
    def __init__(self, core: SimCore, full_check_every: int) -> None:
        self._core = core
        self._every = full_check_every

    def __call__(self, t: float, cls: int, payload: Payload) -> None:
        core = self._core
        full = self._every > 0 and core.log.count % self._every == 0
        ledger, s = core.ledger, core.ledger.state
        touched = core.touched.nodes
        nodes = np.arange(s.num_nodes) if full else np.fromiter(touched, dtype=np.int64, count=len(touched))
        if nodes.size:
            rule, n = _first_bad_node(
                nodes, s.cpu_milli_left, s.cpu_capacity_milli, s.memory_mib_left, s.memory_capacity_mib,
                s.gpu_milli_left, ledger.slot_cap, ledger.exp_cpu, ledger.exp_mem, ledger.exp_gpu,
            )  # fmt: skip
            if rule:
                self._fail(t, cls, payload, *self._node_detail(rule, n))
        if full:
            whole = int((s.gpu_milli_left == GPU_MILLI_PER_GPU).sum())
            if whole != ledger.whole_free_gpus:
                self._fail(
                    t, cls, payload, "resource-accounting",
                    f"the simulator counts {ledger.whole_free_gpus} wholly free GPUs but the state has {whole}",
                )  # fmt: skip
        self._check_pods(t, cls, payload, full)
        if full:  # after pod-sets: a pod in the wrong set is the first fault to name
            self._check_index(t, cls, payload)

    def _check_index(self, t: float, cls: int, payload: Payload) -> None:
        """Every running pod is listed once, on its placement's node, and nothing else is."""
        core = self._core
        listed = {(n, i) for n, pods in enumerate(core.on_node) for i in pods}
        actual = {(r.placement.node, i) for i, r in core.running.items()}
        if listed != actual:
            n, i = min(listed ^ actual)
            where = "listed on" if (n, i) in listed else "running on but not listed on"
            self._fail(t, cls, payload, "running-index", f"pod {i} is {where} node {n}")

    @staticmethod
    def _fail(t: float, cls: int, payload: Payload, rule: str, detail: str) -> None:
        raise InvariantError(
            f"invariant '{rule}' violated after {Event(cls).name} event at t={t!r} s (payload {payload}): {detail}"
        )

    def _node_detail(self, rule: int, n: int) -> tuple[str, str]:
        ledger = self._core.ledger
        s = ledger.state
        cpu, mem, gpu = int(s.cpu_milli_left[n]), int(s.memory_mib_left[n]), s.gpu_milli_left[n]
        ccap, mcap, gcap = int(s.cpu_capacity_milli[n]), int(s.memory_capacity_mib[n]), ledger.slot_cap[n]
        if rule == 1:
            return "capacity", (
                f"node {n} ({s.names[n]}) has cpu_milli_left {cpu} of {ccap}, memory_mib_left {mem} of "
                f"{mcap}, gpu_milli_left {gpu.tolist()} (each must be within 0..capacity)"
            )
        return "resource-accounting", (
            f"node {n} ({s.names[n]}): running pods request cpu {int(ledger.exp_cpu[n])}, memory "
            f"{int(ledger.exp_mem[n])}, gpu {ledger.exp_gpu[n].tolist()} but the state has cpu "
            f"{ccap - cpu}, memory {mcap - mem}, gpu {(gcap - gpu).tolist()} allocated"
        )

    def _check_pods(self, t: float, cls: int, payload: Payload, full: bool) -> None:
        core = self._core
        waitq, count, phase = core.waitq, core.lifecycle.count, core.lifecycle.phase
        for status, size in ((PENDING, len(waitq)), (RUNNING, len(core.running))):
            if count[status] != size:
                name = PodPhase(status).name
                self._fail(
                    t, cls, payload, "pod-sets",
                    f"{count[status]} pods have status {name} but the {name.lower()} set holds {size}",
                )  # fmt: skip
        pods = self._suspects() if full else core.touched.pods
        for i in pods:
            member = ((i in waitq.active) + (i in waitq.parked_of), i in core.running)
            if member != _MEMBERSHIP.get(int(phase[i]), (0, False)):
                self._fail(
                    t, cls, payload, "pod-sets",
                    f"pod {i} has status {PodPhase(phase[i]).name} but is in {member[0]} pending set(s) "
                    f"and {'' if member[1] else 'not '}in the running set (each pod must be in exactly "
                    "one of pending, running, completed, rejected)",
                )  # fmt: skip

    def _suspects(self) -> list[int]:
        """The first pod whose set membership disagrees with its phase (checked on every pod)."""
        core = self._core
        waitq, phase = core.waitq, core.lifecycle.phase
        pend = np.zeros(core.n_pods, dtype=np.int64)
        pend[np.fromiter(waitq.active, np.int64, len(waitq.active))] += 1
        pend[np.fromiter(waitq.parked_of, np.int64, len(waitq.parked_of))] += 1
        run = np.zeros(core.n_pods, dtype=bool)
        run[np.fromiter(core.running, np.int64, len(core.running))] = True
        bad = (pend != (phase == PENDING)) | (run != (phase == RUNNING))
        return [int(i) for i in np.flatnonzero(bad)[:1]]


@njit(cache=True)
def _first_bad_node(
    nodes: IntArray, cpu: IntArray, ccap: IntArray, mem: IntArray, mcap: IntArray, gpu: IntArray,
    gcap: IntArray, exp_cpu: IntArray, exp_mem: IntArray, exp_gpu: IntArray,
) -> tuple[int, int]:  # fmt: skip
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
