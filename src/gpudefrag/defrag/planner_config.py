"""The defragmentation planner's settings (:class:`PlannerConfig`), apart from the planner so that
settings and flags can be declared without loading it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar

from annotated_types import Interval

from gpudefrag.model.migration import MigrationModel

__all__ = ["PlannerConfig"]


@dataclass(frozen=True)
class PlannerConfig:
    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # unknown keys in a file: an error

    max_moves: Annotated[int, Interval(ge=1, le=64)] = 4
    migration: MigrationModel = field(default_factory=MigrationModel)
    """Grace and restart times: a move costs ``restart_s``; the room is ready after the grace."""
    margin: Annotated[float, Interval(gt=-1, le=1000)] = 0.5
    destination_search_limit: Annotated[int, Interval(ge=1, le=10_000_000)] = 2_000
    """Nodes visited by one destination search before it gives up (counts as "no destination")."""
    harm_weight: Annotated[float, Interval(ge=0, le=1000)] = 0.0
    """Weight of the queue harm (:func:`gpudefrag.defrag.benefit.queue_harm_gpu_s`) added to a
    plan's cost when choosing the node and applying hysteresis; 0 ignores it."""
    wait_draws: Annotated[int, Interval(ge=0, le=4096)] = 0
    """Joint draws of the running pods' remaining run times over which the natural wait is
    averaged (:mod:`gpudefrag.defrag.natural_wait`); 0 uses each pod's expected remaining run
    time instead (:func:`gpudefrag.defrag.benefit.plan_benefit_gpu_s`)."""

    def __post_init__(self) -> None:
        if self.wait_draws < 0:
            raise ValueError(f"wait_draws must be at least 0, got {self.wait_draws}")
