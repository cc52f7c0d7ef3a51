"""NVIDIA KAI-Scheduler's gang placement (topology + binpack) and its Consolidate action, re-implemented
on this package's model.

Upstream: https://github.com/NVIDIA/KAI-Scheduler at commit
``72de64fc8eca10fa8cca26a20156178f3edbe092`` (2026-03-07).  Every rule below names the file it
comes from (paths under ``pkg/scheduler/`` unless stated).

**Placement** (:class:`KaiBinpack`, the ``allocate`` action with the default plugin set of
``conf_util/scheduler_conf_util.go``):

* ``actions/common/allocate.go``: a job's pods are placed one after another (gang: all or
  nothing, the statement is rolled back on a failure) on each node set that the topology
  plugin's ``SubsetNodesFn`` returns, in its order; the first node set where every pod binds
  wins.  A pod takes the first node of ``Session.OrderedNodesByTask`` (``framework/session.go``)
  that fits: nodes by total plugin score, descending, ties by node name.
* Node scores (``plugins/scores/scores.go``): topology ``10000 * k`` (preferred level only),
  ``gpusharingorder`` 1000 (sharing pod, the node has a shared GPU the pod fits on),
  ``nodeavailability`` 100 (the pod fits on *idle* resources, not only on releasing ones), and
  ``nodeplacement`` GPU binpack (``plugins/nodeplacement/pack.go``) ``9 * (1 - (free - min) /
  (max - min))``, at most 9 and decreasing in the node's non-allocated (idle + releasing) whole
  GPUs.  The scales never overlap, so the order is lexicographic: topology, sharing,
  availability, fewest free GPUs, node name.  ``gpupack`` picks the most used shared GPU for a
  sharing pod, which is the best-fit rule :meth:`GangState.bind` applies.
* The topology plugin (``plugins/topology/job_filtering.go``, ``node_scoring.go``,
  ``topology_utils.go``), for a job with a constraint:

  - domains are filled with the node's idle + releasing whole GPUs (``calcSubTreeFreeResources``,
    fractions ignored) and, as the pods are homogeneous in resource kinds
    (``useRepresentorPodsAccounting``), with ``AllocatablePods``: per node the number of copies
    of the job's largest pod that fit (``calcNodeAccommodation``), summed; a domain can host
    the job when it holds at least as many as the job has pods (``checkJobDomainFit``).  So a
    12-GPU job ([8, 4] on 8-GPU nodes) needs two nodes with 8 free in its domain: upstream
    assumes a gang's pods alike, this model gives it a remainder pod;
  - the tree is sorted from the root down to the constraint's level (``sortTree``): siblings by
    the ratio job GPUs / domain free GPUs, descending (the fullest domain that can take the job
    first; ``+Inf`` when a domain has no free GPU), ties by domain id;
  - the levels tried (``calculateRelevantDomainLevels``): ``required:L`` -> only L;
    ``preferred:L`` -> L, each level above, the root; the domains that can host the job are
    tried in bottom-up level order, each level in the sorted tree's order (``sortDomainInfos``,
    ``reverseLevelOrder``);
  - with a preferred level, every node gets ``floor((i + 1) / n * 10) * 10000`` where ``i`` is
    its preferred-level domain's position in the sorted tree and ``n`` the number of such
    domains (``calculateNodeScores``); it only matters once the job spills above that level.

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

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.moves import DefragPlan, GangMove, RunningInfo
from gpudefrag.model.gang_state import GangState, PlacementError, PodPlacement
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

__all__ = [
    "DEFAULT_MAX_CONSOLIDATION_PREEMPTEES",
    "NON_PREEMPTIBLE_PRIORITY",
    "UPSTREAM",
    "KaiBinpack",
    "KaiConsolidate",
    "kai_job_order_key",
]

UPSTREAM = "NVIDIA/KAI-Scheduler@72de64fc8eca10fa8cca26a20156178f3edbe092"

SCORE_TOPOLOGY = 10_000  # plugins/scores/scores.go: Topology
SCORE_GPU_SHARING = 1_000  # GpuSharing
SCORE_AVAILABILITY = 100  # Availability
_BINPACK_SPAN = 99  # free GPUs per node stay below this: the binpack term never reaches 100

DEFAULT_MAX_CONSOLIDATION_PREEMPTEES = 16  # cmd/scheduler/app/options/options.go
NON_PREEMPTIBLE_PRIORITY = 100  # constants/priorities.go: PriorityBuildNumber
_MILLI = GPU_MILLI_PER_GPU


def kai_job_order_key(job: Job) -> tuple[int, float, int]:
    """KAI's job order: priority descending, creation time, uid (``Session.JobOrderFn``)."""
    return (-job.priority, job.submit_s, job.job_id)


