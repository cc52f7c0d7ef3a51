"""Workloads on the fake cluster: work items, their manifests, the Job controller that keeps
their pods alive (restarting from checkpoints) and a replayer that submits them on the scaled
clock.  The fake GPU nodes (:func:`make_nodes`, :func:`node_manifest`) live in
:mod:`gpudefrag_fakecluster.nodes` and are re-exported here.

The fake server does not serve Jobs: :class:`JobController` plays the Job controller.  Its pods
carry an owner reference to a (non-existent) ``batch/v1`` Job whose UID is derived from the
item's namespace and name, so other components can group pods by owner as on a real cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from gpudefrag.k8s import names
from gpudefrag_fakecluster.api import ApiError
from gpudefrag_fakecluster.background import Loop
from gpudefrag_fakecluster.clock import ScaledClock
from gpudefrag_fakecluster.nodes import make_nodes, node_manifest
from gpudefrag_fakecluster.store import Store

__all__ = [
    "RESTARTS",
    "JobController",
    "Replayer",
    "WorkItem",
    "WorkStatus",
    "make_nodes",
    "node_manifest",
    "owner_uid",
    "pdb_manifest",
    "pod_manifest",
    "podgroup_manifest",
]

log = logging.getLogger(__name__)

RESTARTS = "gpudefrag.io/restarts"
"""Pod annotation: how many times the work item was restarted before this pod (``"0"`` first)."""


@dataclass(frozen=True)
class WorkItem:
    """One job to replay: ``pods`` identical pods (> 1: a gang with a PodGroup of ``minMember =
    pods``), each asking ``cpu_milli``, ``memory_mib`` and either ``gpus`` whole GPUs or, with
    ``gpus == 1``, ``gpu_milli`` (1..999) of one GPU.  ``run_s`` simulated seconds of work,
    checkpointed every ``checkpoint_interval_s`` (0: never).  ``constraint`` is ``""``,
    ``"required:<nodeLabel>"`` or ``"preferred:<nodeLabel>"`` (Kueue topology annotations);
    ``pdb_min_available`` > 0 adds a PodDisruptionBudget.  ``submit_s`` is relative to the
    replay's start."""

    submit_s: float
    name: str
    namespace: str = "default"
    pods: int = 1
    cpu_milli: int = 1000
    memory_mib: int = 1024
    gpus: int = 0
    gpu_milli: int = 0
    gpu_model: str = ""
    run_s: float = 3600.0
    checkpoint_interval_s: float = 0.0
    priority: int = 0
    constraint: str = ""
    pdb_min_available: int = 0

    def __post_init__(self) -> None:
        if self.pods < 1:
            raise ValueError(f"{self.name}: pods must be >= 1")
        if self.gpu_milli and not (0 < self.gpu_milli < 1000 and self.gpus == 1):
            raise ValueError(f"{self.name}: gpu_milli must be in 1..999 with gpus == 1")
        kind, _, label = self.constraint.partition(":")
        if self.constraint and (kind not in ("required", "preferred") or not label):
            raise ValueError(f"{self.name}: bad constraint {self.constraint!r}")


