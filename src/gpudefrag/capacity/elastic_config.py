"""Elastic mode's settings (the elastic component of suite 3's simulator,
:mod:`gpudefrag.sim.capacity_elastic`; a profile's ``[elastic]``): every ``tick_s`` nodes idle
for ``idle_off_s`` are powered off (``warm_fraction`` of the pool kept on), nodes are powered
on for blocked jobs and are ready ``provision_s`` later, and lightly used nodes (at most
``drain_max_used_gpus`` GPUs in use) are drained when their jobs' moves cost at most
``drain_max_cost_gpu_s``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Interval

from gpudefrag.settings import Fraction, Seconds

__all__ = ["ElasticConfig"]


@dataclass(frozen=True)
class ElasticConfig:
    """Elastic mode's settings (module docstring)."""

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # unknown keys in a file: an error

    tick_s: Annotated[float, Interval(gt=0, le=86_400)] = 60.0
    idle_off_s: Seconds = 1800.0
    warm_fraction: Fraction = 0.05
    provision_s: Seconds = 600.0
    drain_max_used_gpus: Annotated[int, Interval(ge=0, le=64)] = 2
    drain_max_cost_gpu_s: Annotated[float, Interval(ge=0, le=1e12)] = 2 * 3600.0
