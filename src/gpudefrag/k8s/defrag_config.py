"""The defragmentation controller's settings (:class:`DefragConfig`), apart from the controller so
that the command line can declare its flags without loading the controller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from annotated_types import Interval

if TYPE_CHECKING:
    from gpudefrag.profiles.schema import DefragmentSettings

__all__ = ["DefragConfig"]


@dataclass
class DefragConfig:
    """The controller's settings; each range is its flag's (:mod:`gpudefrag.settings`)."""

    interval_s: Annotated[float, Interval(gt=0, le=86_400)] = 10.0
    """Seconds between reconciles."""
    reservation_s: Annotated[float, Interval(gt=0, le=86_400)] = 600.0
    """How long a freed node stays reserved for its pod."""
    restart_s: Annotated[float, Interval(ge=0, le=86_400)] = 60.0
    """Seconds a moved pod takes to come back (the cost model)."""
    grace_s: Annotated[float, Interval(ge=0, le=86_400)] = 30.0
    """The eviction grace period a moved pod keeps running through (the cost model)."""
    defragment: DefragmentSettings | None = None
    """The defragmenter's settings: a profile's (``--config``); None: the shipped ``kubernetes``
    profile's."""
    max_moves: Annotated[int, Interval(ge=1, le=64)] | None = None
    """Moves per plan at most (None: the settings')."""
    headroom_fraction: Annotated[float, Interval(ge=0, lt=1)] | None = None
    """A pod of 2+ GPUs gets a plan only while this share of the GPUs would stay free with it
    placed (None: the settings')."""
    backoff_s: float = 5.0
    default_runtime_s: Annotated[float, Interval(gt=0, le=365 * 86_400)] = 3600.0
    """Run-time prior until pods have been seen to finish."""
    dry_run: bool = False
    identity: str = "gpudefrag-defrag"
    lease_name: str = "gpudefrag-defrag"
    lease_namespace: str = "kube-system"
    lease_duration_s: Annotated[int, Interval(ge=1, le=3600)] = 15

    def settings(self) -> DefragmentSettings:
        """The defragmenter's settings in force: :attr:`defragment` with the two flags over it."""
        from dataclasses import replace

        from gpudefrag.profiles.schema import shipped

        base = self.defragment if self.defragment is not None else shipped("kubernetes").defragment
        update: dict[str, object] = {}
        if self.max_moves is not None:
            update["planner"] = replace(base.planner, max_moves=self.max_moves)
        if self.headroom_fraction is not None:
            update["headroom_fraction"] = self.headroom_fraction
        return base.model_copy(update=update) if update else base
