"""``gpudefrag defrag``: the defragmentation controller against an API server.

A level-triggered reconciler.  Every ``interval_s`` it lists nodes and pods, builds the cache
and the port (:mod:`gpudefrag.k8s.port`), and:

1. **Ends reservations** whose pod has bound (anywhere), is gone, or whose time is up: it
   removes the node's ``gpudefrag.io/reserved-for``, ``reserved-until`` and ``defrag-plan``
   annotations.
2. **Continues the plans in force**: a reserved node's ``gpudefrag.io/defrag-plan`` lists the
   UIDs of the pods to move; each one still on the node and not already terminating is evicted.
   The plan is written on the node *before* the first eviction, so a controller restarted after
   a crash continues it instead of planning again, and a pod evicted once is never evicted
   twice (it is terminating, or gone; its replacement has a new UID).
3. **Plans** with the simulators' controller (:class:`~gpudefrag.defrag.controller.DefragController`
   with a profile's settings, by default the shipped ``kubernetes`` profile's: blocked pod ->
   cheapest moves priced by checkpoints, hysteresis, budgets) for the pending pods without a reservation, and starts each plan as in 2.
   Run times come from the finished pods it has seen (a mean-residual-life estimate; a prior of
   ``default_runtime_s`` until 20 have finished) unless the caller passes an estimator.

Evictions go through the Eviction API (``pods/{name}/eviction``), so PodDisruptionBudgets are
honoured: a 429 backs the pod off (``backoff_s`` doubling to 5 minutes) and it is tried again
while its reservation lasts; a 404 means it is already gone.  Before any eviction the pod is
checked again: never one without a controller owner, one annotated
``gpudefrag.io/do-not-disrupt``, a gang member or a pod that is not ours.  ``dry_run`` prints the
plans and writes nothing.

The moved pods come back through their owners and are scheduled by the scheduler like any new
pod; the reservation keeps them (and everyone else) off the freed node.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, Pod

from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.cost import MovablePod, move_cost_gpu_s
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.k8s import names
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.client import evict_pod
from gpudefrag.k8s.defrag_config import DefragConfig
from gpudefrag.k8s.port import CachePort, may_disrupt, running_pod
from gpudefrag.k8s.records import Reservation
from gpudefrag.k8s.timefmt import from_rfc3339, to_rfc3339
from gpudefrag.k8s.transport import CALL_ERRORS
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.port import Move, Reserve, RuntimeEstimator

log = logging.getLogger("gpudefrag.k8s")


MAX_HISTORY = 10_000
"""Finished pods' run times kept for the run-time estimate."""
RUNTIME_HISTORY_MIN = 20
"""Finished pods seen before run times are learned from them (until then: the prior)."""


@dataclass
class DefragCounters:
    plans: int = 0
    evictions: int = 0
    refused_429: int = 0
    released: int = 0
    printed: list[dict] = field(default_factory=list)


