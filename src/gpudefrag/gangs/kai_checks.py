"""The checks KAI's Consolidate action makes of a scenario (:mod:`gpudefrag.gangs.kai_consolidate`):
victims' own GPUs and capacity, whether a victim moved, the scheduling-signature comparison
(``common/minimal_job_comparison.go``), and the replay of a plan's statement on a scratch copy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.moves import DefragPlan
from gpudefrag.gangs.statements import GangStatement
from gpudefrag.model.cluster import ClusterState, PlacementError, PodPlacement
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU as MILLI
from gpudefrag.model.jobs import Job
from gpudefrag.model.statement import JobLedger, Ledger, Statement
from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]

__all__ = ["add_cap", "easier", "footprint_smaller", "moved", "own_gpus", "replay", "required_ok"]


def own_gpus(pods: tuple[PodPlacement, ...]) -> dict[tuple[int, int], list[tuple[int, ...]]]:
    out: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    for p in pods:
        size = len(p.gpu_indices) if p.gpu_milli >= MILLI else 1
        out.setdefault((p.node, size), []).append(p.gpu_indices)
    return out


def add_cap(cap: IntArray, pods: tuple[PodPlacement, ...]) -> None:
    for p in pods:
        cap[p.node] += p.gpu_milli * len(p.gpu_indices)


def moved(work: ClusterState, jid: int, nodes: list[int]) -> bool:
    pods = work.placements[jid]
    before = sorted((len(p.gpu_indices), p.node) for p in pods)
    sizes = work.pods_of(work.jobs[jid])
    after = sorted((g if not work.jobs[jid].is_sharing else 1, n) for g, n in zip(sizes, nodes))
    return before != after


def easier(new: list[int], rep: list[int]) -> bool:
    """``jobEasierToScheduleComparison`` on pod requests (milli-GPU)."""
    if not new or not rep:
        return False
    if len(rep) > len(new):
        return True
    a, b = sorted(new), sorted(rep)
    for i in range(len(a)):
        if i >= len(b):
            return False
        if a[i] <= b[i]:
            if b[i] <= a[i]:
                continue
            return True
    return False


def footprint_smaller(new: list[int], cur: list[int]) -> bool:
    """``isPodGroupFootprintSmaller``: every pod of ``new`` at most the matching one of ``cur``."""
    if not new or not cur or len(new) > len(cur):
        return False
    a, b = sorted(new), sorted(cur)
    return all(a[i] <= b[i] for i in range(len(a)))


def replay(work: ClusterState, plan: DefragPlan, job: Job) -> ClusterState | None:
    """The plan's statement applied to a copy of ``work`` (as the simulator commits it), or
    None if a bind fails or a job it binds breaks its required constraint."""
    stmt: GangStatement = Statement(JobLedger(work), _required_kept)
    for m in plan.moves:
        stmt.move(m.job_id, m.to_nodes)
    out = stmt.bind(job.job_id, job, plan.nodes).replay()
    return out.state if isinstance(out, JobLedger) else None


def _required_kept(ledger: Ledger[Job, Sequence[int]], job: Job) -> None:
    """The check KAI makes of every job a scenario binds: its required constraint."""
    assert isinstance(ledger, JobLedger)
    nodes = tuple(p.node for p in ledger.state.placements[job.job_id])
    if not required_ok(ledger.state.topology, job, nodes):
        raise PlacementError(f"job {job.job_id} leaves its required '{job.constraint}' domain")


def required_ok(topology: Topology, job: Job, nodes: tuple[int, ...]) -> bool:
    c = job.constraint
    if c is None or c.mode != "required":
        return True
    dom = topology.domains(topology.level_index(c.level))
    return len({int(dom[n]) for n in nodes}) == 1
