"""A scheduler (:class:`gpudefrag.model.port.Scheduler`) that decides pods in batches with the
:class:`~gpudefrag.batch.placer.BatchPlacer`.

It takes the cycle's pending pods in queue order, at most ``max_pending`` of them, in
consecutive batches of ``batch_size``, binding each batch's result on the cycle's state before
deciding the next (and unbinding them all before it returns: the state is left as it was, and
a placer attached to it, :meth:`attach`, keeps FGD's index of it).  Only the first
``solver_batches`` batches go to the solver; later ones take FGD's plan (the solver's time goes
to the pods first in line).

With the placer's ``protect_blocked`` set, it keeps every batch off the nodes protected for
the cycle's blocked pods (:mod:`gpudefrag.batch.protect`), chosen once per cycle.  With its
``age_weight_milli_per_s`` set, each pod's wait so far (the cycle's time less its arrival) gives
it an age bonus in the solver's objective.  With its ``lifetime_ties`` set and a run-time
estimator given, the cycle's running pods give every node an expected busy time
(:mod:`gpudefrag.batch.lifetime`) that breaks FGD's score ties; each pod the cycle places
extends its node's busy time to the pod's expected run time.  The work it reports is the
solver's wall-clock and deterministic time.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudefrag.batch.lifetime import ExpectedRunTimes, NodeLifetimes, busy_until_s
from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.stats import BatchStats
from gpudefrag.model.cluster import ClusterState, Placement, PlacementError
from gpudefrag.model.port import Bind, PendingPod, RuntimeEstimator, SchedulingCycle, SchedulingDecision


class BatchScheduler:
    def __init__(
        self,
        placer: BatchPlacer,
        batch_size: int = 16,
        max_pending: int = 256,
        solver_batches: int | None = None,
        runtimes: RuntimeEstimator | None = None,
    ) -> None:
        """``runtimes``: where expected run times come from, for the placer's
        ``lifetime_ties`` (without it, FGD's ties go by tie rank alone)."""
        self.placer = placer
        self.runtimes = runtimes
        self.solver_batches = solver_batches
        self.batch_size = batch_size
        self.max_pending = max_pending
        self.name = f"batch{batch_size}"
        self.invalid = 0
        self.last_stats: list[BatchStats] = []
        """The statistics of each batch the last cycle sent to the placer (diagnostics)."""

    def reset(self) -> None:
        """Forget the placer's FGD index and score cache (an attached state is no longer
        watched)."""
        self.placer.fgd.reset()

    def attach(self, state: ClusterState) -> None:
        """Keep the placer's FGD index of ``state``, the long-lived state the driver's cycles
        decide on (:class:`~gpudefrag.model.port.IndexingScheduler`)."""
        self.placer.attach(state)

    def _protected(self, cycle: SchedulingCycle) -> frozenset[int]:
        if self.placer.config.protect_blocked <= 0:
            return frozenset()
        blocked = cycle.blocked
        return self.placer.protected(cycle.state, [p.spec for p in blocked]) if blocked else frozenset()

    def _lifetimes(self, cycle: SchedulingCycle) -> NodeLifetimes | None:
        """The nodes' expected busy times in this cycle, when the placer breaks ties by them."""
        runtimes = self.runtimes
        if not self.placer.config.lifetime_ties or runtimes is None:
            return None
        now_s = cycle.now_s
        return NodeLifetimes(lambda nodes: busy_until_s(nodes, cycle.running_on, runtimes, now_s))

    def decide(self, cycle: SchedulingCycle) -> SchedulingDecision:
        work = cycle.state
        protected = self._protected(cycle)
        lifetimes = self._lifetimes(cycle)
        pending = cycle.pending
        n = min(len(pending), self.max_pending)
        run_s: Sequence[float] = (
            ExpectedRunTimes(pending[:n], self.runtimes) if lifetimes is not None and self.runtimes else ()
        )
        weigh_age = self.placer.config.age_weight_milli_per_s > 0
        binds: list[Bind] = []
        wall = det = 0.0
        self.last_stats = []
        try:
            for b, lo in enumerate(range(0, n, self.batch_size)):
                if self.solver_batches is not None and b >= self.solver_batches:
                    # FGD's plan for all the later batches at once: FGD binds in queue order
                    # either way, so this is the batch-by-batch answer
                    rest = pending[lo:n]
                    plan = self.placer.fgd_plan(
                        work, [p.spec for p in rest], protected, lifetimes, run_s[lo:n]
                    )
                    self._bind(work, rest, plan, binds)
                    break
                hi = min(lo + self.batch_size, n)
                batch = pending[lo:hi]
                waited_s = [cycle.now_s - p.arrival_s for p in batch] if weigh_age else []
                res = self.placer.place(
                    work, [p.spec for p in batch], protected, waited_s, lifetimes, run_s[lo:hi]
                )
                self.last_stats.append(res.stats)
                wall += res.stats.total_wall_s
                det += res.stats.deterministic_s
                self._bind(work, batch, res.placements, binds, lifetimes, run_s[lo:hi])
        finally:
            for bind in reversed(binds):
                work.unbind(bind.placement)
        return SchedulingDecision(binds, n, wall, det)

    def _bind(
        self,
        work: ClusterState,
        pods: Sequence[PendingPod],
        placements: Sequence[Placement | None],
        binds: list[Bind],
        lifetimes: NodeLifetimes | None = None,
        run_s: Sequence[float] = (),
    ) -> None:
        """Bind each placed pod on ``work`` and record it (and, with ``lifetimes``, extend its
        node's busy time to ``run_s[i]``); count placements that do not fit."""
        for i, (pod, p) in enumerate(zip(pods, placements)):
            if p is None:
                continue
            try:
                work.bind(p)
            except PlacementError:
                self.invalid += 1
                continue
            binds.append(Bind(pod.pod_id, p))
            if lifetimes is not None:
                lifetimes.bind(p.node, run_s[i])