class DefragReconciler:
    """One reconcile = read the world, then steps 1-3 of the module docstring."""

    def __init__(
        self,
        client: Client | None,
        config: DefragConfig,
        clock: Callable[[], float] = time.time,
        runtimes: RuntimeEstimator | None = None,
    ) -> None:
        self.client = client
        self.config = config
        self.clock = clock
        self.durations_s: dict[str, float] = {}
        self._sampled = 0
        self.leading: Callable[[], bool] = lambda: True
        """Checked before every write: a controller that lost its Lease stops at once."""
        self._pod_ids: dict[str, int] = {}
        self._id_counter = itertools.count(1)
        self.learn_runtimes = runtimes is None
        self.controller = self._controller(runtimes or ResidualLife([config.default_runtime_s]))
        self.counters = DefragCounters()
        self._backoff: dict[str, tuple[float, float]] = {}

    def _controller(self, runtimes: RuntimeEstimator) -> DefragController:
        """The defragmenter of the settings in force (:meth:`DefragConfig.settings`: a profile's,
        the flags over it), with this controller's grace and restart times."""
        from gpudefrag.profiles.build import defragmenter

        migration = MigrationModel(eviction_grace_s=self.config.grace_s, restart_s=self.config.restart_s)
        return defragmenter(self.config.settings(), migration, runtimes)

    # ------------------------------------------------------------------ world
    def read(self) -> ClusterCache:
        """The cluster now (listed from the API server), as :meth:`load` builds it."""
        nodes = [n.to_dict() for n in self.api.list(Node)]
        return self.load(nodes, [p.to_dict() for p in self.api.list(Pod, namespace="*")])

    @property
    def api(self) -> Client:
        """The API client (a dry run over given objects has none and never calls it)."""
        assert self.client is not None, "a reconciler without a client plans on given objects only"
        return self.client

    def load(self, nodes: Iterable[dict], pods: list[dict]) -> ClusterCache:
        """A cache of these Node and Pod objects, with each pod's id the same as in the earlier
        reads (the planner's memory of whom it tried when is keyed by it); finished pods feed
        the run-time estimate."""
        cache = ClusterCache(pod_ids=self._pod_ids, id_counter=self._id_counter)
        cache.replace_nodes(nodes)
        cache.replace_pods(pods)
        present = {(o.get("metadata") or {}).get("uid") for o in pods}
        for uid in [u for u in self._pod_ids if u not in present]:
            del self._pod_ids[uid]
        for obj in pods:
            self._learn_duration(obj)
        return cache

    def _learn_duration(self, obj: dict) -> None:
        """Run times of finished pods feed the run-time estimate (started -> finished)."""
        status = obj.get("status") or {}
        if status.get("phase") != "Succeeded" or not status.get("startTime"):
            return
        ends = [
            (c.get("state") or {}).get("terminated", {}).get("finishedAt")
            for c in status.get("containerStatuses") or []
        ]
        ends = [e for e in ends if e]
        if not ends:
            return
        try:
            self.durations_s[obj["metadata"]["uid"]] = max(from_rfc3339(e) for e in ends) - from_rfc3339(
                status["startTime"]
            )
        except (ValueError, KeyError):
            return

    def _refresh_runtimes(self) -> None:
        """Re-estimate run times from the finished pods seen once there are 20 and whenever their
        number has grown by a quarter (at most the latest ``MAX_HISTORY`` are kept), unless the
        caller gave the estimator."""
        n = len(self.durations_s)
        if n > MAX_HISTORY:
            for uid in list(self.durations_s)[: n - MAX_HISTORY]:
                del self.durations_s[uid]
            n = MAX_HISTORY
        if self.learn_runtimes and n >= RUNTIME_HISTORY_MIN and n >= 1.25 * self._sampled:
            self._sampled = n
            self.controller.runtimes = ResidualLife(list(self.durations_s.values()))

    # -------------------------------------------------------------- reconcile
    def reconcile(self, cache: ClusterCache | None = None) -> list[dict]:
        """One pass over ``cache`` (default: the cluster read now); returns the plans made (as
        printed by ``--dry-run``), each checked: the freed node is one its pod may use."""
        now = self.clock()
        if cache is None:
            cache = self.read()
        active = self._end_reservations(cache, now)
        for r in active:
            self._continue(cache, r, now)
        self._refresh_runtimes()
        actions = self.controller.plan(CachePort(cache, now))
        plans = []
        for plan in self._group(cache, actions, now):
            owner = cache.pods[cache.by_key[plan["pod"]]]
            if cache.index[plan["node"]] in cache.off_limits(owner):  # never planned so: checked all the same
                log.warning("plan for %s frees %s, which it may not use; dropped", plan["pod"], plan["node"])
                continue
            plans.append(plan)
            self.counters.plans += 1
            if self.config.dry_run:
                self.counters.printed.append(plan)
                continue
            if self._write_plan(cache, plan, now):
                self._continue(
                    cache,
                    Reservation(plan["node"], plan["pod"], now + self.config.reservation_s, json.dumps(plan)),
                    now,
                )
        return plans

    def _group(self, cache: ClusterCache, actions: list, now_s: float) -> list[dict]:
        """The actions as plans: the pod, the node freed for it, the victims' UIDs and per move
        the pod, its source, its destination and GPUs, and what it costs
        (:func:`~gpudefrag.defrag.cost.move_cost_gpu_s`: the work lost since its last checkpoint
        plus the grace period, then the restart, per GPU held)."""
        plans: list[dict] = []
        grace_s, restart_s = self.config.grace_s, self.config.restart_s
        for a in actions:
            if isinstance(a, Reserve):
                pod = cache.pods[cache.by_id[a.pod_id]]
                plans.append(
                    {
                        "pod": pod.key,
                        "node": cache.order[a.node],
                        "victims": [],
                        "moves": [],
                        "cost_gpu_s": 0.0,
                    }
                )
            elif isinstance(a, Move) and plans:
                rec = cache.pods[cache.by_id[a.pod_id]]
                assert rec.counted_on is not None
                run = running_pod(rec, cache.index[rec.counted_on], now_s)
                lost_s = run.work_since_checkpoint_s + grace_s
                cost = move_cost_gpu_s(
                    MovablePod(run.pod_id, run.node, run.gpus, run.spec, lost_s, 0.0), restart_s
                )
                plans[-1]["victims"].append(rec.uid)
                plans[-1]["moves"].append(
                    {
                        "pod": rec.key,
                        "from": rec.counted_on,
                        "to": cache.order[a.to_node],
                        "gpus": list(a.to_gpus),
                        "lost_work_s": round(lost_s, 3),
                        "cost_gpu_s": round(cost, 3),
                    }
                )
                plans[-1]["cost_gpu_s"] = round(plans[-1]["cost_gpu_s"] + cost, 3)
        return plans

    def _end_reservations(self, cache: ClusterCache, now: float) -> list[Reservation]:
        active = []
        for r in cache.all_reservations():
            uid = cache.by_key.get(r.pod_key)
            rec = cache.pods.get(uid) if uid is not None else None
            if rec is None or rec.node is not None or r.until_s <= now:
                self._release(r.node)
            else:
                active.append(r)
        return active

    def _release(self, node: str) -> None:
        if self.config.dry_run or not self.leading():
            return
        patch = {
            "metadata": {
                "annotations": {names.RESERVED_FOR: None, names.RESERVED_UNTIL: None, names.PLAN: None}
            }
        }
        try:
            self.api.patch(Node, node, patch)
            self.counters.released += 1
        except CALL_ERRORS as e:
            log.warning("release of %s failed: %s", node, e)

    def _write_plan(self, cache: ClusterCache, plan: dict, now: float) -> bool:
        if not self.leading():
            return False
        annotations = {
            names.RESERVED_FOR: plan["pod"],
            names.RESERVED_UNTIL: to_rfc3339(now + self.config.reservation_s),
            names.PLAN: json.dumps(plan, sort_keys=True),
        }
        patch = {"metadata": {"annotations": annotations}}
        try:
            self.api.patch(Node, plan["node"], patch)
        except CALL_ERRORS as e:
            log.warning("plan for %s not written on %s: %s", plan["pod"], plan["node"], e)
            return False
        log.info(
            "plan: free %s for %s by moving %s", plan["node"], plan["pod"], [m["pod"] for m in plan["moves"]]
        )
        return True

    def _continue(self, cache: ClusterCache, r: Reservation, now: float) -> None:
        try:
            victims = set(json.loads(r.plan).get("victims", [])) if r.plan else set()
        except (ValueError, AttributeError):
            victims = set()
        for uid in sorted(victims):
            rec = cache.pods.get(uid)
            if rec is None or rec.deleting or rec.node != r.node or rec.phase in ("Succeeded", "Failed"):
                continue
            if not may_disrupt(rec):
                log.warning("plan on %s names %s, which may not be disrupted; skipped", r.node, rec.key)
                continue
            until = self._backoff.get(uid)
            if until is not None and until[0] > now:
                continue
            self._evict(rec.key, uid, now)

    def _evict(self, key: str, uid: str, now: float) -> None:
        ns, _, name = key.partition("/")
        if self.config.dry_run or not self.leading():
            return
        try:
            evict_pod(self.api, ns, name, uid)
            self.counters.evictions += 1
            self._backoff.pop(uid, None)
        except ApiError as e:
            if e.status.code == 404:
                return
            if e.status.code == 429:
                self.counters.refused_429 += 1
            else:
                log.warning("eviction of %s failed: %s", key, e.status.message)
            delay = min(300.0, 2 * self._backoff.get(uid, (0.0, self.config.backoff_s / 2))[1])
            self._backoff[uid] = (now + delay, delay)


