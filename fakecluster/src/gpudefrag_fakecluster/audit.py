"""An auditor of the fake API server: it sees every write, in order, and records each breach of
the rules a scheduler and a defragmentation controller must keep.

* **Bound once**: no pod UID is bound twice (a second bind of the same pod would be a double
  bind; the API refuses it, and the auditor checks the API).
* **Capacity at every moment**: a pod occupies its node from the write that shows it bound until
  the write that shows it finished (Succeeded / Failed) or removed; at each bind the node's
  occupied CPU, memory and per-GPU milli (from the pod's ``alibabacloud.com/gpu-index``) must
  stay within the node's allocatable.
* **Gangs all or nothing**: per PodGroup incarnation (pods of one ``gpudefrag.io/restarts``
  value), the number of members ever bound is 0 or at least ``minMember``, and their binds fall
  within ``gang_window_s`` of wall-clock time.
* **Evictions**: none of a pod without a controller owner, and none that the pod's
  PodDisruptionBudget (``minAvailable``) forbids, judged on the auditor's own count of healthy
  pods just before the eviction (the store's ``evict`` is wrapped, under the store's lock).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from gpudefrag.k8s import names
from gpudefrag.k8s.nodes import ModelRegistry, node_info
from gpudefrag.k8s.requests import ObjectError, gpu_assignment, pod_request
from gpudefrag_fakecluster.store import Store

RESTARTS = "gpudefrag.io/restarts"


@dataclass
class AuditReport:
    pods_created: int
    binds: int
    double_binds: list[str]
    overcommits: list[str]
    partial_gangs: list[str]
    forbidden_evictions: list[str]
    evictions: int

    @property
    def ok(self) -> bool:
        return not (self.double_binds or self.overcommits or self.partial_gangs or self.forbidden_evictions)


@dataclass
class _Use:
    cpu_milli: int
    memory_mib: int
    gpus: dict[int, int]


@dataclass
class Auditor:
    store: Store
    gang_window_s: float = 2.0
    models: ModelRegistry = field(default_factory=ModelRegistry)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.capacity: dict[str, tuple[int, int, int]] = {}
        self.occupied: dict[str, dict[str, _Use]] = defaultdict(dict)
        self.bind_count: Counter[str] = Counter()
        self.created: set[str] = set()
        self.gang_binds: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        self.overcommits: list[str] = []
        self.forbidden: list[str] = []
        self.evictions = 0
        self._bound: dict[str, str] = {}
        self.held: dict[str, tuple[float, float | None, int]] = {}
        """Per pod UID: (bound at, released at or None, GPU milli held), on the store's clock."""
        self.store.add_listener(self._on_event)
        inner = self.store.evict

        def evict(namespace: str, name: str, grace_period_s: int | None = None) -> None:
            with self.store._lock:  # the check and the eviction are one step
                breaches = self._check_eviction(namespace, name)
                inner(namespace, name, grace_period_s)  # a refusal (429, 404...) raises: no breach
                self.forbidden += breaches
                self.evictions += 1

        self.store.evict = evict  # type: ignore[method-assign]

    # ----------------------------------------------------------------- events
    def _on_event(self, event: str, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if kind == "nodes" and event != "DELETED":
                try:
                    info = node_info(obj)
                except ObjectError:
                    return
                self.capacity[info.name] = (info.cpu_milli, info.memory_mib, info.gpu_count)
            elif kind == "pods":
                self._on_pod(event, obj)

    def _on_pod(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        self.created.add(uid)
        node = (obj.get("spec") or {}).get("nodeName")
        finished = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if event == "DELETED" or finished:
            bound_on = self._bound.pop(uid, None)
            if bound_on is not None:
                self.occupied[bound_on].pop(uid, None)
                start, _, milli = self.held[uid]
                self.held[uid] = (start, self.store.clock(), milli)
            return
        if not node:
            return
        if uid in self._bound:
            if self._bound[uid] != node:  # moved without being removed: bound a second time
                self.bind_count[uid] += 1
            return
        self._bound[uid] = node
        self.bind_count[uid] += 1
        group = (meta.get("labels") or {}).get(names.POD_GROUP_LABEL)
        if group:
            restarts = (meta.get("annotations") or {}).get(RESTARTS, "0")
            self.gang_binds[(meta.get("namespace", "default"), group, restarts)].append(time.monotonic())
        self._occupy(node, uid, obj)

    def _occupy(self, node: str, uid: str, obj: dict[str, Any]) -> None:
        key = f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
        try:
            spec = pod_request(obj, self.models).spec
            gpus = gpu_assignment(obj) or ()
        except ObjectError as e:
            self.overcommits.append(f"{key}: unreadable bound pod: {e}")
            return
        use = _Use(spec.cpu_milli, spec.memory_mib, {g: spec.gpu_milli for g in gpus})
        if spec.gpu_milli > 0 and len(gpus) != spec.num_gpu:
            self.overcommits.append(f"{key} on {node}: {len(gpus)} GPU indices for {spec.num_gpu} GPUs")
        self.occupied[node][uid] = use
        self.held[uid] = (self.store.clock(), None, spec.gpu_milli * len(gpus))
        cap = self.capacity.get(node)
        if cap is None:
            self.overcommits.append(f"{key} bound to unknown node {node}")
            return
        pods = self.occupied[node].values()
        cpu = sum(u.cpu_milli for u in pods)
        mem = sum(u.memory_mib for u in pods)
        per_gpu: Counter[int] = Counter()
        for u in pods:
            per_gpu.update(u.gpus)
        bad = [g for g, m in per_gpu.items() if m > 1000 or not 0 <= g < cap[2]]
        if cpu > cap[0] or mem > cap[1] or bad:
            self.overcommits.append(
                f"{key} on {node}: cpu {cpu}/{cap[0]} m, memory {mem}/{cap[1]} MiB, GPUs over: {bad}"
            )

    # -------------------------------------------------------------- evictions
    def _check_eviction(self, namespace: str, name: str) -> list[str]:
        """What would be breached if ``namespace/name`` were evicted now."""
        out: list[str] = []
        try:
            pod = self.store.get("pods", namespace, name)
        except Exception:  # 404 and the like: the store answers the caller itself
            return out
        meta = pod["metadata"]
        refs = meta.get("ownerReferences") or []
        if not any(r.get("controller") is True for r in refs):
            out.append(f"{namespace}/{name}: evicted without a controller owner")
        if (meta.get("annotations") or {}).get(names.DO_NOT_DISRUPT, "").lower() == "true":
            out.append(f"{namespace}/{name}: evicted although do-not-disrupt")
        if not _running(pod):
            return out
        labels = meta.get("labels") or {}
        pods, _ = self.store.list("pods", namespace)
        pdbs, _ = self.store.list("poddisruptionbudgets", namespace)
        for pdb in pdbs:
            sel = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if not sel or any(labels.get(k) != v for k, v in sel.items()):
                continue
            min_available = (pdb.get("spec") or {}).get("minAvailable")
            if not isinstance(min_available, int):
                continue
            healthy = sum(
                1
                for p in pods
                if _running(p)
                and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in sel.items())
            )
            if healthy - 1 < min_available:
                out.append(
                    f"{namespace}/{name}: eviction leaves {healthy - 1} healthy < minAvailable {min_available}"
                )
        return out

    def gpu_milli_seconds(self, start_s: float, end_s: float) -> float:
        """GPU milli x seconds held by bound pods within ``[start_s, end_s]`` (store clock)."""
        with self._lock:
            total = 0.0
            for a, b, milli in self.held.values():
                lo, hi = max(a, start_s), min(end_s if b is None else b, end_s)
                if hi > lo:
                    total += milli * (hi - lo)
            return total

    # ----------------------------------------------------------------- report
    def report(self) -> AuditReport:
        with self._lock:
            min_members = {}
            for pg in self.store.list("podgroups")[0]:
                m = pg["metadata"]
                min_members[(m.get("namespace", "default"), m["name"])] = int(pg["spec"].get("minMember", 1))
            partial = []
            for (ns, group, restarts), times in sorted(self.gang_binds.items()):
                need = min_members.get((ns, group), 1)
                spread = max(times) - min(times)
                if len(times) < need or spread > self.gang_window_s:
                    partial.append(
                        f"{ns}/{group} incarnation {restarts}: {len(times)}/{need} bound over {spread:.2f} s"
                    )
            return AuditReport(
                pods_created=len(self.created),
                binds=sum(self.bind_count.values()),
                double_binds=[u for u, c in self.bind_count.items() if c > 1],
                overcommits=list(self.overcommits),
                partial_gangs=partial,
                forbidden_evictions=list(self.forbidden),
                evictions=self.evictions,
            )


def _running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp")
