"""NVIDIA KAI-Scheduler's Consolidate action, re-implemented on this package's model (its
placement: :mod:`gpudefrag.gangs.kai`).

Upstream: https://github.com/NVIDIA/KAI-Scheduler at commit
``72de64fc8eca10fa8cca26a20156178f3edbe092`` (2026-03-07).  Every rule below names the file it
comes from (paths under ``pkg/scheduler/`` unless stated).

**Consolidation** (:class:`KaiConsolidate`, ``actions/consolidation/consolidation.go`` and the
solver in ``actions/common/solvers/``):

* pending jobs in job order (priority descending, then creation time, then uid:
  ``plugins/priority/priority.go``, ``framework/session_plugins.go``), preemptible ones only
  (``FilterNonPreemptible``; priority < 100 unless stated, ``common/podgroup/preemptible.go``),
  at most ``queue_depth`` of them (``QueueDepthPerAction``; upstream default: unlimited);
* a job is skipped when the cluster's idle GPUs (whole plus free shares) are fewer than it asks
  (``utils.IsEnoughGPUsAllocatableForJob``), and, with scheduling signatures on (upstream
  default ``--use-scheduling-signatures=true``), when a job with the same constraints already
  failed and this one is not easier (``common/minimal_job_comparison.go``);
* ``JobSolver.Solve`` (``solvers/job_solver.go``): the job's pods are solved one more at a time
  (1, then 2, ... then all), each step starting from the victims the previous step moved;
* victims (``buildConsolidationVictimsQueue``, ``utils.GetVictimsQueue``): running preemptible
  jobs other than the pending one, taken from a Go map (random order) while a counter is not
  above ``--max-consolidation-preemptees`` (default 16), so **at most 17 candidate victims**, a
  random subset when more are eligible (drawn again for every step, as upstream rebuilds the
  queue); ordered for eviction by reverse job order (lowest priority, newest first).  A gang is
  evicted whole (``podgroup_info/eviction_info.go``: a job at its min-available gives up every
  pod);
* scenarios (``solvers/pod_scenario_builder.go``): the recorded victims alone, then one more
  potential victim job at a time; a scenario is skipped when the idle-GPU filters say it cannot
  fit (``accumulated_scenario_filters/idle_gpus``: greedy largest-first match of the pods on the
  k nodes with the most idle + freed GPUs; for a required constraint, one domain with enough);
* a scenario is simulated once per node of its newest victim (``solvers/by_pod_solver.go``,
  ``solveOnPotentialNodes``): the recorded victims and every potential victim with a pod on
  that node are evicted (their GPUs become releasing), then the victims and the pending job are
  placed again in job order with the placement above (``common/action.go``,
  ``TryToVirtuallyAllocatePreemptorAndGetVictims``; pipelined pods use releasing GPUs first, as
  ``node_info.addTaskResources`` books them).  The pending job failing -> next node; the job
  placed but a victim left out -> the scenario fails (``allPodsReallocated``); else the plan
  commits (``Statement.Commit``) and the next pending job sees its result.  A victim placed back
  on the nodes it ran on is not moved (``Statement.Pipeline`` un-evicts it).

There is no cost model: moves are not priced, which is the point of the comparison.

**Not modelled**: queues and fair share, CPU and memory, node affinities, elastic jobs (a gang
here is always at its min-available), sub-groups, DRA and MIG; the random order upstream gives
the nodes of the newest victim (a Go map) -- here the victim's pod order; domain ids are this
model's domain numbers (upstream compares label strings); a sharing pod's ``nodeavailability``
score is taken as "it fits" (idle and releasing shares are not told apart).  Jobs that
:class:`KaiBinpack` can place as they are get no plan (allocate runs before consolidation), and
a job that a plan of this call moved or started is not a victim again in the same call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from gpudefrag.gangs.kai import (
    DEFAULT_MAX_CONSOLIDATION_PREEMPTEES,
    MILLI,
    NON_PREEMPTIBLE_PRIORITY,
    IntArray,
    Tree,
    TreeCache,
    kai_job_order_key,
    place_arrays,
    pod_milli,
)
from gpudefrag.gangs.kai_checks import (
    add_cap,
    easier,
    footprint_smaller,
    moved,
    own_gpus,
    replay,
)
from gpudefrag.gangs.moves import DefragPlan, GangMove
from gpudefrag.model.cluster import ClusterState, PodPlacement
from gpudefrag.model.jobs import Job
from gpudefrag.model.session import RunningInfo, Session

__all__ = ["KaiConsolidate"]

# ---- consolidation ----------------------------------------------------------------------------


@dataclass
class _Sim:
    """One simulated statement: GPU milli (idle + releasing), idle and releasing whole GPUs."""

    free: IntArray
    idle: IntArray
    rel: IntArray
    placed: dict[int, list[int]] = field(default_factory=dict)

    def evict(self, pods: tuple[PodPlacement, ...]) -> None:
        for pod in pods:
            row = self.free[pod.node]
            for gi in pod.gpu_indices:
                row[gi] += pod.gpu_milli
                if row[gi] == MILLI:
                    self.rel[pod.node] += 1

    def take(self, node: int, g: int, milli: int, prefer: tuple[int, ...] | None) -> None:
        """Book one pipelined pod as :meth:`ClusterState.bind` would (releasing GPUs first); a pod
        going back to its own node keeps its GPUs when they are free (upstream un-evicts it)."""
        row = self.free[node]
        if prefer is not None and len(prefer) == (1 if milli < MILLI else g):
            idx = np.asarray(prefer, dtype=np.int64)
            if bool((row[idx] >= milli).all()) and (milli < MILLI or bool((row[idx] == MILLI).all())):
                whole_used = int((row[idx] == MILLI).sum())
                row[idx] -= milli
                self._use_whole(node, whole_used)
                return
        if milli < MILLI:
            ok = np.flatnonzero(row >= milli)
            partly = ok[row[ok] < MILLI]
            pick = int(partly[np.argmin(row[partly])]) if partly.size else int(ok[0])
            whole_used = 1 if row[pick] == MILLI else 0
            row[pick] -= milli
            self._use_whole(node, whole_used)
            return
        idx = np.flatnonzero(row == MILLI)[:g]
        row[idx] = 0
        self._use_whole(node, g)

    def _use_whole(self, node: int, k: int) -> None:
        # node_info.addTaskResources: a pipelined pod is booked on Releasing (which may go
        # negative); Idle is left as it is.
        self.rel[node] -= k


@dataclass
class _Outcome:
    ok: bool
    invalid: bool = False
    nodes: dict[int, list[int]] = field(default_factory=dict)


_FAIL = _Outcome(False)
_INVALID = _Outcome(False, invalid=True)


class KaiConsolidate:
    """KAI-Scheduler's Consolidate action as a :class:`~gpudefrag.gangs.moves.GangDefragmenter`.

    ``max_preemptees`` is ``--max-consolidation-preemptees`` (16; -1 = no limit, 0 = the action
    is off; upstream's counter admits ``max_preemptees + 1`` candidate victims per solve);
    ``queue_depth`` is ``queueDepthPerAction[consolidation]`` (None = unlimited, upstream's
    default); ``use_signatures`` is ``--use-scheduling-signatures`` (True); ``seed`` seeds the
    choice of candidate victims upstream leaves to Go's map order; ``non_preemptible_priority``
    is the priority from which a job is neither consolidated for nor a victim (100).
    """

    name = "kai-consolidate"

    def __init__(
        self,
        max_preemptees: int = DEFAULT_MAX_CONSOLIDATION_PREEMPTEES,
        queue_depth: int | None = None,
        use_signatures: bool = True,
        seed: int = 0,
        non_preemptible_priority: int = NON_PREEMPTIBLE_PRIORITY,
    ) -> None:
        self.max_preemptees = max_preemptees
        self.queue_depth = queue_depth
        self.use_signatures = use_signatures
        self.non_preemptible_priority = non_preemptible_priority
        self._rng = np.random.default_rng(seed)
        self._trees = TreeCache()
        self.simulations = 0
        self.refused_replays = 0

    # ---- the action ------------------------------------------------------------------------
    def plan(self, session: Session) -> list[DefragPlan]:
        state, pending, running = session.state, session.pending, session.running
        if self.max_preemptees == 0:
            return []
        tree = self._trees.get(state.topology)
        work = state.copy()
        plans: list[DefragPlan] = []
        touched: set[int] = set()
        failed: dict[str, list[int]] = {}
        queue = sorted(
            (j for j in pending if j.priority < self.non_preemptible_priority),
            key=kai_job_order_key,
        )
        if self.queue_depth is not None:
            queue = queue[: self.queue_depth]
        for job in queue:
            if job.job_id in work.placements:
                continue
            pods = work.pods_of(job)
            if place_arrays(tree, job, pods, work.gpu_milli_left, work.free_gpus, work.free_gpus) is not None:
                continue  # the allocate action places it; consolidation only sees blocked jobs
            sig = str(job.constraint)
            need = pod_milli(job, pods)
            if self.use_signatures and sig in failed and not easier(need, failed[sig]):
                continue
            plan = None
            if int(work.gpu_milli_left.sum()) >= sum(need):
                plan = self._solve(tree, work, job, pods, running, touched)
            if plan is None:
                if sig not in failed or footprint_smaller(need, failed[sig]):
                    failed[sig] = need
                continue
            replayed = replay(work, plan, job)
            if replayed is None:
                self.refused_replays += 1
                continue
            work = replayed
            plans.append(plan)
            touched.add(job.job_id)
            touched.update(m.job_id for m in plan.moves)
        return plans

    # ---- JobSolver ----------------------------------------------------------------------------
    def _eligible(
        self, work: ClusterState, job: Job, running: Mapping[int, RunningInfo], touched: set[int]
    ) -> list[int]:
        out = []
        for jid, j in work.jobs.items():
            if jid == job.job_id or jid in touched or j.priority >= self.non_preemptible_priority:
                continue
            info = running.get(jid)
            if info is not None and info.do_not_disrupt:
                continue
            out.append(jid)
        return out

    def _victims_queue(self, work: ClusterState, eligible: list[int]) -> list[int]:
        cap = len(eligible) if self.max_preemptees < 0 else self.max_preemptees + 1
        chosen = eligible
        if len(eligible) > cap:
            idx = self._rng.choice(len(eligible), size=cap, replace=False)
            chosen = [eligible[int(i)] for i in idx]
        # Reverse job order: lowest priority first, then newest, then highest uid.
        return sorted(chosen, key=lambda jid: kai_job_order_key(work.jobs[jid]), reverse=True)

    def _solve(
        self,
        tree: Tree,
        work: ClusterState,
        job: Job,
        pods: list[int],
        running: Mapping[int, RunningInfo],
        touched: set[int],
    ) -> DefragPlan | None:
        eligible = self._eligible(work, job, running, touched)
        if not eligible:
            return None
        base_cap = work.gpu_milli_left.sum(axis=1)
        recorded: list[int] = []
        result: _Outcome | None = None
        for i in range(1, len(pods) + 1):
            result = self._solve_partial(tree, work, job, pods[:i], recorded, eligible, base_cap)
            if result is None:
                return None
            recorded = [v for v in result.nodes if v != job.job_id and moved(work, v, result.nodes[v])]
        assert result is not None
        moves = tuple(
            GangMove(v, tuple(result.nodes[v]))
            for v in result.nodes
            if v != job.job_id and moved(work, v, result.nodes[v])
        )
        return DefragPlan(job.job_id, moves, tuple(result.nodes[job.job_id]))

    def _solve_partial(
        self,
        tree: Tree,
        work: ClusterState,
        job: Job,
        partial: list[int],
        recorded: list[int],
        eligible: list[int],
        base_cap: IntArray,
    ) -> _Outcome | None:
        queue = self._victims_queue(work, eligible)
        need = sorted(pod_milli(job, partial), reverse=True)
        cap = base_cap.copy()
        for v in recorded:
            add_cap(cap, work.placements[v])
        rec = set(recorded)
        if self._filters_ok(tree, job, need, cap) and recorded:
            out = self._simulate(tree, work, job, partial, recorded)
            if out.ok:
                return out
        potential: list[int] = []
        for v in queue:
            if v in rec:
                continue
            potential.append(v)
            add_cap(cap, work.placements[v])
            if not self._filters_ok(tree, job, need, cap):
                continue
            seen: set[int] = set()
            for pod in work.placements[v]:
                if pod.node in seen:
                    continue
                seen.add(pod.node)
                on_node = work.node_jobs[pod.node]
                victims = recorded + [p for p in potential if p in on_node]
                out = self._simulate(tree, work, job, partial, victims)
                if out.ok:
                    return out
                if out.invalid:
                    break
        return None

    def _filters_ok(self, tree: Tree, job: Job, need: list[int], cap: IntArray) -> bool:
        """``AccumulatedIdleGpus`` and ``TopologyAwareIdleGpus``: necessary conditions."""
        c = job.constraint
        if c is not None and c.mode == "required":
            t = tree.topology.level_index(c.level) + 1
            if int(np.bincount(tree.dom[t], weights=cap, minlength=tree.ndom[t]).max()) < sum(need):
                return False
        k = len(need)
        if k >= cap.size:
            holders = np.sort(cap)[::-1]
        else:
            top = np.argpartition(cap, cap.size - k)[cap.size - k :]
            holders = np.sort(cap[top])[::-1]
        used = np.zeros(holders.size, dtype=np.int64)
        for r in need:
            if r == 0:
                return True
            matched = False
            for h in range(holders.size):
                if holders[h] < r:
                    break
                if holders[h] - used[h] >= r:
                    used[h] += r
                    matched = True
                    break
            if not matched:
                return False
        return True

    def _simulate(
        self, tree: Tree, work: ClusterState, job: Job, partial: list[int], victims: list[int]
    ) -> _Outcome:
        """``TryToVirtuallyAllocatePreemptorAndGetVictims`` + ``allPodsReallocated``."""
        self.simulations += 1
        sim = _Sim(work.gpu_milli_left.copy(), work.free_gpus.copy(), np.zeros(tree.n, dtype=np.int64))
        for v in victims:
            sim.evict(work.placements[v])
        order = sorted(
            [*victims, job.job_id], key=lambda x: kai_job_order_key(job if x == job.job_id else work.jobs[x])
        )
        nodes: dict[int, list[int]] = {}
        unplaced = False
        for jid in order:
            j = job if jid == job.job_id else work.jobs[jid]
            pods = partial if jid == job.job_id else work.pods_of(j)
            got = place_arrays(tree, j, pods, sim.free, sim.idle + sim.rel, sim.idle)
            if got is None:
                if jid == job.job_id:
                    return _FAIL
                unplaced = True
                continue
            prefer = own_gpus(work.placements[jid]) if jid != job.job_id else {}
            for node, g in zip(got, pods):
                mine = prefer.get((node, g))
                sim.take(node, g, j.gpu_milli, mine.pop() if mine else None)
            nodes[jid] = got
        if unplaced:
            return _INVALID
        return _Outcome(True, nodes=nodes)
