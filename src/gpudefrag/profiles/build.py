"""Deciders built from a profile's settings, the same for the simulators and the Kubernetes
driver: the defragmenter (:func:`defragmenter`)."""

from __future__ import annotations

from dataclasses import replace

from gpudefrag.defrag.controller import DefragController
from gpudefrag.defrag.planner import DefragPlanner
from gpudefrag.model.migration import MigrationModel
from gpudefrag.model.port import RuntimeEstimator
from gpudefrag.profiles.schema import DefragmentSettings

__all__ = ["defragmenter"]


def defragmenter(
    settings: DefragmentSettings, migration: MigrationModel, runtimes: RuntimeEstimator
) -> DefragController:
    """The defragmenter of ``settings``, for a cluster whose moves take ``migration``'s times,
    estimating run times with ``runtimes``."""
    return DefragController(
        DefragPlanner(replace(settings.planner, migration=migration)),
        runtimes,
        tick_interval_s=settings.tick_interval_s,
        replan_after_s=settings.replan_after_s,
        plans_per_tick=settings.plans_per_tick,
        blocked_pods_per_tick=settings.blocked_pods_per_tick,
        small_pods_per_tick=settings.small_pods_per_tick,
        small_plans_per_tick=settings.small_plans_per_tick,
        headroom_fraction=settings.headroom_fraction,
        min_wait_s=settings.min_wait_s,
        small_margin=settings.small_margin,
    )
