"""Schedulers for the time-driven simulator: per-pod policies and the batch placer.

Each implements :class:`gpudefrag.sim.timed_types.Scheduler`: it decides placements on the
snapshot it is given without changing it and says how long the decision took.
:func:`fit_on_node` is the ``best``-rule fit the simulator uses for reserved pods.
"""

from __future__ import annotations

import time

from gpudefrag.model.cluster import ClusterState, Placement, PlacementError
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.gpu_choice import choose_gpus_best
from gpudefrag.sim.timed_types import LatencyModel


class PolicyScheduler:
    """Places pending pods one by one with a per-pod policy (FGD, BestFit...) on a copy.

    Within a session only binds happen, so a pod shape that fitted nowhere fits nowhere later
    in the session: it is not asked again (the policy must return ``None`` only when no node is
    feasible, as every registered policy does).
    """

    def __init__(self, policy, latency: LatencyModel | None = None, max_pending: int = 256) -> None:
        self.policy = policy
        self.latency = latency or LatencyModel()
        self.max_pending = max_pending
        self.name = f"policy:{policy.name}"

    def reset(self) -> None:
        self.policy.reset()

    def decide(self, state, pending, now_s):
        started = time.perf_counter()
        work = state.copy()
        out: list[Placement | None] = [None] * len(pending)
        failed: set[tuple[int, ...]] = set()
        n = min(len(pending), self.max_pending)
        for i in range(n):
            pod = pending[i]
            key = pod.fit_key
            if key in failed:
                continue
            p = self.policy.select(work, pod)
            if p is None:
                failed.add(key)
                continue
            work.bind(p)
            out[i] = p
        return out, self.latency.latency(n, time.perf_counter() - started, 0.0)


class BatchScheduler:
    """Decides the pending pods in consecutive batches with a :class:`BatchPlacer`, binding
    each batch's result on a copy before deciding the next.  Only the first
    ``solver_batches`` batches of a session go to the solver; later ones take FGD's plan
    (the solver's time goes to the pods first in line).

    With the placer's ``protect_blocked`` set, it asks the simulator for the blocked (parked)
    pods (``wants_blocked``) and keeps every batch off the nodes protected for them, chosen once
    per session on the snapshot."""

    def __init__(
        self,
        placer,
        batch_size: int = 16,
        latency: LatencyModel | None = None,
        max_pending: int = 256,
        solver_batches: int | None = None,
    ) -> None:
        self.placer = placer
        self.solver_batches = solver_batches
        self.batch_size = batch_size
        self.latency = latency or LatencyModel.deterministic()
        self.max_pending = max_pending
        self.name = f"batch{batch_size}"
        self.invalid = 0
        self.wants_blocked = placer.config.protect_blocked > 0

    def decide(self, state, pending, now_s, blocked=()):
        work = state.copy()
        protected = self.placer.protected(state, blocked) if blocked else frozenset()
        n = min(len(pending), self.max_pending)
        out: list[Placement | None] = [None] * len(pending)
        wall = det = 0.0
        for b, lo in enumerate(range(0, n, self.batch_size)):
            batch = list(pending[lo : min(lo + self.batch_size, n)])
            if self.solver_batches is not None and b >= self.solver_batches:
                placements = self.placer.fgd_plan(work, batch, protected)
            else:
                res = self.placer.place(work, batch, protected)
                wall += res.stats.total_wall_s
                det += res.stats.deterministic_s
                placements = res.placements
            for k, p in enumerate(placements):
                if p is None:
                    continue
                try:
                    work.bind(p)
                except PlacementError:
                    self.invalid += 1
                    continue
                out[lo + k] = p
        return out, self.latency.latency(n, wall, det)


def fit_on_node(state: ClusterState, node: int, pod: PodSpec) -> tuple[int, ...] | None:
    """GPUs (``best`` rule) for ``pod`` on ``node`` if it fits there, else ``None``."""
    try:
        gpus = choose_gpus_best(state.gpu_milli_left[node], int(state.gpu_count[node]), pod)
    except ValueError:
        return None
    return gpus if state.why_not_fits(node, pod, gpus) is None else None