def owner_uid(namespace: str, name: str) -> str:
    """The deterministic UID of the fake Job owning a work item's pods."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpudefrag.io/fake-job/{namespace}/{name}"))


def _seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def pod_manifest(item: WorkItem, index: int, scheduler_name: str = names.SCHEDULER_NAME) -> dict[str, Any]:
    """The v1 Pod of member ``index`` of ``item`` (first incarnation: name ``<name>-<index>``,
    full run time, ``gpudefrag.io/restarts: "0"``)."""
    resources: dict[str, str] = {"cpu": f"{item.cpu_milli}m", "memory": f"{item.memory_mib}Mi"}
    annotations = {names.FAKE_RUN_S: _seconds(item.run_s), RESTARTS: "0"}
    if item.gpu_milli:
        annotations[names.ALIBABA_GPU_MILLI] = str(item.gpu_milli)
        annotations[names.ALIBABA_GPU_COUNT] = "1"
    elif item.gpus:
        resources[names.NVIDIA_GPU] = str(item.gpus)
    if item.gpu_model:
        annotations[names.ALIBABA_GPU_MODEL] = item.gpu_model
    if item.checkpoint_interval_s > 0:
        annotations[names.CHECKPOINT_INTERVAL_S] = _seconds(item.checkpoint_interval_s)
    kind, _, label = item.constraint.partition(":")
    if kind:
        key = names.KUEUE_REQUIRED_TOPOLOGY if kind == "required" else names.KUEUE_PREFERRED_TOPOLOGY
        annotations[key] = label
    labels = {"app": item.name}
    if item.pods > 1:
        labels[names.POD_GROUP_LABEL] = item.name
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": item.name,
        "uid": owner_uid(item.namespace, item.name),
        "controller": True,
    }
    container = {
        "name": "main",
        "image": "gpudefrag/fake-worker",
        "resources": {"requests": resources, "limits": dict(resources)},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{item.name}-{index}",
            "namespace": item.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
        },
        "spec": {
            "schedulerName": scheduler_name,
            "priority": item.priority,
            "restartPolicy": "Never",
            "containers": [container],
        },
    }


def podgroup_manifest(item: WorkItem) -> dict[str, Any]:
    """The scheduler-plugins PodGroup of a gang (``spec.minMember = item.pods``)."""
    group, version, _ = names.POD_GROUP_API
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "metadata": {"name": item.name, "namespace": item.namespace},
        "spec": {"minMember": item.pods},
    }


def pdb_manifest(item: WorkItem) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget over the item's pods (``app=<name>``)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": item.name, "namespace": item.namespace},
        "spec": {"minAvailable": item.pdb_min_available, "selector": {"matchLabels": {"app": item.name}}},
    }


@dataclass
class WorkStatus:
    """What happened to a work item (times in simulated seconds, the clock's epoch).

    ``first_bind_s``: when all pods of an incarnation were first bound; ``lost_work_s``: run
    seconds lost to restarts (progress beyond the last checkpoint; per job, not per pod);
    ``kept_work_s``: progress saved by checkpoints so far."""

    name: str
    submitted_s: float
    completed: bool = False
    incarnations: int = 1
    lost_work_s: float = 0.0
    kept_work_s: float = 0.0
    first_bind_s: float | None = None
    completion_s: float | None = None


@dataclass
class _Member:
    name: str
    bound: bool = False
    started_s: float | None = None
    succeeded: bool = False


@dataclass
class _Tracked:
    item: WorkItem
    status: WorkStatus
    members: dict[str, _Member] = field(default_factory=dict)  # pod uid -> current incarnation
    old: set[str] = field(default_factory=set)  # earlier incarnation's pods not yet gone
    waiting: bool = False  # a restart waits for ``old`` to empty


class JobController:
    """Owns the pods of submitted work items and replaces lost ones (see :meth:`submit`).

    A pod of the current incarnation that disappears before it Succeeded (evicted, deleted, or
    Failed, which the controller deletes) loses the job's progress beyond its last checkpoint:
    progress = simulated seconds since the incarnation's last pod started Running, kept =
    ``floor(progress / c) * c`` with checkpoint interval ``c`` (0 without).  The replacement
    incarnation (``generateName: <name>-``, ``gpudefrag.io/restarts`` + 1) runs ``run_s`` minus
    all kept work.  A gang restarts whole: the other members are deleted and the new gang is
    created once they are all gone.
    """

    def __init__(self, store: Store, clock: ScaledClock, scheduler_name: str = names.SCHEDULER_NAME) -> None:
        self.store, self.clock, self.scheduler_name = store, clock, scheduler_name
        self._lock = threading.RLock()
        self._items: dict[str, _Tracked] = {}  # owner uid -> item
        self._by_name: dict[str, _Tracked] = {}
        self._inbox: deque[tuple[str, dict[str, Any], float]] = deque()
        self._loop = Loop("fake-job-controller", self._run)
        self._wake, self._stop = self._loop.wake, self._loop.stopping
        self._listening = False

    def start(self) -> None:
        """Subscribe to pod events and start the background thread."""
        self._listen()
        self._loop.start()

    def stop(self) -> None:
        """Stop the background thread (pod events are ignored from then on)."""
        self._loop.stop()

    def submit(self, item: WorkItem) -> None:
        """Create the item's PodGroup (gangs), PodDisruptionBudget (if any) and pods."""
        self._listen()
        with self._lock:
            if item.name in self._by_name:
                raise ValueError(f"work item {item.name!r} already submitted")
            tracked = _Tracked(item, WorkStatus(item.name, self.clock.now_s()))
            self._items[owner_uid(item.namespace, item.name)] = tracked
            self._by_name[item.name] = tracked
            if item.pods > 1:
                self.store.create("podgroups", item.namespace, podgroup_manifest(item))
            if item.pdb_min_available > 0:
                self.store.create("poddisruptionbudgets", item.namespace, pdb_manifest(item))
            self._create_pods(tracked, item.run_s, restarts=0)

    def status(self, name: str) -> WorkStatus:
        """A copy of the item's record."""
        with self._lock:
            return dataclasses.replace(self._by_name[name].status)

    def statuses(self) -> list[WorkStatus]:
        with self._lock:
            return [dataclasses.replace(t.status) for t in self._by_name.values()]

    def all_done(self) -> bool:
        """Every submitted item completed."""
        with self._lock:
            return all(t.status.completed for t in self._by_name.values())

    # ---- events ------------------------------------------------------------------------------
    def _listen(self) -> None:
        with self._lock:
            if not self._listening:
                self.store.add_listener(self._on_event)
                self._listening = True

    def _on_event(self, event_type: str, kind: str, obj: dict[str, Any]) -> None:
        if kind == "pods" and not self._stop.is_set():
            self._inbox.append((event_type, obj, self.clock.now_s()))
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            while self._inbox and not self._stop.is_set():
                event_type, pod, t_s = self._inbox.popleft()
                with self._lock:
                    try:
                        self._on_pod(event_type, pod, t_s)
                    except Exception:
                        log.exception("fake job controller: error on a pod event")
            self._wake.wait(0.2)

    def _on_pod(self, event_type: str, pod: dict[str, Any], t_s: float) -> None:
        meta = pod["metadata"]
        owners = [o["uid"] for o in meta.get("ownerReferences") or [] if o.get("controller")]
        tracked = self._items.get(owners[0]) if owners else None
        if tracked is None:
            return
        uid = meta["uid"]
        if uid in tracked.old:
            if event_type == "DELETED":
                tracked.old.discard(uid)
                self._maybe_recreate(tracked)
            return
        if int((meta.get("annotations") or {}).get(RESTARTS, "0")) + 1 != tracked.status.incarnations:
            return
        member = tracked.members.setdefault(uid, _Member(meta["name"]))
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if event_type == "DELETED":
            if not member.succeeded:
                self._lose(tracked, uid, t_s)
        elif phase == "Failed":
            self._delete(tracked.item.namespace, member.name, grace_s=0)
        else:
            self._progress(tracked, member, pod, phase, t_s)

    def _progress(
        self, tracked: _Tracked, member: _Member, pod: dict[str, Any], phase: str, t_s: float
    ) -> None:
        status, pods = tracked.status, tracked.item.pods
        if (pod.get("spec") or {}).get("nodeName") and not member.bound:
            member.bound = True
            bound = sum(m.bound for m in tracked.members.values())
            if status.first_bind_s is None and bound == pods:
                status.first_bind_s = t_s
        if phase in ("Running", "Succeeded") and member.started_s is None:
            member.started_s = t_s
        if phase == "Succeeded" and not member.succeeded:
            member.succeeded = True
            done = sum(m.succeeded for m in tracked.members.values())
            if done == pods and not status.completed:
                status.completed, status.completion_s = True, t_s

    def _lose(self, tracked: _Tracked, lost_uid: str, t_s: float) -> None:
        """The incarnation lost a pod at ``t_s``: keep its checkpointed work and restart it."""
        item, status = tracked.item, tracked.status
        starts = [m.started_s for m in tracked.members.values()]
        all_started = len(starts) == item.pods and all(s is not None for s in starts)
        remaining_s = max(0.0, item.run_s - status.kept_work_s)
        progress_s = min(remaining_s, t_s - max(s for s in starts if s is not None)) if all_started else 0.0
        c = item.checkpoint_interval_s
        kept_s = math.floor(progress_s / c) * c if c > 0 else 0.0
        status.kept_work_s += kept_s
        status.lost_work_s += progress_s - kept_s
        status.incarnations += 1
        others = {u: m for u, m in tracked.members.items() if u != lost_uid}
        tracked.members, tracked.old, tracked.waiting = {}, tracked.old | set(others), True
        for m in others.values():
            self._delete(item.namespace, m.name, grace_s=None)
        self._maybe_recreate(tracked)

    def _maybe_recreate(self, tracked: _Tracked) -> None:
        if not tracked.waiting or tracked.old:
            return
        tracked.waiting = False
        remaining_s = tracked.item.run_s - tracked.status.kept_work_s
        if remaining_s <= 0:
            tracked.status.completed, tracked.status.completion_s = True, self.clock.now_s()
            return
        self._create_pods(tracked, remaining_s, restarts=tracked.status.incarnations - 1)

    def _create_pods(self, tracked: _Tracked, run_s: float, restarts: int) -> None:
        item = tracked.item
        for index in range(item.pods):
            pod = pod_manifest(item, index, self.scheduler_name)
            pod["metadata"]["annotations"].update(
                {names.FAKE_RUN_S: _seconds(run_s), RESTARTS: str(restarts)}
            )
            if restarts:
                del pod["metadata"]["name"]
                pod["metadata"]["generateName"] = f"{item.name}-"
            created = self.store.create("pods", item.namespace, pod)
            meta = created["metadata"]
            tracked.members.setdefault(meta["uid"], _Member(meta["name"]))

    def _delete(self, namespace: str, name: str, grace_s: int | None) -> None:
        try:
            self.store.delete("pods", namespace, name, grace_period_s=grace_s)
        except ApiError as e:
            if e.code != 404:
                raise


class Replayer:
    """Submits ``items`` to ``controller`` at ``start + submit_s`` on the scaled clock (one
    background thread, in ``submit_s`` order, ties in the given order).  ``submitted`` lists
    ``(name, simulated time)`` as they go."""

    def __init__(
        self,
        store: Store,
        clock: ScaledClock,
        items: Iterable[WorkItem],
        controller: JobController,
        *,
        progress: bool = False,
    ) -> None:
        self.store, self.clock, self.controller, self.progress = store, clock, controller, progress
        self.items = sorted(items, key=lambda i: i.submit_s)
        self.submitted: list[tuple[str, float]] = []
        self.start_s: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.start_s = self.clock.now_s()
        self._thread = threading.Thread(
            target=self._run, args=(self.start_s,), name="fake-replayer", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.join(5.0)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the replay to end; True when it has (every item submitted, or stopped)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _run(self, start_s: float) -> None:
        with tqdm(total=len(self.items), disable=not self.progress, desc="replay", unit="job") as bar:
            for item in self.items:
                if not self.clock.sleep_until(start_s + item.submit_s, self._stop):
                    return
                try:
                    self.controller.submit(item)
                except (ApiError, ValueError):
                    log.exception("replayer: could not submit %s", item.name)
                self.submitted.append((item.name, self.clock.now_s()))
                bar.update(1)
