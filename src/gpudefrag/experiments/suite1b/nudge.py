"""A one-decision nudge of a per-pod policy: the noise floor of suite 1b's paired differences.

:class:`NudgedScheduler` schedules exactly as :class:`~gpudefrag.policies.scheduler.PolicyScheduler`
with the same policy, except once: in the first scheduling cycle that starts at or after
``at_s``, the first pod the policy can place on two or more nodes goes to its second choice (the
policy's answer once its first choice is masked).  Every later decision is the policy's own, on
whatever state that one bind leads to.

Run next to the plain policy on the same scenario (suite 1b's variant ``fgd-nudged``, nudged
where the metrics window starts), the paired difference is what one changed decision does to a
run.  Near saturation the runs then drift apart, so the per-seed spread of that difference is a
floor: a variant whose paired difference to FGD spreads no more than this is not told apart
from one changed decision by the seeds (docs/tuning-suite1b.md, fifteenth part).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import SchedulingCycle, SchedulingDecision
from gpudefrag.policies.base import Policy
from gpudefrag.policies.scheduler import PolicyScheduler


class _SecondChoice(Policy):
    """``policy`` with its first answer masked, once; then ``policy`` itself."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.nudged: Placement | None = None
        """The placement the nudge made (``None`` until it has)."""
        self.first: Placement | None = None
        """The policy's own answer for the nudged pod."""

    def reset(self) -> None:
        self.policy.reset()

    def score_nodes(self, state: ClusterState, pod: PodSpec) -> NDArray[np.int64]:
        return self.policy.score_nodes(state, pod)

    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        best = self.policy.select(state, pod)
        if best is None or self.nudged is not None:
            return best
        masked = state.copy()
        masked.mask(best.node)
        second = self.policy.select(masked, pod)
        if second is None:  # one feasible node: nothing to nudge, wait for the next pod
            return best
        self.first, self.nudged = best, second
        return second


class NudgedScheduler(PolicyScheduler):
    """``PolicyScheduler(policy)`` with one decision nudged to its second choice at ``at_s``
    (module docstring)."""

    def __init__(self, policy: Policy, at_s: float, max_pending: int = 256) -> None:
        if not math.isfinite(at_s) or at_s < 0:
            raise ValueError(f"at_s must be a finite time >= 0, got {at_s}")
        super().__init__(policy, max_pending)
        self.name = f"policy:{policy.name}-nudged"
        self.at_s = at_s
        self._nudge = _SecondChoice(policy)
        self.nudged_at_s: float | None = None
        """When the nudge happened (``None``: not yet)."""

    @property
    def nudged(self) -> Placement | None:
        """The nudged placement, once made."""
        return self._nudge.nudged

    @property
    def first_choice(self) -> Placement | None:
        """The policy's own answer for the nudged pod, once the nudge is made."""
        return self._nudge.first

    def reset(self) -> None:
        super().reset()
        self._nudge = _SecondChoice(self.policy)
        self.nudged_at_s = None

    def decide(self, cycle: SchedulingCycle) -> SchedulingDecision:
        if self.nudged_at_s is not None or cycle.now_s < self.at_s:
            return super().decide(cycle)
        plain = self.policy
        self.policy = self._nudge
        try:
            decision = super().decide(cycle)
        finally:
            self.policy = plain
        if self._nudge.nudged is not None:
            self.nudged_at_s = cycle.now_s
        return decision
