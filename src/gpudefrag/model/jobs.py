"""Jobs, their pods (gang members) and topology constraints.

A job asks for ``gpus`` whole GPUs, or, when ``gpu_milli`` is below 1000, a share of one GPU
(``gpus == 1``; an inference-like pod that may share a GPU).  A job of at most ``gpus_per_node``
GPUs is one pod on one node; a larger job is a gang of pods of ``gpus_per_node`` GPUs, one per
node, plus one pod of the remainder when the size is not a multiple (:func:`pod_sizes`).  A gang
is all-or-nothing: no member binds until every member has a place.

A topology constraint follows Kueue's TAS semantics: ``required`` at a level puts every pod of
the job in one domain of that level, or the job waits; ``preferred`` starts at that level and
goes up one level at a time when no single domain can hold the job, ending with no constraint.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.errors import ConfigError

__all__ = [
    "GPU_MILLI_PER_GPU",
    "MODES",
    "Constraint",
    "Job",
    "parse_constraint",
    "pod_sizes",
]

GPU_MILLI_PER_GPU = 1000
MODES = ("required", "preferred")


@dataclass(frozen=True, slots=True)
class Constraint:
    """``mode`` is ``"required"`` or ``"preferred"``; ``level`` a topology level name."""

    mode: str
    level: str

    def __str__(self) -> str:
        return f"{self.mode}:{self.level}"


def parse_constraint(text: str) -> Constraint | None:
    """``""`` or ``"none"`` -> None; ``"required:leaf"`` / ``"preferred:nvlink"`` -> Constraint."""
    t = text.strip()
    if t in ("", "none"):
        return None
    mode, sep, level = t.partition(":")
    if not sep or mode not in MODES or not level:
        raise ConfigError(f"topology constraint '{text}': expected required:LEVEL, preferred:LEVEL or none")
    return Constraint(mode, level)


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a trace.  Times in seconds from the trace's origin."""

    job_id: int
    submit_s: float
    duration_s: float
    gpus: int
    gpu_milli: int = GPU_MILLI_PER_GPU
    priority: int = 0
    constraint: Constraint | None = None
    name: str = ""

    @property
    def is_sharing(self) -> bool:
        return self.gpu_milli < GPU_MILLI_PER_GPU

    @property
    def gpu_share(self) -> float:
        """GPUs the job occupies (a fraction for a sharing pod)."""
        return self.gpus * self.gpu_milli / GPU_MILLI_PER_GPU


def pod_sizes(gpus: int, gpus_per_node: int) -> list[int]:
    """Whole GPUs per pod: one pod when ``gpus <= gpus_per_node``; else full-node pods plus a
    remainder pod (12 GPUs on 8-GPU nodes -> ``[8, 4]``)."""
    if gpus <= 0 or gpus_per_node <= 0:
        raise ValueError("gpus and gpus_per_node must be positive")
    full, rest = divmod(gpus, gpus_per_node)
    if full == 0:
        return [gpus]
    return [gpus_per_node] * full + ([rest] if rest else [])
