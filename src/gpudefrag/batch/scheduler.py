"""A scheduler (:class:`gpudefrag.model.port.Scheduler`) that decides pods in batches with the
:class:`~gpudefrag.batch.placer.BatchPlacer`.

It takes the cycle's pending pods in queue order, at most ``max_pending`` of them, in
consecutive batches of ``batch_size``, binding each batch's result on a copy of the cycle's
state before deciding the next.  Only the first ``solver_batches`` batches go to the solver;
later ones take FGD's plan (the solver's time goes to the pods first in line).

With the placer's ``protect_blocked`` set, it keeps every batch off the nodes protected for
the cycle's blocked pods (:mod:`gpudefrag.batch.protect`), chosen once per cycle.  The work it
reports is the solver's wall-clock and deterministic time.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.model.cluster import ClusterState, Placement, PlacementError
from gpudefrag.model.port import Bind, PendingPod, SchedulingCycle, SchedulingDecision


class BatchScheduler:
    def __init__(
        self,
        placer: BatchPlacer,
        batch_size: int = 16,
        max_pending: int = 256,
        solver_batches: int | None = None,
    ) -> None:
        self.placer = placer
        self.solver_batches = solver_batches
        self.batch_size = batch_size
        self.max_pending = max_pending
        self.name = f"batch{batch_size}"
        self.invalid = 0

    def reset(self) -> None:
        """Nothing to forget between runs."""

    def _protected(self, cycle: SchedulingCycle) -> frozenset[int]:
        if self.placer.config.protect_blocked <= 0:
            return frozenset()
        blocked = cycle.blocked
        return self.placer.protected(cycle.state, [p.spec for p in blocked]) if blocked else frozenset()

    def decide(self, cycle: SchedulingCycle) -> SchedulingDecision:
        work = cycle.state.copy()
        protected = self._protected(cycle)
        pending = cycle.pending
        n = min(len(pending), self.max_pending)
        binds: list[Bind] = []
        wall = det = 0.0
        for b, lo in enumerate(range(0, n, self.batch_size)):
            if self.solver_batches is not None and b >= self.solver_batches:
                # FGD's plan for all the later batches at once: FGD binds in queue order either
                # way, so this is the batch-by-batch answer without a state copy per batch
                rest = pending[lo:n]
                self._bind(work, rest, self.placer.fgd_plan(work, [p.spec for p in rest], protected), binds)
                break
            batch = pending[lo : min(lo + self.batch_size, n)]
            res = self.placer.place(work, [p.spec for p in batch], protected)
            wall += res.stats.total_wall_s
            det += res.stats.deterministic_s
            self._bind(work, batch, res.placements, binds)
        return SchedulingDecision(binds, n, wall, det)

    def _bind(
        self,
        work: ClusterState,
        pods: Sequence[PendingPod],
        placements: Sequence[Placement | None],
        binds: list[Bind],
    ) -> None:
        """Bind each placed pod on ``work`` and record it; count placements that do not fit."""
        for pod, p in zip(pods, placements):
            if p is None:
                continue
            try:
                work.bind(p)
            except PlacementError:
                self.invalid += 1
                continue
            binds.append(Bind(pod.pod_id, p))