class DryRun(NamedTuple):
    """One pass of the controller that wrote nothing (:func:`dry_run`)."""

    cache: ClusterCache
    """What it read (the pass does not change it)."""
    plans: list[dict]
    """The plans it made, as ``gpudefrag defrag --dry-run`` prints them."""
    finished_runs: int
    """Finished pods it learned run times from (below 20 it plans with the prior)."""


def dry_run(nodes: Iterable[dict], pods: list[dict], config: DefragConfig, now_s: float) -> DryRun:
    """One pass of the controller over these objects at ``now_s``, writing nothing."""
    reconciler = DefragReconciler(None, replace(config, dry_run=True), clock=lambda: now_s)
    cache = reconciler.load(nodes, pods)
    plans = reconciler.reconcile(cache)
    return DryRun(cache, plans, len(reconciler.durations_s))


def run_controller(
    client_factory: Callable[[], Client],
    config: DefragConfig,
    stop: threading.Event,
    clock: Callable[[], float] = time.time,
    runtimes: RuntimeEstimator | None = None,
) -> DefragReconciler:
    """Reconcile every ``interval_s`` while holding the controller's Lease, until ``stop``.
    ``clock`` is the cluster's time (a scaled one in a replay); the Lease runs on the wall clock."""
    from gpudefrag.k8s.leader import LeaderElector

    reconciler = DefragReconciler(client_factory(), config, clock, runtimes)
    elector = LeaderElector(
        client_factory(),
        config.lease_name,
        config.lease_namespace,
        config.identity,
        config.lease_duration_s,
        renew_s=max(0.2, config.lease_duration_s / 5),
    )
    if config.dry_run:
        reconciler.reconcile()
        return reconciler
    reconciler.leading = lambda: elector.leading
    elector.start(stop)
    while not stop.is_set():
        if elector.leading:
            try:
                reconciler.reconcile()
            except CALL_ERRORS as e:
                log.warning("reconcile failed: %s", e)
        stop.wait(config.interval_s)
    return reconciler
