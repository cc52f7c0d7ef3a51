"""Preemption victims for suite 3: which lower-priority running jobs a blocked job of higher
priority evicts (or, for ours, moves) to start now.

The interface (:class:`~gpudefrag.model.session.RunningInfo`, :class:`VictimPlan`, :class:`VictimRule`), the plan rules and
:func:`validate_plan` are in :mod:`gpudefrag.capacity.victims_base`; the three rules:

* :class:`KubeDefaultVictims` (:mod:`~gpudefrag.capacity.victims_kube`): kube-scheduler's
  DefaultPreemption, a node (or, for a gang, a topology domain) per candidate, victims reprieved
  by importance, the candidate picked by upstream's criteria (lowest priorities, fewest
  victims, latest start);
* :class:`KaiVictims` (:mod:`~gpudefrag.capacity.victims_kai`): KAI-Scheduler's preempt action,
  preemptible jobs only, taken newest first within the lowest priority;
* :class:`CheckpointAwareVictims` (:mod:`~gpudefrag.capacity.victims_ours`): ours, the room that
  throws away the least work since the victims' last checkpoints, moving a victim instead of
  killing it when it fits elsewhere.

Every rule takes only jobs of lower priority, evicts gangs whole, and returns None when no set of
allowed victims makes room.
"""

from __future__ import annotations

from gpudefrag.capacity.victims_base import (
    VictimPlan,
    VictimRule,
    plan_cost_gpu_s,
    validate_plan,
    victim_cost_gpu_s,
)
from gpudefrag.capacity.victims_kai import KaiVictims, kai_victim_order
from gpudefrag.capacity.victims_kube import KubeDefaultVictims
from gpudefrag.capacity.victims_ours import CheckpointAwareVictims

__all__ = [
    "CheckpointAwareVictims",
    "KaiVictims",
    "KubeDefaultVictims",
    "VictimPlan",
    "VictimRule",
    "kai_victim_order",
    "plan_cost_gpu_s",
    "validate_plan",
    "victim_cost_gpu_s",
]
