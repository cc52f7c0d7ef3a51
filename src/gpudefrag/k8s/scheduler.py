"""``gpudefrag scheduler``: the scheduling loop against an API server.

Threads: one informer per kind (nodes, pods, PodGroups) feeding one event queue; the leader
elector; a small pool of binders.  The main thread alone changes the cache: it applies events,
then, when it leads and something changed, runs a cycle (:func:`~gpudefrag.k8s.decide.decide_cycle`),
assumes each decision in the cache and hands it to a binder.

Binding rules (kube-scheduler's binding cycle):

* a bind is ``POST pods/{name}/binding`` carrying the GPU assignment in the binding's
  annotations (``alibabacloud.com/gpu-index``), which the API server copies onto the pod;
* a failed bind forgets the assumption and retries the pod after a back-off (1 s doubling to
  30 s); a 409 means the pod is already bound or being deleted: the binder reads the pod again
  and the cache takes what the API says;
* a pod whose request does not parse gets one Warning Event (``FailedScheduling``) and one log
  line, and stays pending; nothing else is affected.

A gang left partly bound (fewer than ``minMember`` members bound: the scheduler died between
binds) is completed if its remaining pods fit the bound members' domain; if it still cannot be
completed after ``gang_timeout_s`` its bound members that have a controller owner are deleted
(the owner recreates them) so the gang can start again whole.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, Node, Pod

from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.k8s import names
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.checkpoints import has_controller_owner
from gpudefrag.k8s.client import bind_pod
from gpudefrag.k8s.decide import decide_cycle
from gpudefrag.k8s.informer import Informer
from gpudefrag.k8s.leader import LeaderElector
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.records import PodRecord
from gpudefrag.k8s.requests import gpu_index_value
from gpudefrag.k8s.timefmt import to_rfc3339
from gpudefrag.k8s.transport import CALL_ERRORS, TRANSPORT_ERRORS

log = logging.getLogger("gpudefrag.k8s")

MISSING_GROUP_WARN_S = 10.0
"""A gang's pods whose PodGroup has not been seen for this long (wall clock) get one warning."""

NOT_LEADING = -2
"""A bind's outcome when the Lease was lost before it was sent (forgotten, no back-off)."""

PodGroup = create_namespaced_resource(*names.POD_GROUP_API[:2], "PodGroup", names.POD_GROUP_API[2])


@dataclass
class SchedulerConfig:
    policy: str = "fgd"
    """A per-pod policy (fgd, bestfit, ...) or ``solver`` (CP-SAT batches warm-started from FGD)."""
    identity: str = "gpudefrag-scheduler"
    lease_name: str = "gpudefrag-scheduler"
    lease_namespace: str = "kube-system"
    lease_duration_s: int = 15
    topology_levels: list[str] = field(default_factory=list)
    """Node label keys of the topology, top level first (Kueue's ``levels[].nodeLabel``)."""
    gang_timeout_s: float = 300.0
    binders: int = 4
    max_pending: int = 256
    retry_s: float = 30.0
    """A pod found unplaceable is tried again at the next change of the cache, or after this long."""
    solver: SolverConfig = field(default_factory=SolverConfig)
    """The batch placer's settings with ``policy="solver"`` (:class:`~gpudefrag.k8s.policy.DecisionCore`)."""


@dataclass
class Counters:
    binds: int = 0
    bind_conflicts: int = 0
    bind_failures: int = 0  # the API server refused the bind (not a 409 conflict)
    bind_transport_errors: int = 0  # the request timed out or the connection broke; retried
    cycles: int = 0
    gangs_released: int = 0
    invalid_reported: int = 0


