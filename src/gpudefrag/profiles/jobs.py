"""The actions of the job world built from a profile: each name a profile may give is a small
registered algorithm, and the job simulators (suite 2's and suite 3's, ``gang-sim``) run what
these functions return.

* ``allocate.gangs`` (:data:`GANG_PLACERS`): the placers of jobs and gangs on a topology, the
  baselines re-implemented from their upstream schedulers and ours;
* ``defragment`` (``[defragment.gangs]``): the checkpoint-aware gang defragmenter
  (:class:`~gpudefrag.gangs.defrag.CheckpointDefrag`) behind the profile's placer, which it
  wraps to honour its node reservations; ``consolidate``: KAI's Consolidate;
* ``preempt.victims`` (:data:`VICTIM_RULES`): the victim rules of suite 3.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from gpudefrag.capacity.victims import CheckpointAwareVictims, KaiVictims, KubeDefaultVictims, VictimRule
from gpudefrag.errors import ConfigError
from gpudefrag.gangs.batch import BatchGangPlacer
from gpudefrag.gangs.defrag import CheckpointDefrag
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
from gpudefrag.profiles.schema import PreemptSettings, Profile

__all__ = ["GANG_PLACERS", "VICTIM_RULES", "gang_placer", "job_actions", "victim_rule"]


def _fgd(jobs: Sequence[Job]) -> GangPolicy:
    # FGD's typical pods are the workload's pods by popularity (share of the count)
    counts: dict[int, float] = {}
    for j in jobs:
        counts[j.gpus] = counts.get(j.gpus, 0.0) + 1.0
    return FgdGang({g: c / len(jobs) for g, c in sorted(counts.items())})


GANG_PLACERS: dict[str, Callable[[Sequence[Job]], GangPolicy]] = {
    "volcano": lambda jobs: VolcanoBinpack(),
    "kueue": lambda jobs: KueueTAS(),
    "kai": lambda jobs: KaiBinpack(),
    "slurm": lambda jobs: SlurmTree(),
    "fgd": _fgd,
    "ours": lambda jobs: GangAware(Workload.from_jobs(list(jobs))),
    "ours-batch": lambda jobs: BatchGangPlacer(GangAware(Workload.from_jobs(list(jobs))), VolcanoBinpack()),
}
"""``allocate.gangs`` -> the placer, given the run's jobs (their size mix is what FGD's typical
pods and our measure read)."""


def gang_placer(name: str, jobs: Sequence[Job]) -> GangPolicy:
    """The placer registered as ``name``, for a run of ``jobs``."""
    try:
        return GANG_PLACERS[name](jobs)
    except KeyError:
        raise ConfigError(f"unknown gang placer {name!r}; known: {', '.join(GANG_PLACERS)}") from None


def job_actions(
    profile: Profile, jobs: Sequence[Job], restart_s: float
) -> tuple[GangPolicy, GangDefragmenter | None]:
    """The placer and the defragmentation action (or None) of ``profile`` for suite 2's
    simulator, on a cluster whose restarts take ``restart_s``."""
    if profile.allocate.gangs is None:
        raise ConfigError(f"profile {profile.name!r}: the job simulators need allocate.gangs (a gang placer)")
    beyond = [a for a in profile.actions if a in ("preempt", "elastic")]
    if beyond:
        raise ConfigError(
            f"profile {profile.name!r}: {', '.join(beyond)} run in suite 3's simulator, not here"
        )
    if profile.runs("defragment") and profile.runs("consolidate"):
        raise ConfigError(f"profile {profile.name!r}: one of defragment and consolidate, not both")
    placer = gang_placer(profile.allocate.gangs, jobs)
    if profile.runs("consolidate"):
        return placer, KaiConsolidate()
    if profile.runs("defragment"):
        reservations = Reservations()
        reserving = ReservingPolicy(placer, reservations)
        settings = replace(profile.defragment.gangs, restart_s=restart_s)
        return reserving, CheckpointDefrag(reserving, settings, reservations)
    return placer, None


VICTIM_RULES: dict[str, Callable[[PreemptSettings], VictimRule]] = {
    "kube": lambda s: KubeDefaultVictims(),
    "kai": lambda s: KaiVictims(),
    # the lowest class first: chosen on suite 3's tuning windows (a killed research job requeues
    # and preempts best-effort work in turn, so a cheap research victim costs twice)
    "ours": lambda s: CheckpointAwareVictims(lowest_class_first=True, wait_price=s.wait_price),
}
"""``preempt.victims`` -> the victim rule with the profile's settings."""


def victim_rule(settings: PreemptSettings) -> VictimRule:
    """The victim rule ``settings`` name."""
    return VICTIM_RULES[settings.victims](settings)
