"""kube-scheduler's DefaultPreemption, generalised to gangs on a topology.

Upstream: https://github.com/kubernetes/kubernetes at commit
``98be7dfc5da8533f62c063206c5751e884d6294d``:
``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`` (SelectVictimsOnNode,
calculateNumCandidates, GetOffsetAndNumCandidates) and ``pkg/scheduler/framework/preemption/
preemption.go`` (DryRunPreemption, SelectCandidate, pickOneNodeForPreemption); the pod order is
``util.MoreImportantPod`` and the start-time criterion ``util.GetEarliestPodStartTime``
(``pkg/scheduler/util/utils.go``).

Upstream, per candidate node:

* ``SelectVictimsOnNode``: remove every pod of lower priority from the node; if the preemptor
  does not fit then, the node is no candidate; else put the removed pods back one at a time,
  most important first (``MoreImportantPod``: higher priority, then the earlier start), PDB
  violators before the others, keeping each one that leaves the preemptor fitting; the pods not
  kept are the victims (a node with no pod of lower priority, or needing no victim, is none);
* ``DryRunPreemption`` visits the nodes from a random offset and stops once it has
  ``max(10 % of the nodes, 100)`` candidates (``minCandidateNodesPercentage`` = 10,
  ``minCandidateNodesAbsolute`` = 100, the defaults), at least one without PDB violation;
* ``pickOneNodeForPreemption`` keeps, criterion after criterion, the candidates with the best
  value: fewest PDB violations; lowest priority of the most important victim; smallest sum of
  victim priorities (each plus 2^31, so that more pods weigh more); fewest victims; latest
  start among the victims of the highest priority (the earliest start of those); then the first
  candidate in the list.

The model has no PodDisruptionBudgets: every violation count is 0, so those two steps change
nothing.  It has no pod affinities either, so "fits" is GPU room alone.

**Generalisation to gangs** (this package's rule, following upstream's own workload-aware
preemption in ``preemption/podgrouppreemption.go``, which takes the whole cluster as the
domain, a pod group as one victim unit and fixes the preemptor's placement before reprieving):

* a victim unit is a job: evicting one pod of a gang evicts all its pods, wherever they are;
  counts and priority sums above count pods (upstream's victims list holds pods), the start
  time is the job's ``start_s`` (upstream: the pod's start, which a restarted job
  resets; the model keeps only the first start);
* the candidate of a single-pod preemptor is a node (exactly upstream); that of a gang is a
  domain of a level its constraint allows (:func:`~gpudefrag.capacity.victims_base.candidate_groups`):
  the domains of the first level of ``candidate_levels`` with a candidate, or the whole
  cluster (one candidate) for a gang without constraint;
* the potential victims of a candidate are the allowed jobs (lower priority, in ``running``)
  with a pod in it; with all of them off, the preemptor's nodes ``P`` are the placement policy's
  answer on the state where only the candidate's nodes are visible (none: no candidate); the
  reprieve then puts victims back, most important first, while the preemptor still binds on
  ``P`` (a single pod: ``P`` is the node), checked on free milli rows with each kept victim on
  its own GPUs, as the real state will be;
* the candidate count, the random offset (a seeded generator) and the choice among candidates
  are upstream's, over candidates instead of nodes (every candidate counts in the number to
  find, as upstream counts every potential node); a hopeless candidate (one that cannot host
  the preemptor with every potential victim off) is skipped before the placement call, as
  upstream finds it not fitting.

Never moves a job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpudefrag.capacity.victims_base import (
    IntArray,
    VictimPlan,
    candidate_groups,
    fits_at,
    free_after,
    free_if_off,
    held_milli,
    lower_priority,
    place_within,
    plan_cost_gpu_s,
    single_pod_room,
    validate_plan,
    without,
)
from gpudefrag.gangs.policy import GangPolicy
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.model.session import RunningInfo, Session

__all__ = ["KubeDefaultVictims"]

_PRIORITY_OFFSET = 2**31  # math.MaxInt32 + 1, as upstream adds it to every priority


@dataclass(frozen=True)
class _Candidate:
    scan: int
    nodes: tuple[int, ...]
    victims: tuple[int, ...]  # most important first


class KubeDefaultVictims:
    """kube-scheduler's default preemption (module docstring).  ``seed`` seeds the offset at
    which the candidates are visited (upstream: ``rand.Int31n``)."""

    name = "kube"

    def __init__(
        self,
        min_candidate_nodes_percentage: int = 10,
        min_candidate_nodes_absolute: int = 100,
        seed: int = 0,
    ) -> None:
        self.pct = min_candidate_nodes_percentage
        self.absolute = min_candidate_nodes_absolute
        self._rng = np.random.default_rng(seed)

    def num_candidates(self, count: int) -> int:
        """``calculateNumCandidates``: ``count * pct // 100``, at least ``absolute``, at most ``count``."""
        return min(max(count * self.pct // 100, self.absolute), count)

    def choose(
        self,
        session: Session,
        job: Job,
        placer: GangPolicy,
        restart_s: float,
        may_wait_s: float = 0.0,  # ignored: upstream never waits
    ) -> VictimPlan | None:
        state, running, now_s = session.state, session.running, session.now_s
        allowed = lower_priority(state, job, running)
        if not allowed:
            return None
        on_node: dict[int, list[int]] = {}
        for j in allowed:
            for p in state.placements[j]:
                on_node.setdefault(p.node, []).append(j)
        room = single_pod_room(state, job, free_if_off(state, allowed))
        for level, domains in candidate_groups(state, job):
            # a node where the pod cannot fit with every allowed job off is no candidate
            hopeless = (lambda d: not room[int(d[0])]) if level == -1 else (lambda d: False)
            found = self._dry_run(state, job, allowed, on_node, domains, placer, hopeless)
            if not found:
                continue
            for cand in sorted(found, key=lambda c: _pick_key(state, allowed, c)):
                plan = VictimPlan(
                    job.job_id,
                    cand.nodes,
                    tuple(sorted(cand.victims)),
                    (),
                    plan_cost_gpu_s(cand.victims, allowed, now_s, restart_s),
                )
                if validate_plan(state, job, plan) is None:
                    return plan
            return None
        return None

    def _dry_run(
        self,
        state: ClusterState,
        job: Job,
        allowed: dict[int, RunningInfo],
        on_node: dict[int, list[int]],
        domains: list[IntArray],
        placer: GangPolicy,
        hopeless: Callable[[IntArray], bool],
    ) -> list[_Candidate]:
        """``DryRunPreemption``: candidates from a random offset until ``num_candidates`` of
        all of them (hopeless ones count in that number, as upstream's potential nodes do)."""
        count = len(domains)
        want = self.num_candidates(count)
        offset = int(self._rng.integers(count))
        found: list[_Candidate] = []
        for i in range(count):
            nodes = domains[(offset + i) % count]
            if hopeless(nodes):
                continue
            potential = sorted({j for n in nodes.tolist() for j in on_node.get(n, ())})
            if not potential:
                continue
            cand = self._select(state, job, allowed, potential, nodes, placer, i)
            if cand is not None:
                found.append(cand)
                if len(found) >= want:
                    break
        return found

    def _select(
        self,
        state: ClusterState,
        job: Job,
        allowed: dict[int, RunningInfo],
        potential: list[int],
        nodes: IntArray,
        placer: GangPolicy,
        scan: int,
    ) -> _Candidate | None:
        """``SelectVictimsOnNode`` on one candidate (module docstring)."""
        rows = free_after(state, potential)
        if len(state.pods_of(job)) == 1:
            where = [int(nodes[0])]
        else:
            if not _may_host(rows, state, job, nodes):
                return None
            placed = place_within(placer, without(state, potential), job, nodes)
            if placed is None:
                return None
            where = placed
        if not fits_at(rows, state, job, where):
            return None
        victims: list[int] = []
        order = sorted(potential, key=lambda j: (-allowed[j].job.priority, allowed[j].start_s, j))
        for j in order:  # reprieve, most important first
            held = held_milli(state, j)
            for n, g, milli in held:
                rows[n][g] -= milli
            if not fits_at(rows, state, job, where):
                for n, g, milli in held:
                    rows[n][g] += milli
                victims.append(j)
        if not victims:
            return None
        return _Candidate(scan, tuple(where), tuple(victims))


def _may_host(rows: dict[int, list[int]], state: ClusterState, job: Job, nodes: IntArray) -> bool:
    """Could ``nodes`` hold the gang's pods (full-node pods on wholly free nodes, the remainder on
    another node with room), with free milli ``rows`` where given?"""
    gpn = state.topology.max_gpus_per_node
    sizes = state.pods_of(job)
    full = sum(1 for s in sizes if s == gpn)
    rest = [s for s in sizes if s != gpn]
    whole = 0
    best_other = 0
    for n in nodes.tolist():
        row = rows.get(n)
        free = sum(1 for v in row if v == GPU_MILLI_PER_GPU) if row is not None else int(state.free_gpus[n])
        if free == int(state.topology.gpus_per_node[n]) and free >= gpn:
            whole += 1
        else:
            best_other = max(best_other, free)
    if whole < full:
        return False
    return not rest or whole > full or best_other >= rest[0]


def _pick_key(state: ClusterState, allowed: dict[int, RunningInfo], cand: _Candidate) -> tuple[float, ...]:
    """``pickOneNodeForPreemption``'s criteria as one sort key (smaller is better)."""
    pods = {j: len(state.placements[j]) for j in cand.victims}
    prio = {j: allowed[j].job.priority for j in cand.victims}
    highest = max(prio.values())
    sum_prio = sum(pods[j] * (prio[j] + _PRIORITY_OFFSET) for j in cand.victims)
    earliest = min(allowed[j].start_s for j in cand.victims if prio[j] == highest)
    return (0.0, float(highest), float(sum_prio), float(sum(pods.values())), -earliest, float(cand.scan))