class KubeScheduler:
    def __init__(
        self,
        client_factory: Callable[[], Client],
        config: SchedulerConfig,
        clock: Callable[[], float] = time.time,
        core: DecisionCore | None = None,
    ) -> None:
        self.client_factory = client_factory
        self.client = client_factory()
        self.config = config
        self.clock = clock
        self.cache = ClusterCache()
        self.core = core or DecisionCore(config.policy, config.topology_levels, solver=config.solver)
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        self.stop = threading.Event()
        self.elector = LeaderElector(
            client_factory(),
            config.lease_name,
            config.lease_namespace,
            config.identity,
            lease_duration_s=config.lease_duration_s,
            renew_s=max(0.2, config.lease_duration_s / 5),
        )
        self.counters = Counters()
        self._synced: set[str] = set()
        self._backoff: dict[str, tuple[float, float]] = {}
        self._reported: set[str] = set()
        self._tried_at: dict[str, tuple[int, float]] = {}
        self._partial_since: dict[str, float] = {}
        self._missing_groups: dict[str, float] = {}
        self._last_gang_check = 0.0
        self._pool = ThreadPoolExecutor(max_workers=config.binders, thread_name_prefix="binder")
        self._bind_clients = threading.local()

    # ---------------------------------------------------------------- threads
    def start(self) -> None:
        for res, kind in ((Node, "nodes"), (Pod, "pods"), (PodGroup, "podgroups")):
            Informer(self.client_factory(), res, kind, self.events, self.stop).start()
        self.elector.start(self.stop)

    def run(self, until: Callable[[], bool] | None = None) -> None:
        """The main loop (module docstring), until :attr:`stop` is set or ``until()`` holds."""
        self.start()
        try:
            while not self.stop.is_set() and not (until is not None and until()):
                self._drain(timeout_s=0.05)
                if self.elector.leading and {"nodes", "pods"} <= self._synced:
                    self._cycle()
                    now = self.clock()
                    if now - self._last_gang_check >= 1.0:
                        self._last_gang_check = now
                        self._release_stuck_gangs(now)
        finally:
            self.stop.set()
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _drain(self, timeout_s: float) -> None:
        try:
            item = self.events.get(timeout=timeout_s)
        except queue.Empty:
            return
        self._apply(item)
        while True:
            try:
                item = self.events.get_nowait()
            except queue.Empty:
                return
            self._apply(item)

    def _apply(self, item: tuple[str, str, Any]) -> None:
        event, kind, obj = item
        cache = self.cache
        if event == "BIND":
            self._bind_done(kind, obj)
        elif event == "LIST":
            self._synced.add(kind)
            if kind == "nodes":
                cache.replace_nodes(obj)
                self.core.nodes_changed(cache)
            elif kind == "pods":
                cache.replace_pods(obj)
                for memo in (self._tried_at, self._backoff):  # forget pods that are gone
                    for uid in [u for u in memo if u not in cache.pods]:
                        del memo[uid]
            else:
                cache.pod_groups.clear()
                for o in obj:
                    cache.apply_pod_group("ADDED", o)
        elif kind == "nodes":
            before = len(cache.order)
            cache.apply_node(event, obj)
            if len(cache.order) != before or event != "MODIFIED":
                self.core.nodes_changed(cache)
        elif kind == "pods":
            if cache.apply_pod(event, obj) is None:  # gone: forget what was kept about it
                uid = (obj.get("metadata") or {}).get("uid", "")
                self._tried_at.pop(uid, None)
                self._backoff.pop(uid, None)
        else:
            cache.apply_pod_group(event, obj)

    # ------------------------------------------------------------------ cycle
    def _eligible(self, now: float) -> list[PodRecord]:
        """The first ``max_pending`` pending pods in queue order that are not backing off after a
        failed bind and were not found unplaceable on the cache as it is now (same
        :attr:`ClusterCache.version`, less than ``retry_s`` ago: a reservation can expire without
        any change to the cache)."""
        out = []
        version = self.cache.version
        for rec in self.cache.pending():
            until = self._backoff.get(rec.uid)
            if until is not None and until[0] > now:
                continue
            tried = self._tried_at.get(rec.uid)
            if tried is not None and tried[0] == version and now - tried[1] < self.config.retry_s:
                continue
            out.append(rec)
            if len(out) == self.config.max_pending:
                break
        return out

    def _cycle(self) -> None:
        self._report_invalid()
        now = self.clock()
        pending = self._eligible(now)
        if not pending:
            return
        self.core.observe(self.cache)
        result = decide_cycle(
            self.cache, pending, self.core.scheduler, self.core.policy, self.core.topology, now
        )
        self.counters.cycles += 1
        for rec, placement in result.binds:
            self.cache.assume(rec.uid, placement)
            self._tried_at.pop(rec.uid, None)
            self._pool.submit(self._bind, rec.uid, rec.key, self.cache.order[placement.node], placement.gpus)
        version = self.cache.version
        for rec in result.unplaced:
            self._tried_at[rec.uid] = (version, now)
        for group in result.gangs_waiting:  # tried again when a member arrives or the cache changes
            if group not in self.cache.pod_groups:
                since = self._missing_groups.setdefault(group, time.monotonic())
                if since >= 0 and time.monotonic() - since >= MISSING_GROUP_WARN_S:  # once, if it lasts
                    self._missing_groups[group] = -1.0
                    log.warning(
                        "gang %s waits: no PodGroup %s (scheduling.x-k8s.io/v1alpha1) found", group, group
                    )
            for member in self.cache.members(group):
                if member.counted_on is None:
                    self._tried_at[member.uid] = (version, now)

    # ------------------------------------------------------------------ binds
    def _client(self) -> Client:
        c = getattr(self._bind_clients, "client", None)
        if c is None:
            c = self.client_factory()
            self._bind_clients.client = c
        return c

    def _bind(self, uid: str, key: str, node: str, gpus: tuple[int, ...]) -> None:
        ns, _, name = key.partition("/")
        if not self.elector.leading:  # the Lease was lost since the decision: bind nothing
            self.events.put(("BIND", uid, (NOT_LEADING, None)))
            return
        client = self._client()
        try:
            bind_pod(client, ns, name, node, {names.ALIBABA_GPU_INDEX: gpu_index_value(gpus)})
            self.events.put(("BIND", uid, (0, None)))
        except ApiError as e:
            fresh = None
            if e.status.code == 409:
                try:
                    fresh = client.get(Pod, name, namespace=ns).to_dict()
                except ApiError:
                    fresh = None
            self.events.put(("BIND", uid, (e.status.code, fresh)))
        except TRANSPORT_ERRORS as e:
            log.warning("bind %s -> %s failed: %s", key, node, e)
            self.events.put(("BIND", uid, (-1, None)))
        except Exception:  # a binder thread must always report, or the pod stays assumed forever
            log.exception("bind %s -> %s failed", key, node)
            self.events.put(("BIND", uid, (-2, None)))

    def _bind_done(self, uid: str, outcome: tuple[int, dict | None]) -> None:
        code, fresh = outcome
        if code == 0:
            self.counters.binds += 1
            self._backoff.pop(uid, None)
            return
        self.cache.forget(uid)
        if code == NOT_LEADING:
            return
        if code == 409:
            self.counters.bind_conflicts += 1
            if fresh is not None:
                self.cache.apply_pod("MODIFIED", fresh)
            return
        if code == -1:  # a transport error: the bind may or may not have happened; the watch says
            self.counters.bind_transport_errors += 1
        else:
            self.counters.bind_failures += 1
        delay = min(30.0, 2 * self._backoff.get(uid, (0.0, 0.5))[1])
        self._backoff[uid] = (self.clock() + delay, delay)

    # ---------------------------------------------------------- bad requests
    def _report_invalid(self) -> None:
        for key, reason in list(self.cache.invalid.items()):
            if key in self._reported:
                continue
            self._reported.add(key)
            log.warning("pod %s stays pending: %s", key, reason)
            self.counters.invalid_reported += 1
            self._pool.submit(self._event, key, "FailedScheduling", reason)

    def _event(self, key: str, reason: str, message: str) -> None:
        ns, _, name = key.partition("/")
        now = to_rfc3339(self.clock())
        ev = Event(
            metadata=ObjectMeta(generateName=f"{name}.", namespace=ns),
            involvedObject=ObjectReference(apiVersion="v1", kind="Pod", name=name, namespace=ns),
            reason=reason,
            message=message,
            type="Warning",
            source=EventSource(component=names.SCHEDULER_NAME),
            firstTimestamp=now,  # type: ignore[arg-type]
            lastTimestamp=now,  # type: ignore[arg-type]
            count=1,
        )
        try:
            self._client().create(ev, namespace=ns)
        except CALL_ERRORS as e:
            log.warning("event for %s not written: %s", key, e)

    # ----------------------------------------------------------- stuck gangs
    def _release_stuck_gangs(self, now: float) -> None:
        waiting = {f"{r.key.split('/', 1)[0]}/{r.pod_group}" for r in self.cache.pending() if r.pod_group}
        for group in list(self._partial_since):
            if group not in waiting:
                del self._partial_since[group]
        for group in waiting:
            bound = [r for r in self.cache.members(group) if r.node is not None]
            need = self.cache.pod_groups.get(group, 0)
            if not bound or len(bound) >= need:  # nothing bound, or a whole gang with spare members
                self._partial_since.pop(group, None)
                continue
            since = self._partial_since.setdefault(group, now)
            if now - since < self.config.gang_timeout_s:
                continue
            self._partial_since.pop(group, None)
            self.counters.gangs_released += 1
            log.warning(
                "gang %s partly bound for %.0f s; releasing its %d bound pods", group, now - since, len(bound)
            )
            for rec in bound:
                if has_controller_owner(rec.obj):
                    self._pool.submit(self._delete, rec.key)
                else:  # it would not come back: leave it, and say so
                    log.warning("gang %s: %s has no controller owner and is not deleted", group, rec.key)

    def _delete(self, key: str) -> None:
        ns, _, name = key.partition("/")
        if not self.elector.leading:
            return
        try:
            self._client().delete(Pod, name, namespace=ns)
        except CALL_ERRORS as e:
            log.warning("delete %s failed: %s", key, e)