def _pod_milli(job: Job, pods: list[int]) -> list[int]:
    if job.is_sharing:
        return [job.gpu_milli]
    return [g * _MILLI for g in pods]


class _Tree:
    """A topology as KAI's tree: tree level 0 is the node (each node its own domain), tree level
    ``t >= 1`` is ``topology.levels[t - 1]``; the root sits above the top level."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        n = topology.num_nodes
        self.n = n
        self.all_nodes: IntArray = np.arange(n, dtype=np.int64)
        self.dom: list[IntArray] = [self.all_nodes] + [d for d in topology.domain_of]
        self.ndom = [int(d.max()) + 1 for d in self.dom]
        self.parent: list[IntArray] = []
        for t in range(len(self.dom)):
            if t + 1 < len(self.dom):
                par = np.zeros(self.ndom[t], dtype=np.int64)
                par[self.dom[t]] = self.dom[t + 1]
            else:
                par = np.zeros(self.ndom[t], dtype=np.int64)
            self.parent.append(par)
        self.members: list[list[IntArray]] = []
        for t, d in enumerate(self.dom):
            order = np.argsort(d, kind="stable")
            bounds = np.searchsorted(d[order], np.arange(self.ndom[t] + 1))
            self.members.append([order[bounds[i] : bounds[i + 1]] for i in range(self.ndom[t])])
        self.name_rank: IntArray = np.empty(n, dtype=np.int64)
        self.name_rank[np.argsort(np.array(topology.node_names), kind="stable")] = np.arange(n)


class _TreeCache:
    def __init__(self) -> None:
        self._topo: Topology | None = None
        self._tree: _Tree | None = None

    def get(self, topology: Topology) -> _Tree:
        if self._topo is not topology or self._tree is None:
            self._tree = _Tree(topology)
            self._topo = topology
        return self._tree


def _node_sets(
    tree: _Tree, job: Job, pods: list[int], free: IntArray, whole: IntArray
) -> tuple[list[IntArray], IntArray | None]:
    """The topology plugin's ``SubsetNodesFn``: node sets in the order they are tried, and the
    preferred-level node scores (None without a preferred level)."""
    c = job.constraint
    if c is None:
        return [tree.all_nodes], None
    target = tree.topology.level_index(c.level) + 1
    top = len(tree.dom) - 1
    # Representor-pod accounting: copies of the largest pod each node takes.
    if job.is_sharing:
        per_node = (free >= job.gpu_milli).sum(axis=1)
        tasks_gpus = job.gpu_milli / _MILLI
    else:
        per_node = whole // max(pods)
        tasks_gpus = float(sum(pods))
    need = len(pods)
    # Sort the tree from the root down to the constraint's level (ratio descending, then id).
    pos: list[IntArray | None] = [None] * len(tree.dom)
    fits: list[BoolArray | None] = [None] * len(tree.dom)
    parent_pos: IntArray = np.zeros(1, dtype=np.int64)
    for t in range(top, target - 1, -1):
        dom = tree.dom[t]
        nd = tree.ndom[t]
        dom_free = np.bincount(dom, weights=whole, minlength=nd)
        with np.errstate(divide="ignore"):
            ratio = np.where(dom_free > 0, tasks_gpus / np.maximum(dom_free, 1e-300), np.inf)
        ppos = parent_pos[tree.parent[t]] if t < top else np.zeros(nd, dtype=np.int64)
        order = np.lexsort((np.arange(nd), -ratio, ppos))
        p = np.empty(nd, dtype=np.int64)
        p[order] = np.arange(nd)
        pos[t] = p
        fits[t] = np.bincount(dom, weights=per_node, minlength=nd) >= need
        parent_pos = p
    sets: list[IntArray] = []
    if c.mode == "required":
        levels = [target]
        with_root = False
    else:
        levels = list(range(target, top + 1))
        with_root = True
    for t in levels:
        pt, ft = pos[t], fits[t]
        assert pt is not None and ft is not None
        order = np.argsort(pt)
        for d in order[ft[order]]:
            sets.append(tree.members[t][int(d)])
    if with_root and int(per_node.sum()) >= need:
        sets.append(tree.all_nodes)
    scores: IntArray | None = None
    if c.mode == "preferred":
        pt = pos[target]
        assert pt is not None
        nd = tree.ndom[target]
        dom_score = (np.floor((pt + 1).astype(np.float64) / float(nd) * 10.0) * SCORE_TOPOLOGY).astype(
            np.int64
        )
        scores = dom_score[tree.dom[target]]
    return sets, scores


def _place_arrays(
    tree: _Tree,
    job: Job,
    pods: list[int],
    free: IntArray,
    whole: IntArray,
    idle: IntArray,
) -> list[int] | None:
    """KAI's placement of ``pods`` of ``job`` on arrays: ``free`` (n, g) milli per GPU (idle +
    releasing), ``whole`` the idle + releasing whole GPUs per node, ``idle`` the idle ones only.
    Nothing is changed; returns one node per pod or None."""
    sets, topo_scores = _node_sets(tree, job, pods, free, whole)
    n1 = tree.n + 1
    for nodes in sets:
        w = whole[nodes].copy()
        idl = idle[nodes].copy()
        base = topo_scores[nodes] if topo_scores is not None else np.zeros(nodes.size, dtype=np.int64)
        rank = tree.name_rank[nodes]
        out: list[int] = []
        for g in pods:
            if job.is_sharing:
                rows = free[nodes]
                ge = rows >= job.gpu_milli
                fit = ge.any(axis=1)
                shared = (ge & (rows < _MILLI)).any(axis=1)
                key = base + np.where(shared, SCORE_GPU_SHARING, 0) + SCORE_AVAILABILITY + (_BINPACK_SPAN - w)
            else:
                fit = w >= g
                key = base + np.where(idl >= g, SCORE_AVAILABILITY, 0) + (_BINPACK_SPAN - w)
            if not fit.any():
                break
            comp = np.where(fit, key * n1 - rank, -1)
            j = int(np.argmax(comp))
            out.append(int(nodes[j]))
            if not job.is_sharing:
                w[j] -= g
                idl[j] = min(int(idl[j]), int(w[j]))
        if len(out) == len(pods):
            return out
    return None


class KaiBinpack:
    """KAI-Scheduler's default placement: topology plugin + GPU binpack + gang all-or-nothing
    (see the module docstring).  No constructor arguments."""

    name = "kai"

    def __init__(self) -> None:
        self._trees = _TreeCache()

    def place(self, state: GangState, job: Job) -> list[int] | None:
        tree = self._trees.get(state.topology)
        pods = state.pods_of(job)
        return _place_arrays(tree, job, pods, state.free_milli, state.free_gpus, state.free_gpus)


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
                if row[gi] == _MILLI:
                    self.rel[pod.node] += 1

    def take(self, node: int, g: int, milli: int, prefer: tuple[int, ...] | None) -> None:
        """Book one pipelined pod as :meth:`GangState.bind` would (releasing GPUs first); a pod
        going back to its own node keeps its GPUs when they are free (upstream un-evicts it)."""
        row = self.free[node]
        if prefer is not None and len(prefer) == (1 if milli < _MILLI else g):
            idx = np.asarray(prefer, dtype=np.int64)
            if bool((row[idx] >= milli).all()) and (milli < _MILLI or bool((row[idx] == _MILLI).all())):
                whole_used = int((row[idx] == _MILLI).sum())
                row[idx] -= milli
                self._use_whole(node, whole_used)
                return
        if milli < _MILLI:
            ok = np.flatnonzero(row >= milli)
            partly = ok[row[ok] < _MILLI]
            pick = int(partly[np.argmin(row[partly])]) if partly.size else int(ok[0])
            whole_used = 1 if row[pick] == _MILLI else 0
            row[pick] -= milli
            self._use_whole(node, whole_used)
            return
        idx = np.flatnonzero(row == _MILLI)[:g]
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
        self._trees = _TreeCache()
        self.simulations = 0
        self.refused_replays = 0

    # ---- the action ------------------------------------------------------------------------
    def plan(
        self,
        state: GangState,
        pending: list[Job],
        running: dict[int, RunningInfo],
        now_s: float,
    ) -> list[DefragPlan]:
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
            if _place_arrays(tree, job, pods, work.free_milli, work.free_gpus, work.free_gpus) is not None:
                continue  # the allocate action places it; consolidation only sees blocked jobs
            sig = str(job.constraint)
            need = _pod_milli(job, pods)
            if self.use_signatures and sig in failed and not _easier(need, failed[sig]):
                continue
            plan = None
            if int(work.free_milli.sum()) >= sum(need):
                plan = self._solve(tree, work, job, pods, running, touched)
            if plan is None:
                if sig not in failed or _footprint_smaller(need, failed[sig]):
                    failed[sig] = need
                continue
            replayed = _replay(work, plan, job)
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
        self, work: GangState, job: Job, running: dict[int, RunningInfo], touched: set[int]
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

    def _victims_queue(self, work: GangState, eligible: list[int]) -> list[int]:
        cap = len(eligible) if self.max_preemptees < 0 else self.max_preemptees + 1
        chosen = eligible
        if len(eligible) > cap:
            idx = self._rng.choice(len(eligible), size=cap, replace=False)
            chosen = [eligible[int(i)] for i in idx]
        # Reverse job order: lowest priority first, then newest, then highest uid.
        return sorted(chosen, key=lambda jid: kai_job_order_key(work.jobs[jid]), reverse=True)

    def _solve(
        self,
        tree: _Tree,
        work: GangState,
        job: Job,
        pods: list[int],
        running: dict[int, RunningInfo],
        touched: set[int],
    ) -> DefragPlan | None:
        eligible = self._eligible(work, job, running, touched)
        if not eligible:
            return None
        base_cap = work.free_milli.sum(axis=1)
        recorded: list[int] = []
        result: _Outcome | None = None
        for i in range(1, len(pods) + 1):
            result = self._solve_partial(tree, work, job, pods[:i], recorded, eligible, base_cap)
            if result is None:
                return None
            recorded = [v for v in result.nodes if v != job.job_id and _moved(work, v, result.nodes[v])]
        assert result is not None
        moves = tuple(
            GangMove(v, tuple(result.nodes[v]))
            for v in result.nodes
            if v != job.job_id and _moved(work, v, result.nodes[v])
        )
        return DefragPlan(job.job_id, moves, tuple(result.nodes[job.job_id]))

    def _solve_partial(
        self,
        tree: _Tree,
        work: GangState,
        job: Job,
        partial: list[int],
        recorded: list[int],
        eligible: list[int],
        base_cap: IntArray,
    ) -> _Outcome | None:
        queue = self._victims_queue(work, eligible)
        need = sorted(_pod_milli(job, partial), reverse=True)
        cap = base_cap.copy()
        for v in recorded:
            _add_cap(cap, work.placements[v])
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
            _add_cap(cap, work.placements[v])
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

    def _filters_ok(self, tree: _Tree, job: Job, need: list[int], cap: IntArray) -> bool:
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
        self, tree: _Tree, work: GangState, job: Job, partial: list[int], victims: list[int]
    ) -> _Outcome:
        """``TryToVirtuallyAllocatePreemptorAndGetVictims`` + ``allPodsReallocated``."""
        self.simulations += 1
        sim = _Sim(work.free_milli.copy(), work.free_gpus.copy(), np.zeros(tree.n, dtype=np.int64))
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
            got = _place_arrays(tree, j, pods, sim.free, sim.idle + sim.rel, sim.idle)
            if got is None:
                if jid == job.job_id:
                    return _FAIL
                unplaced = True
                continue
            prefer = _own_gpus(work.placements[jid]) if jid != job.job_id else {}
            for node, g in zip(got, pods):
                mine = prefer.get((node, g))
                sim.take(node, g, j.gpu_milli, mine.pop() if mine else None)
            nodes[jid] = got
        if unplaced:
            return _INVALID
        return _Outcome(True, nodes=nodes)


def _own_gpus(pods: tuple[PodPlacement, ...]) -> dict[tuple[int, int], list[tuple[int, ...]]]:
    out: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    for p in pods:
        size = len(p.gpu_indices) if p.gpu_milli >= _MILLI else 1
        out.setdefault((p.node, size), []).append(p.gpu_indices)
    return out


def _add_cap(cap: IntArray, pods: tuple[PodPlacement, ...]) -> None:
    for p in pods:
        cap[p.node] += p.gpu_milli * len(p.gpu_indices)


def _moved(work: GangState, jid: int, nodes: list[int]) -> bool:
    pods = work.placements[jid]
    before = sorted((len(p.gpu_indices), p.node) for p in pods)
    sizes = work.pods_of(work.jobs[jid])
    after = sorted((g if not work.jobs[jid].is_sharing else 1, n) for g, n in zip(sizes, nodes))
    return before != after


def _easier(new: list[int], rep: list[int]) -> bool:
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


def _footprint_smaller(new: list[int], cur: list[int]) -> bool:
    """``isPodGroupFootprintSmaller``: every pod of ``new`` at most the matching one of ``cur``."""
    if not new or not cur or len(new) > len(cur):
        return False
    a, b = sorted(new), sorted(cur)
    return all(a[i] <= b[i] for i in range(len(a)))


def _replay(work: GangState, plan: DefragPlan, job: Job) -> GangState | None:
    """The plan on a copy of ``work`` as the simulator replays it, or None if a bind fails or a
    moved job's required constraint breaks."""
    out = work.copy()
    try:
        moved = [(out.unbind(m.job_id), m) for m in plan.moves]
        for j, m in moved:
            if not _required_ok(out.topology, j, m.to_nodes):
                return None
            out.bind(j, list(m.to_nodes))
        if not _required_ok(out.topology, job, plan.nodes):
            return None
        out.bind(job, list(plan.nodes))
    except (PlacementError, KeyError):
        return None
    return out


def _required_ok(topology: Topology, job: Job, nodes: tuple[int, ...]) -> bool:
    c = job.constraint
    if c is None or c.mode != "required":
        return True
    dom = topology.domains(topology.level_index(c.level))
    return len({int(dom[n]) for n in nodes}) == 1
