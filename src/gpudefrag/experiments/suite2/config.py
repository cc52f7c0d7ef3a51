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

from dataclasses import dataclass, field, replace

from gpudefrag.errors import ConfigError
from gpudefrag.gangs.batch import BatchGangPlacer
from gpudefrag.gangs.defrag import CheckpointDefrag, DefragConfig
from gpudefrag.gangs.fgd_gang import FgdGang
from gpudefrag.gangs.kai import KaiBinpack
from gpudefrag.gangs.kai_consolidate import KaiConsolidate
from gpudefrag.gangs.kueue_tas import KueueTAS
from gpudefrag.gangs.moves import GangDefragmenter
from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.gangs.reserve import Reservations, ReservingPolicy
from gpudefrag.gangs.slurm_tree import SlurmTree
from gpudefrag.gangs.volcano import VolcanoBinpack
from gpudefrag.model.jobs import Job
from gpudefrag.profiles.schema import shipped

__all__ = ["BASELINES", "OURS", "VARIANTS", "Suite2Config", "make_variant"]

BASELINES = ("volcano", "kueue", "kai", "kai+consolidate", "slurm", "fgd")
OURS = ("ours", "ours-batch", "ours+defrag")
VARIANTS = BASELINES + OURS
#: Baselines that place only (no moves): "the best baseline" of the placement bar is among these.
PLACEMENT_BASELINES = ("volcano", "kueue", "kai", "slurm", "fgd")


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


def make_variant(
    name: str, jobs: list[Job], gpus_per_node: int, cfg: Suite2Config
) -> tuple[GangPolicy, GangDefragmenter | None]:
    """The policy and defragmenter of variant ``name``; the workload's size mix (for FGD's
    typical pods and our measure) comes from the run's own jobs."""
    work = Workload.from_jobs(jobs)
    if name == "volcano":
        return VolcanoBinpack(), None
    if name == "kueue":
        return KueueTAS(), None
    if name == "kai":
        return KaiBinpack(), None
    if name == "kai+consolidate":
        return KaiBinpack(), KaiConsolidate()
    if name == "slurm":
        return SlurmTree(), None
    if name == "fgd":
        # FGD's typical pods are the workload's pods by popularity (share of the count)
        counts: dict[int, float] = {}
        for j in jobs:
            counts[j.gpus] = counts.get(j.gpus, 0.0) + 1.0
        return FgdGang({g: c / len(jobs) for g, c in sorted(counts.items())}), None
    if name == "ours":
        return GangAware(work), None
    if name == "ours-batch":
        return BatchGangPlacer(GangAware(work), VolcanoBinpack()), None
    if name == "ours+defrag":
        reservations = Reservations()
        pol = ReservingPolicy(GangAware(work), reservations)
        return pol, CheckpointDefrag(pol, replace(cfg.defrag, restart_s=cfg.restart_s), reservations)
    raise ConfigError(f"unknown suite 2 variant {name!r}; known: {', '.join(VARIANTS)}")
