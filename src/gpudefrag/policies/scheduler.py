"""A scheduler (:class:`gpudefrag.model.port.Scheduler`) that places pods one by one with a
per-pod policy (FGD, BestFit...).

It takes the cycle's pending pods in queue order, at most ``max_pending`` of them, and binds
each where the policy says on the cycle's state itself, unbinding them all before it returns
(the state is left as it was; no copy of every node, and a policy index attached to that state
serves the decisions).  Within a cycle only binds happen,
so a pod shape that fitted nowhere fits nowhere later in the cycle: it is not asked again (the
policy must return ``None`` only when no node is feasible, as every registered policy does).
"""

from __future__ import annotations

import time

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.port import Bind, SchedulingCycle, SchedulingDecision
from gpudefrag.policies.base import Policy


class PolicyScheduler:
    def __init__(self, policy: Policy, max_pending: int = 256) -> None:
        self.policy = policy
        self.max_pending = max_pending
        self.name = f"policy:{policy.name}"

    def reset(self) -> None:
        self.policy.reset()

    def attach(self, state: ClusterState) -> None:
        """Keep the policy's incremental index of ``state``, the long-lived state the driver's
        cycles decide on (:class:`~gpudefrag.model.port.IndexingScheduler`)."""
        self.policy.attach(state)

    def decide(self, cycle: SchedulingCycle) -> SchedulingDecision:
        started = time.perf_counter()
        work = cycle.state
        binds: list[Bind] = []
        failed: set[tuple[int, ...]] = set()
        pending = cycle.pending
        n = min(len(pending), self.max_pending)
        try:
            for i in range(n):
                pod = pending[i]
                key = pod.spec.fit_key
                if key in failed:
                    continue
                p = self.policy.select(work, pod.spec)
                if p is None:
                    failed.add(key)
                    continue
                work.bind(p)
                binds.append(Bind(pod.pod_id, p))
        finally:
            for b in reversed(binds):
                work.unbind(b.placement)
        return SchedulingDecision(binds, n, time.perf_counter() - started, 0.0)
