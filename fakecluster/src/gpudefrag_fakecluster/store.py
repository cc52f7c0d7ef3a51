"""The fake API server's object store: thread-safe, in memory, with the real server's semantics
for the subset the driver uses (resource versions, optimistic concurrency, pod binding,
graceful deletion, eviction against PodDisruptionBudgets, watches with a bounded history).

Stored objects are never mutated: every write builds a new object (copy on write, sharing
untouched sub-trees), so watch events hold them and the HTTP server encodes them without a
copy.  What the public methods hand out (``get``, ``list``, watch events, listener arguments,
write results) are private deep copies.

The pieces with a job of their own live beside it: the kinds and the error (:mod:`.api`),
watches (:mod:`.watch`), disruption budgets (:mod:`.disruption`) and update rules (:mod:`.updates`).
"""

from __future__ import annotations

import functools
import json
import math
import random
import string
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec

from gpudefrag.k8s.timefmt import to_rfc3339
from gpudefrag_fakecluster.api import (
    KINDS,
    STATUS_SUBRESOURCE_KINDS,
    TERMINATED_PHASES,
    ApiError,
    clone,
    merge_patch,
    not_found,
    with_meta,
)
from gpudefrag_fakecluster.disruption import budget_of, guarding_budget, refusal
from gpudefrag_fakecluster.updates import updated
from gpudefrag_fakecluster.watch import Event, Watch, matcher

__all__ = [
    "DEFAULT_GRACE_S",
    "KINDS",
    "STATUS_SUBRESOURCE_KINDS",
    "ApiError",
    "Listener",
    "Store",
    "Watch",
    "clone",
    "merge_patch",
    "rfc3339",
]

DEFAULT_GRACE_S = 30
_NAME_CHARS = string.ascii_lowercase + string.digits
Listener = Callable[[str, str, dict[str, Any]], None]
Key = tuple[str, str]
Objects = list[dict[str, Any]]
"""Objects of one kind (an alias: ``Store.list`` hides the builtin inside the class)."""
_P = ParamSpec("_P")


@functools.lru_cache(maxsize=64)
def _rfc3339_s(t_s: int) -> str:
    return to_rfc3339(t_s, micros=False)


def rfc3339(t_s: float) -> str:
    """``t_s`` (seconds since the epoch) as RFC 3339 UTC, whole seconds (rounded down)."""
    return _rfc3339_s(math.floor(t_s))


def _copying(read: Callable[_P, tuple[Objects, str]]) -> Callable[_P, tuple[Objects, str]]:
    """A list read handing out private deep copies of what ``read`` returns (shared objects)."""

    @functools.wraps(read)
    def copied(*args: _P.args, **kwargs: _P.kwargs) -> tuple[Objects, str]:
        items, rv = read(*args, **kwargs)
        return [clone(o) for o in items], rv

    copied.__doc__ = "Deep copies of what the shared read returns (same arguments, same order)."
    return copied


