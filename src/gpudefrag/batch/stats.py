"""One batch decision's result: the placements and the solver's statistics."""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.model.cluster import Placement

__all__ = ["BatchResult", "BatchStats"]


@dataclass(frozen=True)
class BatchStats:
    """One batch's solver statistics (for the per-batch trace)."""

    size: int
    patterns: int
    variables: int
    constraints: int
    status: str
    source: str
    fallback: str
    solver_objective: int | None
    hint_objective: int
    fgd_gpu_milli: int
    chosen_gpu_milli: int
    fgd_frag_milli: float
    chosen_frag_milli: float
    solve_wall_s: float
    deterministic_s: float
    total_wall_s: float
    wall_limited: bool


@dataclass
class BatchResult:
    """The placements to bind (in batch order) and the statistics of the decision."""

    placements: list[Placement | None]
    stats: BatchStats
