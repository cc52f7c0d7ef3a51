"""What a migration costs, in GPU-seconds.

A moved pod loses the work done since its last checkpoint (checkpoints fall at
``start + phase + k * interval``, measured in the pod's own run time) and then needs
``restart_s`` to come back up; both are charged for every GPU it holds:
``cost = gpus * (lost_work_s + restart_s)``.  CPU-only pods hold no GPU and cost
``restart_s * 0.01`` GPU-seconds so that moving them is never free.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.model.pods import PodSpec

CPU_POD_GPU_EQUIVALENT = 0.01


@dataclass(frozen=True)
class MovablePod:
    """A running pod as the planner sees it."""

    pod_id: int
    node: int
    gpus: tuple[int, ...]
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_model_mask: int
    run_time_s: float
    remaining_s: float
    checkpoint_interval_s: float
    checkpoint_phase_s: float
    movable: bool = True

    @property
    def gpu_weight(self) -> float:
        """GPUs held (fractional for sharing pods), with a floor for CPU-only pods."""
        held = self.num_gpu * self.gpu_milli / 1000.0
        return held if held > 0 else CPU_POD_GPU_EQUIVALENT

    @property
    def spec(self) -> PodSpec:
        """The pod's request, as the placement helpers take it."""
        return PodSpec(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.gpu_model_mask)


def lost_work_s(run_time_s: float, interval_s: float, phase_s: float) -> float:
    """Run time since the last checkpoint (all of it if none has happened yet)."""
    if interval_s <= 0 or run_time_s < phase_s:
        return max(run_time_s, 0.0)
    return (run_time_s - phase_s) % interval_s


def move_cost_gpu_s(pod: MovablePod, restart_s: float) -> float:
    """GPU-seconds a move of ``pod`` costs: lost work plus restart, per GPU held."""
    lost = lost_work_s(pod.run_time_s, pod.checkpoint_interval_s, pod.checkpoint_phase_s)
    return pod.gpu_weight * (lost + restart_s)
