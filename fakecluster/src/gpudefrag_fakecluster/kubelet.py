"""A fake kubelet for every node at once (in the spirit of KWOK), on the in-process fake store.

One background thread, driven by the store's write events (a listener that only queues them)
and a heap of timers on the scaled clock; no per-pod threads.  What it does:

* **Heartbeats.**  Every ``heartbeat_s`` (simulated) it renews one Lease per node in
  ``kube-node-lease`` and keeps the node's ``Ready`` condition True.  ``fail_node(name)`` stops
  that node's heartbeats and sets ``Ready`` False; nothing else changes (its pods keep their
  phases and timers: a deliberately simple model of a lost node).  ``recover_node`` undoes it.
* **Admission.**  A bound Pending pod is admitted when the node's admitted, non-terminated pods
  plus it fit the node's ``status.allocatable`` (CPU, memory, whole and fractional GPUs, see
  :func:`~gpudefrag_fakecluster.usage.overcommit`); else it is marked Failed with reason ``OutOfgpu`` / ``OutOfcpu`` /
  ``OutOfmemory`` and recorded in ``rejected``.  An admitted pod turns Running after
  ``start_delay_s`` and Succeeded ``gpudefrag.io/fake-run-s`` simulated seconds after its start
  (absent: it runs until deleted).
* **Checkpoints** (``checkpoints=True``).  A running pod with ``gpudefrag.io/checkpoint-interval-s``
  ``c`` checkpoints at ``startTime + k·c`` (before its end): the kubelet, playing the workload,
  writes that time into its ``gpudefrag.io/last-checkpoint`` annotation.
* **Deletion.**  A pod with ``metadata.deletionTimestamp`` is removed (delete with grace 0) at
  once when it is not running, else at its deletion time (``min(deletionTimestamp, seen +
  grace)``); it holds its resources until then.
* **Audit.**  ``max_overcommit[node][resource]`` is the largest excess over capacity ever seen
  among the node's admitted, non-terminated pods (admission keeps it empty; pods found already
  Running at start or a shrinking node can fill it).
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpudefrag.k8s import names
from gpudefrag.k8s.timefmt import from_rfc3339, to_rfc3339
from gpudefrag_fakecluster.api import ApiError
from gpudefrag_fakecluster.background import Loop
from gpudefrag_fakecluster.clock import ScaledClock
from gpudefrag_fakecluster.podstatus import pod_status
from gpudefrag_fakecluster.store import Store
from gpudefrag_fakecluster.usage import (
    NodeCapacity,
    PodUsage,
    node_capacity,
    overcommit,
    parse_quantity,
    pod_usage,
)

__all__ = [
    "LEASE_NAMESPACE",
    "FakeKubelet",
    "NodeCapacity",
    "PodUsage",
    "node_capacity",
    "overcommit",
    "parse_quantity",
    "pod_status",
    "pod_usage",
]

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
_MAX_WAIT_WALL_S = 0.2
_REASONS = {names.NVIDIA_GPU: "OutOfgpu", "cpu": "OutOfcpu", "memory": "OutOfmemory"}


@dataclass
class _Admitted:
    """A pod the kubelet admitted and has not yet seen finish or be removed."""

    namespace: str
    name: str
    node: str
    usage: PodUsage
    containers: list[str]
    run_s: float | None
    checkpoint_s: float
    running: bool = False
    started_s: float = 0.0
    finalize_at_s: float | None = None


@dataclass(order=True)
class _Timer:
    due_s: float
    seq: int
    action: str = field(compare=False)  # "start", "finish", "checkpoint", "finalize", "beat"
    key: tuple[str, str, str] = field(compare=False)  # (uid, namespace, name)


class FakeKubelet:
    """The kubelets of all nodes of a fake :class:`Store` (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        clock: ScaledClock,
        *,
        start_delay_s: float = 0.0,
        heartbeat_s: float = 10.0,
        checkpoints: bool = True,
    ) -> None:
        self.store, self.clock, self.checkpoints = store, clock, checkpoints
        self.start_delay_s, self.heartbeat_s = start_delay_s, heartbeat_s
        self.lease_duration_s = max(1, math.ceil(4 * heartbeat_s))
        self.rejected: list[tuple[str, str, str]] = []
        self.max_overcommit: dict[str, dict[str, float]] = {}
        self._inbox: deque[tuple[str, str, dict[str, Any]]] = deque()
        self._loop = Loop("fake-kubelet", self._run)
        self._wake, self._stop = self._loop.wake, self._loop.stopping
        self._lock = threading.RLock()
        self._timers: list[_Timer] = []
        self._seq = 0
        self._nodes: dict[str, NodeCapacity] = {}
        self._node_ready: dict[str, bool] = {}
        self._failed: set[str] = set()
        self._pods: dict[str, _Admitted] = {}  # uid -> admitted, non-terminated
        self._by_node: dict[str, set[str]] = {}
        self._seen: set[str] = set()  # uids admitted, adopted or rejected
        self._listening = False

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Subscribe to the store, read its nodes and pods, and start the background thread."""
        if self._loop.running:
            return
        if not self._listening:
            self.store.add_listener(self._on_event)
            self._listening = True
        snapshot = [("ADDED", "nodes", n) for n in self.store.list("nodes")[0]]
        snapshot += [("ADDED", "pods", p) for p in self.store.list("pods")[0]]
        self._inbox.extendleft(reversed(snapshot))
        self._push(self.clock.now_s(), "beat", ("", "", ""))
        self._loop.start()

    def stop(self) -> None:
        """Stop the background thread (store events are ignored from then on)."""
        self._loop.stop()

    def fail_node(self, name: str) -> None:
        """Stop ``name``'s heartbeats and set its ``Ready`` condition False (pods are untouched)."""
        with self._lock:
            self._failed.add(name)
            self._set_ready(name, False)

    def recover_node(self, name: str) -> None:
        """Undo :meth:`fail_node`: Ready True and heartbeats again."""
        with self._lock:
            self._failed.discard(name)
            self._heartbeat(name, self.clock.now_s())

    # ---- the loop ----------------------------------------------------------------------------
    def _on_event(self, event_type: str, kind: str, obj: dict[str, Any]) -> None:
        if kind in ("pods", "nodes") and not self._stop.is_set():
            self._inbox.append((event_type, kind, obj))
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            with self._lock:
                delay_s = self._step()
            self._wake.wait(delay_s)

    def _step(self) -> float:
        """Handle queued events and due timers; the wall seconds until the next timer."""
        while self._inbox and not self._stop.is_set():
            event_type, kind, obj = self._inbox.popleft()
            self._guarded(self._on_node if kind == "nodes" else self._on_pod, event_type, obj)
        while self._timers and self._timers[0].due_s <= self.clock.now_s() and not self._inbox:
            timer = heapq.heappop(self._timers)
            self._guarded(self._fire, timer)
        if not self._timers:
            return _MAX_WAIT_WALL_S
        return min(_MAX_WAIT_WALL_S, self.clock.wall_delay(self._timers[0].due_s - self.clock.now_s()))

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except ApiError as e:
            log.debug("fake kubelet: %s (%s)", e.message, e.reason)
        except Exception:
            log.exception("fake kubelet: unexpected error")

    def _push(self, due_s: float, action: str, key: tuple[str, str, str]) -> None:
        self._seq += 1
        heapq.heappush(self._timers, _Timer(due_s, self._seq, action, key))
        self._wake.set()

    def _fire(self, timer: _Timer) -> None:
        uid = timer.key[0]
        if timer.action == "beat":
            now_s = self.clock.now_s()
            for node in sorted(self._nodes):
                self._guarded(self._heartbeat, node, now_s)
            self._push(max(timer.due_s + self.heartbeat_s, now_s), "beat", timer.key)
        elif timer.action == "start":
            self._start_pod(uid)
        elif timer.action == "finish":
            self._finish_pod(uid)
        elif timer.action == "checkpoint":
            self._checkpoint(uid, timer.due_s)
        elif timer.action == "finalize":
            self._finalize(*timer.key)

    # ---- nodes -------------------------------------------------------------------------------
    def _on_node(self, event_type: str, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if event_type == "DELETED":
            self._nodes.pop(name, None)
            return
        is_new = name not in self._nodes
        self._nodes[name] = node_capacity(node)
        conditions = (node.get("status") or {}).get("conditions") or []
        self._node_ready[name] = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
        )
        self._audit(name)
        if is_new:
            self._heartbeat(name, self.clock.now_s())
            for pod in self.store.list("pods")[0]:  # pods bound before the node was known
                if (pod.get("spec") or {}).get("nodeName") == name:
                    self._on_pod("MODIFIED", pod)

    def _heartbeat(self, name: str, now_s: float) -> None:
        """Renew ``name``'s Lease and set its Ready condition True when it is not (unless failed)."""
        if name in self._failed or name not in self._nodes:
            return
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": self.lease_duration_s,
            "renewTime": to_rfc3339(now_s, micros=True),
        }
        try:
            self.store.patch("leases", LEASE_NAMESPACE, name, {"spec": spec})
        except ApiError as e:
            if e.code != 404:
                raise
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
                "spec": spec,
            }
            self.store.create("leases", LEASE_NAMESPACE, lease)
        if not self._node_ready.get(name, False):
            self._set_ready(name, True)

    def _set_ready(self, name: str, ready: bool) -> None:
        node = self.store.get("nodes", None, name)
        now = to_rfc3339(self.clock.now_s())
        ready_condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletStopped",
            "message": "fake kubelet is posting ready status"
            if ready
            else "fake kubelet stopped (fail_node)",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        others = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
        self.store.patch(
            "nodes", None, name, {"status": {"conditions": others + [ready_condition]}}, "status"
        )
        self._node_ready[name] = ready

    # ---- pods --------------------------------------------------------------------------------
    def _on_pod(self, event_type: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        uid, node = meta["uid"], spec.get("nodeName")
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if event_type == "DELETED":
            self._release(uid)
            self._seen.discard(uid)
        elif not node:
            return
        elif meta.get("deletionTimestamp"):
            self._on_terminating(pod, uid)
        elif uid in self._seen or node not in self._nodes:
            return
        elif phase == "Pending":
            self._seen.add(uid)
            self._admit(pod, uid, node)
        elif phase == "Running":
            self._seen.add(uid)
            self._adopt(pod, uid, node)

    def _track(self, pod: dict[str, Any], uid: str, node: str, usage: PodUsage) -> _Admitted:
        meta = pod["metadata"]
        ann = meta.get("annotations") or {}
        run = ann.get(names.FAKE_RUN_S)
        admitted = _Admitted(
            namespace=meta.get("namespace", "default"),
            name=meta["name"],
            node=node,
            usage=usage,
            containers=[c.get("name", "main") for c in (pod.get("spec") or {}).get("containers") or []],
            run_s=float(run) if run is not None else None,
            checkpoint_s=float(ann.get(names.CHECKPOINT_INTERVAL_S, 0)) if self.checkpoints else 0.0,
        )
        self._pods[uid] = admitted
        self._by_node.setdefault(node, set()).add(uid)
        return admitted

    def _admit(self, pod: dict[str, Any], uid: str, node: str) -> None:
        usage = pod_usage(pod)
        others = [self._pods[u].usage for u in self._by_node.get(node, ())]
        excess = overcommit(self._nodes[node], others + [usage])
        if not excess:
            admitted = self._track(pod, uid, node, usage)
            self._push(
                self.clock.now_s() + self.start_delay_s, "start", (uid, admitted.namespace, admitted.name)
            )
            return
        resource = next(r for r in _REASONS if r in excess)
        reason = _REASONS[resource]
        meta = pod["metadata"]
        self.rejected.append((meta.get("namespace", "default"), meta["name"], reason))
        status = {
            "phase": "Failed",
            "reason": reason,
            "message": f"Pod Node didn't have enough resource: {resource} (short by {excess[resource]:g})",
        }
        self.store.patch("pods", meta.get("namespace"), meta["name"], {"status": status}, "status")

    def _adopt(self, pod: dict[str, Any], uid: str, node: str) -> None:
        """A pod found Running (e.g. at start): count it and let it finish on time."""
        admitted = self._track(pod, uid, node, pod_usage(pod))
        self._audit(node)
        started = (pod.get("status") or {}).get("startTime")
        self._running(uid, admitted, from_rfc3339(started) if started else self.clock.now_s())

    def _start_pod(self, uid: str) -> None:
        admitted = self._pods.get(uid)
        if admitted is None or admitted.running:
            return
        now_s = self.clock.now_s()
        status = pod_status(uid, admitted.containers, now_s, running=True)
        self.store.patch("pods", admitted.namespace, admitted.name, {"status": status}, "status")
        self._running(uid, admitted, now_s)

    def _running(self, uid: str, admitted: _Admitted, started_s: float) -> None:
        """The pod runs since ``started_s``: time its end and its next checkpoint."""
        admitted.running, admitted.started_s = True, started_s
        key = (uid, admitted.namespace, admitted.name)
        if admitted.run_s is not None:
            self._push(started_s + admitted.run_s, "finish", key)
        if admitted.checkpoint_s > 0:
            done = math.floor((self.clock.now_s() - started_s) / admitted.checkpoint_s)
            self._push(started_s + (done + 1) * admitted.checkpoint_s, "checkpoint", key)

    def _checkpoint(self, uid: str, at_s: float) -> None:
        """The pod's workload checkpointed at ``at_s``: write ``gpudefrag.io/last-checkpoint``."""
        admitted = self._pods.get(uid)
        if admitted is None or not admitted.running:
            return
        if admitted.run_s is not None and at_s >= admitted.started_s + admitted.run_s:
            return
        patch = {"metadata": {"annotations": {names.LAST_CHECKPOINT: to_rfc3339(at_s)}}}
        self.store.patch("pods", admitted.namespace, admitted.name, patch)
        self._push(at_s + admitted.checkpoint_s, "checkpoint", (uid, admitted.namespace, admitted.name))

    def _finish_pod(self, uid: str) -> None:
        admitted = self._pods.get(uid)
        if admitted is None or not admitted.running:
            return
        status = pod_status(uid, admitted.containers, self.clock.now_s(), running=False)
        self.store.patch("pods", admitted.namespace, admitted.name, {"status": status}, "status")
        self._release(uid)
        if admitted.finalize_at_s is not None:
            self._finalize(uid, admitted.namespace, admitted.name)

    def _on_terminating(self, pod: dict[str, Any], uid: str) -> None:
        """Remove a deleted pod now when it is not running, else at its deletion time."""
        meta = pod["metadata"]
        admitted = self._pods.get(uid)
        if admitted is None or not admitted.running:
            self._release(uid)
            self._finalize(uid, meta.get("namespace", "default"), meta["name"])
            return
        if admitted.finalize_at_s is not None:
            return
        grace_s = meta.get("deletionGracePeriodSeconds")
        at_s = from_rfc3339(meta["deletionTimestamp"])
        if grace_s is not None:
            at_s = min(at_s, self.clock.now_s() + float(grace_s))
        admitted.finalize_at_s = at_s
        self._push(at_s, "finalize", (uid, admitted.namespace, admitted.name))

    def _finalize(self, uid: str, namespace: str, name: str) -> None:
        self._release(uid)
        try:
            current = self.store.get("pods", namespace, name)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        if current["metadata"].get("uid") == uid:
            self.store.delete("pods", namespace, name, grace_period_s=0)

    def _release(self, uid: str) -> None:
        admitted = self._pods.pop(uid, None)
        if admitted is not None:
            self._by_node.get(admitted.node, set()).discard(uid)

    def _audit(self, node: str) -> None:
        capacity = self._nodes.get(node)
        if capacity is None:
            return
        excess = overcommit(capacity, (self._pods[u].usage for u in self._by_node.get(node, ())))
        for resource, amount in excess.items():
            worst = self.max_overcommit.setdefault(node, {})
            worst[resource] = max(worst.get(resource, 0.0), amount)