# ---- the store -----------------------------------------------------------------------------
class Store:
    """The objects of every kind in :data:`KINDS`, keyed by (namespace, name); ``namespace`` is
    ignored for cluster-scoped kinds and defaults to ``"default"`` for namespaced ones."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        watch_window: int = 50_000,
        seed: int = 0,
        audit_path: str | Path | None = None,
    ) -> None:
        self.clock = clock
        self.resource_version = 0
        self.audit: Objects = []
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {kind: {} for kind in KINDS}
        self._log: deque[Event] = deque(maxlen=watch_window)
        self._log_floor = 0  # every event with rv > floor is in the log
        self._watchers: dict[str, set[Watch]] = {kind: set() for kind in KINDS}
        self._listeners: list[Listener] = []
        self._pending: deque[tuple[str, str, dict[str, Any]]] = deque()
        self._dispatch_lock = threading.Lock()
        self._audit_file = open(audit_path, "a", encoding="utf-8") if audit_path else None  # noqa: SIM115

    # ---- reads ---------------------------------------------------------------------------
    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """A deep copy of the object; 404 NotFound when absent."""
        return clone(self.get_shared(kind, namespace, name))

    def get_shared(self, kind: str, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object itself (never modify it): for encoding without a copy."""
        with self._lock:
            return self._existing(kind, self._ns(kind, namespace), name)

    def list_shared(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[Objects, str]:
        """The stored objects themselves (never modify them) that match, by (namespace, name),
        and the list's resourceVersion; ``namespace=None``: all namespaces."""
        match = matcher(label_selector, field_selector)
        with self._lock:
            table = self._table(kind)
            keys = sorted(
                k for k in table if namespace is None or not KINDS[kind].namespaced or k[0] == namespace
            )
            return [table[k] for k in keys if match(table[k])], str(self.resource_version)

    list = _copying(list_shared)
    """As :meth:`list_shared` (same arguments), with private deep copies of the objects."""

    # ---- writes --------------------------------------------------------------------------
    def create(self, kind: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object with uid, resourceVersion, creationTimestamp and (from
        generateName) its name; a pod without a phase gets Pending.  409 AlreadyExists; 422
        Invalid without name and generateName."""
        with self._lock:
            table, new = self._table(kind), clone(obj)
            meta = new.setdefault("metadata", {})
            ns = self._ns_for_body(kind, namespace, meta.get("namespace"))
            name = meta.get("name") or self._generated_name(table, ns, meta.get("generateName"), kind)
            if (ns, name) in table:
                raise ApiError(
                    409, "AlreadyExists", f'{kind} "{name}" already exists', {"name": name, "kind": kind}
                )
            for stale in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "namespace"):
                meta.pop(stale, None)
            meta.update(name=name, uid=str(uuid.UUID(int=self._rng.getrandbits(128), version=4)))
            meta["creationTimestamp"] = rfc3339(self.clock())
            if KINDS[kind].namespaced:
                meta["namespace"] = ns
            if kind == "pods" and not (new.get("status") or {}).get("phase"):
                new["status"] = {**(new.get("status") or {}), "phase": "Pending"}
            if kind == "poddisruptionbudgets":
                new["status"] = budget_of(new, self._pods_in(ns)).status()
            self._write("ADDED", kind, new, None, "create")
        self._dispatch()
        return clone(new)

    def replace(
        self, kind: str, namespace: str | None, name: str, obj: dict[str, Any], subresource: str | None = None
    ) -> dict[str, Any]:
        """Replace the object (``subresource="status"``: only its ``.status``).  409 Conflict
        when ``metadata.resourceVersion`` is set and stale."""
        with self._lock:
            old = self._existing(kind, self._ns(kind, namespace), name)
            new = updated(kind, old, clone(obj), subresource)
            self._write("MODIFIED", kind, new, old, "update-status" if subresource else "update")
        self._dispatch()
        return clone(new)

    def patch(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """JSON merge patch of the object (strategic merge is treated as merge), then as
        :meth:`replace`: a resourceVersion in the patch is a precondition."""
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
        with self._lock:
            old = self._existing(kind, self._ns(kind, namespace), name)
            merged = merge_patch(old, patch)
            if not (patch.get("metadata") or {}).get("resourceVersion"):
                merged = with_meta(merged, resourceVersion=old["metadata"]["resourceVersion"])
            new = updated(kind, old, merged, subresource)
            self._write("MODIFIED", kind, new, old, "patch-status" if subresource else "patch")
        self._dispatch()
        return clone(new)

    def delete(
        self, kind: str, namespace: str | None, name: str, grace_period_s: int | None = None
    ) -> dict[str, Any]:
        """Delete the object.  A bound, non-terminated pod with a grace above 0 only gets
        ``deletionTimestamp`` (now + grace) and ``deletionGracePeriodSeconds`` (grace:
        ``grace_period_s``, else ``spec.terminationGracePeriodSeconds``, else 30) and stays
        until deleted with grace 0; a repeated request may only shorten the grace."""
        with self._lock:
            result = self._delete_locked(kind, self._ns(kind, namespace), name, grace_period_s)
        self._dispatch()
        return clone(result)

    def bind(
        self, namespace: str, name: str, node_name: str, annotations: dict[str, str] | None = None
    ) -> None:
        """Assign the pod to ``node_name``, merge ``annotations`` into the pod's, add condition
        PodScheduled=True.  409 Conflict when it is being deleted or already assigned."""
        with self._lock:
            old = self._existing("pods", namespace or "default", name)
            spec, meta, status = old.get("spec") or {}, old["metadata"], old.get("status") or {}
            if meta.get("deletionTimestamp"):  # checked first, as the real API server does
                raise ApiError(409, "Conflict", f"pod {name} is being deleted, cannot be assigned to a host")
            if spec.get("nodeName"):
                raise ApiError(
                    409, "Conflict", f'pod {name} is already assigned to node "{spec["nodeName"]}"'
                )
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            now = rfc3339(self.clock())
            conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now})
            new = {
                **old,
                "metadata": {
                    **meta,
                    "annotations": {**(meta.get("annotations") or {}), **(annotations or {})},
                },
                "spec": {**spec, "nodeName": node_name},
                "status": {**status, "conditions": conditions},
            }
            self._write("MODIFIED", "pods", new, old, "bind")
        self._dispatch()

    def evict(self, namespace: str, name: str, grace_period_s: int | None = None) -> None:
        """Delete the pod (gracefully) if its PodDisruptionBudget allows; no budget check for a
        pod not bound, Pending, terminated or being deleted.  500 InternalError with more than
        one matching budget; 429 TooManyRequests when it allows no disruption."""
        try:
            with self._lock:
                ns = namespace or "default"
                pod = self._existing("pods", ns, name)
                pdbs = [o for _, o in sorted(self._objects["poddisruptionbudgets"].items())]
                pdb = guarding_budget(pod, pdbs)
                if pdb is not None:
                    self._spend_budget(pdb)
                self._record("evict", "pods", pod, self.resource_version)
                self._delete_locked("pods", ns, name, grace_period_s)
        finally:
            self._dispatch()

    # ---- watches and listeners -------------------------------------------------------------
    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Watch:
        """Events of ``kind`` after ``resource_version`` (``None``/``"0"``: first ADDED for every
        current object).  A version older than the retained history gives one ERROR event
        (410 Expired) and the end."""
        self._table(kind)
        with self._lock:
            w = Watch(self, kind, namespace, label_selector, field_selector)
            try:
                since = int(resource_version) if resource_version not in (None, "", "0") else None
            except ValueError as e:
                raise ApiError(400, "BadRequest", f"invalid resourceVersion {resource_version!r}") from e
            if since is not None and since < self._log_floor:
                msg = f"too old resource version: {since} ({self._log_floor})"
                status = ApiError(410, "Expired", msg).status()
                w.push(Event(self.resource_version, "ERROR", kind, status, None), final=True)
                return w
            if since is None:
                for obj in self.list_shared(kind, namespace)[0]:
                    w.offer(Event(int(obj["metadata"]["resourceVersion"]), "ADDED", kind, obj, None))
            else:
                for ev in self._log:
                    if ev.rv > since and ev.kind == kind:
                        w.offer(ev)
            self._watchers[kind].add(w)
            return w

    def forget_watch(self, w: Watch) -> None:
        """Stop feeding ``w`` (called by :meth:`Watch.close`)."""
        with self._lock:
            self._watchers[w.kind].discard(w)

    def compact(self) -> None:
        """Forget every retained event: a watch from any earlier version gets 410."""
        with self._lock:
            self._log.clear()
            self._log_floor = self.resource_version

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(event_type, kind, private copy)`` after each write, outside the lock, in
        write order (maybe on another writer's thread; a listener may itself write)."""
        with self._lock:
            self._listeners.append(fn)

    def close(self) -> None:
        """Close every watch and the audit file."""
        with self._lock:
            watches = [w for ws in self._watchers.values() for w in ws]
            if self._audit_file:
                self._audit_file.close()
                self._audit_file = None
        for w in watches:
            w.close()

    # ---- internals -------------------------------------------------------------------------
    def _table(self, kind: str) -> dict[Key, dict[str, Any]]:
        if kind not in self._objects:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return self._objects[kind]

    @staticmethod
    def _ns(kind: str, namespace: str | None) -> str:
        return (namespace or "default") if kind in KINDS and KINDS[kind].namespaced else ""

    def _ns_for_body(self, kind: str, namespace: str | None, body_ns: str | None) -> str:
        if namespace and body_ns and body_ns != namespace:
            msg = "the namespace of the provided object does not match the namespace sent on the request"
            raise ApiError(400, "BadRequest", msg)
        return self._ns(kind, namespace or body_ns)

    def _existing(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        obj = self._table(kind).get((ns, name))
        if obj is None:
            raise not_found(kind, name)
        return obj

    def _generated_name(self, table: dict[Key, Any], ns: str, prefix: str | None, kind: str) -> str:
        if not prefix:
            raise ApiError(
                422, "Invalid", f"{kind}: metadata.name: Required value: name or generateName is required"
            )
        while True:
            name = prefix + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))
            if (ns, name) not in table:
                return name

    def _delete_locked(self, kind: str, ns: str, name: str, grace_period_s: int | None) -> dict[str, Any]:
        old = self._existing(kind, ns, name)
        spec, meta = old.get("spec") or {}, old["metadata"]
        phase = (old.get("status") or {}).get("phase")
        grace_s = grace_period_s if grace_period_s is not None else spec.get("terminationGracePeriodSeconds")
        grace_s = int(DEFAULT_GRACE_S if grace_s is None else grace_s)
        if kind == "pods" and spec.get("nodeName") and grace_s > 0 and phase not in TERMINATED_PHASES:
            if meta.get("deletionTimestamp") and grace_s >= meta.get("deletionGracePeriodSeconds", grace_s):
                return old  # already being deleted: only a shorter grace changes anything
            new = with_meta(
                old, deletionTimestamp=rfc3339(self.clock() + grace_s), deletionGracePeriodSeconds=grace_s
            )
            self._write("MODIFIED", kind, new, old, "delete-request")
            return new
        del self._objects[kind][(ns, name)]
        gone = with_meta(old, resourceVersion=str(self.resource_version + 1))
        self._write("DELETED", kind, gone, old, "delete")
        return gone

    def _pods_in(self, ns: str) -> Objects:
        return [o for (pod_ns, _), o in self._objects["pods"].items() if pod_ns == ns]

    def _spend_budget(self, pdb: dict[str, Any]) -> None:
        """Take one disruption from ``pdb`` (its status updated either way); 429 if none left."""
        budget = budget_of(pdb, self._pods_in(pdb["metadata"]["namespace"]))
        status = {**(pdb.get("status") or {}), **budget.status(evicting=budget.allowed > 0)}
        if status != pdb.get("status"):
            self._write("MODIFIED", "poddisruptionbudgets", {**pdb, "status": status}, pdb, "update-status")
        if budget.allowed <= 0:
            raise refusal(pdb, budget)

    def _write(
        self, event_type: str, kind: str, new: dict[str, Any], old: dict[str, Any] | None, verb: str
    ) -> None:
        """Under the lock: bump the version, store ``new``, log and fan out the event, audit."""
        self.resource_version += 1
        rv = self.resource_version
        if event_type != "DELETED":
            info, meta = KINDS[kind], {**new["metadata"], "resourceVersion": str(rv)}
            new.update(apiVersion=info.api_version, kind=info.kind, metadata=meta)
            self._objects[kind][(self._ns(kind, meta.get("namespace")), meta["name"])] = new
        event = Event(rv, event_type, kind, new, old)
        if self._log.maxlen is not None and len(self._log) == self._log.maxlen and self._log:
            self._log_floor = self._log[0].rv
        self._log.append(event)
        for w in self._watchers[kind]:
            w.offer(event)
        self._record(verb, kind, new, rv)
        if self._listeners:
            self._pending.append((event_type, kind, new))

    def _record(self, verb: str, kind: str, obj: dict[str, Any], rv: int) -> None:
        """Append an audit record (``node``: a pod's ``spec.nodeName``, else ``None``)."""
        meta = obj["metadata"]
        node = (obj.get("spec") or {}).get("nodeName") if kind == "pods" else None
        record = {"rv": rv, "t": self.clock(), "verb": verb, "kind": kind, "namespace": meta.get("namespace")}
        record.update(name=meta["name"], uid=meta.get("uid"), node=node or None)
        self.audit.append(record)
        if self._audit_file:
            self._audit_file.write(json.dumps(record) + "\n")
            self._audit_file.flush()

    def _dispatch(self) -> None:
        """Deliver pending listener calls in write order: one thread delivers at a time; a
        call finding the delivery busy (another thread, or a listener writing) leaves the new
        calls to the running loop, which checks again after releasing."""
        while self._pending:
            if not self._dispatch_lock.acquire(blocking=False):
                return
            try:
                while True:
                    with self._lock:
                        if not self._pending:
                            break
                        event_type, kind, obj = self._pending.popleft()
                        listeners = list(self._listeners)
                    for fn in listeners:
                        fn(event_type, kind, clone(obj))
            finally:
                self._dispatch_lock.release()
