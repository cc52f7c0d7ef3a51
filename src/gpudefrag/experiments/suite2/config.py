"""Suite 2's settings and its variants (placement policy, optional defragmenter).

Variants:

* baselines, re-implemented from their upstream source: ``volcano`` (gang + GPU binpack +
  HyperNode), ``kueue`` (Kueue TAS: BestFit for gangs, LeastFreeCapacity for single pods),
  ``kai`` (KAI topology + binpack), ``kai+consolidate`` (KAI's Consolidate action on top),
  ``slurm`` (topology/tree best fit), ``fgd`` (FGD per pod inside the chosen domain);
* ours: ``ours`` (the gang-aware measure, :mod:`gpudefrag.gangs.ours`), ``ours-batch`` (a
  pass's first jobs placed jointly by CP-SAT, :mod:`gpudefrag.gangs.batch`) and ``ours+defrag``
  (with the checkpoint-aware defragmenter, :mod:`gpudefrag.gangs.defrag`; drain reservations
  are off by default, ``DefragConfig.drain_after_s`` turns them on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from annotated_types import Interval

from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.checks import PercentPoints
from gpudefrag.gangs.defrag import DefragConfig
from gpudefrag.gangs.moves import GangDefragmenter
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.model.jobs import Job
from gpudefrag.profiles.jobs import job_actions
from gpudefrag.profiles.schema import AllocateSettings, Profile, shipped

__all__ = ["BASELINES", "OURS", "VARIANTS", "Acceptance2", "Suite2Config", "make_variant"]

BASELINES = ("volcano", "kueue", "kai", "kai+consolidate", "slurm", "fgd")
OURS = ("ours", "ours-batch", "ours+defrag")
VARIANTS = BASELINES + OURS
#: Baselines that place only (no moves): "the best baseline" of the placement bar is among these.
PLACEMENT_BASELINES = ("volcano", "kueue", "kai", "slurm", "fgd")


@dataclass(frozen=True)
class Acceptance2:
    """The thresholds suite 2's runs are checked against (the bars of docs/suite2.md; pp: percentage points
    of GPU allocation, differences paired by window)."""

    # ours - the best placement-only baseline, at loads above 1.0 (and the paired CI above 0)
    placement_min_gain_pp: PercentPoints = 0.5
    # ours - the best placement-only baseline, at load 1.0 and below: no worse than this
    placement_floor_pp: PercentPoints = -0.1
    # ours+defrag - volcano and - kai+consolidate at the highest load (and the paired CI above 0)
    defrag_min_gain_vs_volcano_pp: PercentPoints = 3.0
    defrag_min_gain_vs_consolidate_pp: PercentPoints = 1.0
    # ours+defrag - volcano at the highest load, net of migration waste (goodput_pct)
    defrag_min_net_gain_vs_volcano_pp: PercentPoints = 2.0
    # the worst run's p99 time of one scheduling pass of ours
    pass_p99_max_ms: Annotated[float, Interval(gt=0, le=86_400_000)] = 100.0
    # the whole suite's wall time on 2 cores
    wall_max_s: Annotated[float, Interval(gt=0, le=7 * 86_400)] = 3600.0


@dataclass(frozen=True)
class Suite2Config:
    windows: tuple[str, ...]
    set_name: str
    loads: tuple[float, ...] = (1.0, 1.25, 1.5)
    variants: tuple[str, ...] = VARIANTS
    topology: str = "superpod"
    leaf_nodes: int = 32
    gang_constraint: str = "preferred:leaf"
    checkpoint_interval_s: float = 1800.0
    restart_s: float = 300.0
    defrag_tick_s: float = 60.0
    defrag: DefragConfig = field(default_factory=lambda: shipped("suite2").defragment.gangs)
    """``ours+defrag``'s defragmenter: the shipped ``suite2`` profile's ``[defragment.gangs]``."""
    acceptance: Acceptance2 = field(default_factory=Acceptance2)


def variant_profile(name: str, cfg: Suite2Config) -> Profile:
    """The profile variant ``name`` runs: a baseline's placer alone (``kai+consolidate``: with
    KAI's Consolidate), ours alone or with CP-SAT batches, or the shipped ``suite2`` profile
    with ``cfg.defrag`` as its gang defragmenter's settings (``ours+defrag``)."""
    if name not in VARIANTS:
        raise ConfigError(f"unknown suite 2 variant {name!r}; known: {', '.join(VARIANTS)}")
    if name == "ours+defrag":
        base = shipped("suite2")
        return base.model_copy(
            update={"defragment": base.defragment.model_copy(update={"gangs": cfg.defrag})}
        )
    if name == "kai+consolidate":
        return Profile(name=name, actions=("allocate", "consolidate"), allocate=AllocateSettings(gangs="kai"))
    return Profile(name=name, allocate=AllocateSettings.model_validate({"gangs": name}))


def make_variant(
    name: str, jobs: list[Job], gpus_per_node: int, cfg: Suite2Config
) -> tuple[GangPolicy, GangDefragmenter | None]:
    """The policy and defragmenter of variant ``name`` (:func:`variant_profile`, built by
    :func:`~gpudefrag.profiles.jobs.job_actions`); the workload's size mix (for FGD's typical
    pods and our measure) comes from the run's own jobs."""
    return job_actions(variant_profile(name, cfg), jobs, cfg.restart_s)
