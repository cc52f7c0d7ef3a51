"""What a migration costs, in GPU-seconds.

A moved pod loses ``lost_work_s`` of work (what it ran since its last checkpoint, through the
end of the eviction grace period; see :mod:`gpudefrag.model.migration`) and then needs
``restart_s`` to come back up; both are charged for every GPU it holds:
``cost = gpus * (lost_work_s + restart_s)``.  CPU-only pods hold no GPU and cost
``restart_s * 0.01`` GPU-seconds so that moving them is never free.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.model.migration import disruption_cost_gpu_s
from gpudefrag.model.pods import PodSpec

CPU_POD_GPU_EQUIVALENT = 0.01


@dataclass(frozen=True)
class MovablePod:
    """A running pod as the planner sees it: where it is, what it asks, what a move would lose
    (``lost_work_s``) and how long it is expected to run on (``remaining_s``)."""

    pod_id: int
    node: int
    gpus: tuple[int, ...]
    spec: PodSpec
    lost_work_s: float
    remaining_s: float
    movable: bool = True
    excluded_nodes: frozenset[int] = frozenset()
    """Nodes this pod may not be moved to (its selectors, affinity, taints)."""

    @property
    def gpu_weight(self) -> float:
        """GPUs held (fractional for sharing pods), with a floor for CPU-only pods."""
        held = self.spec.num_gpu * self.spec.gpu_milli / 1000.0
        return held if held > 0 else CPU_POD_GPU_EQUIVALENT


def move_cost_gpu_s(pod: MovablePod, restart_s: float) -> float:
    """GPU-seconds a move of ``pod`` costs (:func:`~gpudefrag.model.migration.disruption_cost_gpu_s`
    of the GPUs it holds)."""
    return disruption_cost_gpu_s(pod.gpu_weight, pod.lost_work_s, restart_s)
