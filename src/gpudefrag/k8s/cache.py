"""The scheduler's picture of the cluster, built from informer events (no I/O here).

Rules (those of kube-scheduler's cache):

* A pod **counts on its node** (its CPU, memory and GPUs are taken in :attr:`ClusterCache.state`)
  from the moment the scheduler decides it (*assumed*) or the API shows it bound
  (``spec.nodeName``), until it has finished (phase Succeeded or Failed) or is gone.  A pod
  being deleted (``deletionTimestamp`` set) still counts until the API removes it.
* An assumed pod is forgotten when its bind fails; when the API shows it bound the assumption
  is confirmed, on the node the API says.
* A bound pod's GPUs are the ``alibabacloud.com/gpu-index`` annotation; a pod bound by someone
  else without it gets the lowest-numbered free GPUs that fit.  A bound pod that does not fit
  its node (overcommitted by another scheduler) is not counted and is reported in
  :attr:`ClusterCache.inconsistent`.
* A pod is **pending** for us when its ``spec.schedulerName`` is ours, it is not bound or
  assumed, is not being deleted, has no scheduling gates, is in phase Pending and its request
  parses.  A pod whose request does not parse is kept in :attr:`ClusterCache.invalid` with the
  reason (the scheduler reports it once as a Kubernetes Event).
* Nodes are indexed in name order; a node set or capacity change rebuilds the state and counts
  every counted pod again.
* What a cycle reads is kept as events arrive, so a cycle costs what changed, not the cluster's
  size: the pending pods are a set updated per event, what a cycle reads of the nodes is kept
  per node event (:attr:`ClusterCache.node_sets`, :mod:`gpudefrag.k8s.node_sets`), and
  :attr:`ClusterCache.decision_view` (:mod:`gpudefrag.k8s.decision_view`) is the state a cycle
  decides on.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from gpudefrag.k8s import names
from gpudefrag.k8s.decision_view import DecisionView
from gpudefrag.k8s.node_sets import NodeSets, terms_key
from gpudefrag.k8s.nodes import ModelRegistry, NodeInfo, cluster_state, node_info
from gpudefrag.k8s.records import FINISHED, PodRecord, Reservation, pod_key
from gpudefrag.k8s.requests import ObjectError, gpu_assignment, pod_request
from gpudefrag.k8s.snapshot import lowest_free_gpus
from gpudefrag.model.cluster import ClusterState, Placement, PlacementError
from gpudefrag.model.pods import PodSpec

log = logging.getLogger("gpudefrag.k8s")


@dataclass
class ClusterCache:
    """Nodes, pods and PodGroups as the API shows them, plus the scheduler's assumptions."""

    scheduler_name: str = names.SCHEDULER_NAME
    models: ModelRegistry = field(default_factory=ModelRegistry)
    pod_ids: dict[str, int] = field(default_factory=dict)
    """Pod UID -> the integer id the decision core knows it by; pass the same dict (and
    ``id_counter``) to successive caches to keep ids stable across them."""
    id_counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self.order: list[str] = []
        self.index: dict[str, int] = {}
        self.state: ClusterState = cluster_state([], self.models)
        self.decision_view = DecisionView(self.state)
        self.pods: dict[str, PodRecord] = {}
        self.by_key: dict[str, str] = {}
        self.pod_groups: dict[str, int] = {}
        self.invalid: dict[str, str] = {}
        self.inconsistent: dict[str, str] = {}
        self.by_id: dict[int, str] = {}
        self.version = 0
        """Bumped on every change that may let a pending pod fit (a pod leaving, a node change)."""
        self.node_version = 0
        """Bumped on every node event (taints, labels, readiness may have changed)."""
        self.node_sets = NodeSets()
        self._off_limits_cache: dict[str, tuple[int, frozenset[int]]] = {}
        self._waiting: set[str] = set()  # UIDs of the pods pending() returns

    # ------------------------------------------------------------------ nodes
    def apply_node(self, event: str, obj: dict) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        if event == "DELETED":
            if self.nodes.pop(name, None) is not None:
                self._rebuild()
            return
        try:
            info = node_info(obj)
        except ObjectError as e:
            log.warning("node %s ignored: %s", name, e)
            return
        old = self.nodes.get(name)
        self.nodes[name] = info
        self.node_version += 1
        shape = (info.cpu_milli, info.memory_mib, info.gpu_count, info.gpu_model)
        if old is None or (old.cpu_milli, old.memory_mib, old.gpu_count, old.gpu_model) != shape:
            self._rebuild()
        else:
            self.node_sets.changed(name)
        self.version += 1

    def replace_nodes(self, objs: Iterable[dict]) -> None:
        """A full list (after a relist): nodes not in it are gone."""
        self.nodes = {}
        for obj in objs:
            try:
                info = node_info(obj)
            except ObjectError as e:
                log.warning("node ignored: %s", e)
                continue
            self.nodes[info.name] = info
        self._rebuild()

    def _rebuild(self) -> None:
        self.node_version += 1
        self.order = sorted(self.nodes)
        self.index = {n: i for i, n in enumerate(self.order)}
        self.node_sets.reset(self.order, self.nodes)
        self.decision_view.close()
        self.state = cluster_state([self.nodes[n] for n in self.order], self.models)
        self.decision_view = DecisionView(self.state)
        assumed = {
            rec.uid: (rec.counted_on, rec.placement.gpus)
            for rec in self.pods.values()
            if rec.assumed and rec.placement is not None
        }
        for rec in self.pods.values():
            rec.placement = None
            rec.counted_on = None
        for rec in self.pods.values():
            if not rec.assumed:
                self._count(rec)
        for uid, (node, gpus) in assumed.items():  # decisions whose bind is in flight keep their room
            rec = self.pods[uid]
            assert rec.request is not None
            if (
                node in self.index
                and self.state.why_not_fits(self.index[node], rec.request.spec, gpus) is None
            ):
                rec.placement = Placement(self.index[node], gpus, rec.request.spec)
                self.state.bind(rec.placement)
                rec.counted_on = node
            else:  # the node is gone or changed: the bind will fail or the API will say where it went
                rec.assumed = False
                self._file(rec)
        self.version += 1

    # ------------------------------------------------------------------- pods
    def apply_pod(self, event: str, obj: dict) -> PodRecord | None:
        """Apply one watch event; returns the pod's record (``None`` once it is gone)."""
        uid = (obj.get("metadata") or {}).get("uid", "")
        if event == "DELETED":
            self._drop(uid)
            return None
        rec = self.pods.get(uid)
        if rec is None:
            rec = self._new_record(obj)
            self.pods[uid] = rec
            self.by_key[rec.key] = uid
            self.by_id[rec.pod_id] = uid
        else:
            self._refresh(rec, obj)
        if rec.node is not None and rec.assumed:
            rec.assumed = False
            if rec.counted_on != rec.node or self._api_gpus(rec) not in (None, self._gpus(rec)):
                self._uncount(rec)
        self._count(rec)
        self._file(rec)
        return rec

    def replace_pods(self, objs: Iterable[dict]) -> None:
        """A full list: pods not in it are gone; assumptions on pods still listed are kept."""
        seen: set[str] = set()
        for obj in objs:
            rec = self.apply_pod("ADDED", obj)
            if rec is not None:
                seen.add(rec.uid)
        for uid in [u for u in self.pods if u not in seen]:
            self._drop(uid)

    def _new_record(self, obj: dict) -> PodRecord:
        uid = (obj.get("metadata") or {}).get("uid", "")
        pod_id = self.pod_ids.get(uid)
        if pod_id is None:
            pod_id = self.pod_ids[uid] = next(self.id_counter)
        rec = PodRecord("", "", pod_id, {}, None, None, None, "", False, False, False)
        self._refresh(rec, obj)
        return rec

    def _refresh(self, rec: PodRecord, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        rec.uid = meta.get("uid", "")
        rec.key = pod_key(obj)
        rec.obj = obj
        rec.node = spec.get("nodeName") or None
        rec.phase = (obj.get("status") or {}).get("phase", "Pending")
        rec.deleting = meta.get("deletionTimestamp") is not None
        rec.gated = bool(spec.get("schedulingGates"))
        rec.ours = spec.get("schedulerName") == self.scheduler_name
        try:
            rec.request = pod_request(obj, self.models)
            rec.error = None
            self.invalid.pop(rec.key, None)
        except ObjectError as e:
            rec.request = None
            rec.error = str(e)
            if rec.ours and rec.node is None:
                self.invalid[rec.key] = rec.error

    def _drop(self, uid: str) -> None:
        rec = self.pods.pop(uid, None)
        if rec is None:
            return
        self._uncount(rec)
        self._waiting.discard(uid)
        self.by_key.pop(rec.key, None)
        self.by_id.pop(rec.pod_id, None)
        self.pod_ids.pop(uid, None)
        self.invalid.pop(rec.key, None)
        self.inconsistent.pop(rec.key, None)
        self.version += 1

    # -------------------------------------------------------------- counting
    def _should_count(self, rec: PodRecord) -> str | None:
        """The node ``rec`` counts on (module docstring), or ``None``."""
        if rec.request is None or rec.phase in FINISHED:
            return None
        if rec.node is not None:
            return rec.node if rec.node in self.index else None
        return rec.counted_on if rec.assumed else None

    def _api_gpus(self, rec: PodRecord) -> tuple[int, ...] | None:
        try:
            return gpu_assignment(rec.obj)
        except ObjectError:
            return None

    def _gpus(self, rec: PodRecord) -> tuple[int, ...] | None:
        return rec.placement.gpus if rec.placement is not None else None

    def _count(self, rec: PodRecord) -> None:
        want = self._should_count(rec)
        if want == rec.counted_on:
            return
        self._uncount(rec)
        if want is None or rec.request is None:
            return
        node = self.index[want]
        spec = rec.request.spec
        gpus = self._api_gpus(rec)
        if gpus is None or self.state.why_not_fits(node, spec, gpus) is not None:
            gpus = self._lowest_free_gpus(node, spec)
        if gpus is None:
            self.inconsistent[rec.key] = f"does not fit on node {want} as the cache sees it"
            log.warning("pod %s bound to %s does not fit there; not counted", rec.key, want)
            return
        placement = Placement(node, gpus, spec)
        try:
            self.state.bind(placement)
        except PlacementError as e:  # pragma: no cover - guarded by why_not_fits above
            self.inconsistent[rec.key] = str(e)
            return
        rec.placement = placement
        rec.counted_on = want
        self.inconsistent.pop(rec.key, None)

    def _uncount(self, rec: PodRecord) -> None:
        if rec.placement is not None:
            self.state.unbind(rec.placement)
            self.version += 1
        rec.placement = None
        rec.counted_on = None

    def _lowest_free_gpus(self, node: int, spec: PodSpec) -> tuple[int, ...] | None:
        """The lowest-numbered GPUs of ``node`` with room for ``spec`` (``()`` for CPU-only),
        if the pod fits there with them."""
        gpus = lowest_free_gpus(self.state, node, spec)
        return gpus if gpus is not None and self.state.why_not_fits(node, spec, gpus) is None else None

    # ----------------------------------------------------------- assumptions
    def assume(self, uid: str, placement: Placement) -> None:
        """Count a pod on the node the scheduler chose, before its bind returns."""
        rec = self.pods[uid]
        self._uncount(rec)
        self.state.bind(placement)
        rec.placement = placement
        rec.counted_on = self.order[placement.node]
        rec.assumed = True
        self._waiting.discard(uid)

    def forget(self, uid: str) -> None:
        """Undo :meth:`assume` after a failed bind (no-op if the API has shown it bound)."""
        rec = self.pods.get(uid)
        if rec is not None and rec.assumed:
            rec.assumed = False
            self._uncount(rec)
            self._file(rec)

    # ---------------------------------------------------------------- queries
    @staticmethod
    def _is_pending(rec: PodRecord) -> bool:
        """Ours, waiting for a node, and schedulable now (module docstring)."""
        return (
            rec.ours
            and rec.request is not None
            and rec.node is None
            and not rec.assumed
            and not rec.deleting
            and not rec.gated
            and rec.phase == "Pending"
        )

    def _file(self, rec: PodRecord) -> None:
        """Keep :meth:`pending`'s set current for ``rec`` after any change to it."""
        if self._is_pending(rec):
            self._waiting.add(rec.uid)
        else:
            self._waiting.discard(rec.uid)

    def pending(self) -> list[PodRecord]:
        """Our pods waiting for a node, in queue order: priority (high first), then creation."""
        out = [self.pods[uid] for uid in self._waiting]
        out.sort(key=lambda r: (-r.request.priority, r.request.created_s, r.key))  # type: ignore[union-attr]
        return out

    def all_reservations(self) -> list[Reservation]:
        """Every node's reservation annotations, expired ones included (a malformed expiry
        counts as expired: ``until_s`` 0)."""
        return self.node_sets.reservations()

    def reservations(self, now_s: float) -> list[Reservation]:
        """Active reservations (node annotations written by the defragmentation controller)."""
        return [r for r in self.all_reservations() if r.until_s > now_s]

    def excluded_for(self, rec: PodRecord) -> np.ndarray:
        """Indices of the nodes ``rec`` may not use, ascending: taints it does not tolerate, labels
        its node selector or required node affinity rejects (:mod:`gpudefrag.k8s.node_sets`)."""
        return self.node_sets.excluded(rec.obj.get("spec") or {})

    def off_limits(self, rec: PodRecord) -> frozenset[int]:
        """:meth:`excluded_for` and :meth:`unusable_nodes` together: every node ``rec`` may not be
        placed on (or moved to) now; cached like :meth:`excluded_for`."""
        key = terms_key(rec.obj.get("spec") or {})
        hit = self._off_limits_cache.get(key)
        if hit is not None and hit[0] == self.node_version:
            return hit[1]
        out = frozenset(self.excluded_for(rec).tolist()) | frozenset(self.unusable_nodes())
        self._off_limits_cache[key] = (self.node_version, out)
        return out

    def unusable_nodes(self) -> list[int]:
        """Indices of nodes no pod may be placed on: not Ready, or cordoned / tainted (ascending)."""
        return self.node_sets.unusable()

    def members(self, group_key: str) -> list[PodRecord]:
        """Pods labelled with PodGroup ``namespace/name``, finished ones excluded."""
        ns, _, name = group_key.partition("/")
        return [
            r
            for r in self.pods.values()
            if r.pod_group == name and r.key.split("/", 1)[0] == ns and r.phase not in FINISHED
        ]

    def apply_pod_group(self, event: str, obj: dict) -> None:
        key = pod_key(obj)
        if event == "DELETED":
            self.pod_groups.pop(key, None)
            return
        try:
            self.pod_groups[key] = max(1, int((obj.get("spec") or {}).get("minMember", 1)))
        except (TypeError, ValueError):
            log.warning("PodGroup %s: spec.minMember is not an integer", key)
        self.version += 1
