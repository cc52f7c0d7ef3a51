"""NVIDIA KAI-Scheduler's gang placement (topology + binpack), re-implemented on this package's
model.

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
  sharing pod, which is the best-fit rule :meth:`ClusterState.bind` applies.
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

Its Consolidate action: :mod:`gpudefrag.gangs.kai_consolidate`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState
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
    "kai_job_order_key",
]

UPSTREAM = "NVIDIA/KAI-Scheduler@72de64fc8eca10fa8cca26a20156178f3edbe092"

SCORE_TOPOLOGY = 10_000  # plugins/scores/scores.go: Topology
SCORE_GPU_SHARING = 1_000  # GpuSharing
SCORE_AVAILABILITY = 100  # Availability
_BINPACK_SPAN = 99  # free GPUs per node stay below this: the binpack term never reaches 100

DEFAULT_MAX_CONSOLIDATION_PREEMPTEES = 16  # cmd/scheduler/app/options/options.go
NON_PREEMPTIBLE_PRIORITY = 100  # constants/priorities.go: PriorityBuildNumber
MILLI = GPU_MILLI_PER_GPU


def kai_job_order_key(job: Job) -> tuple[int, float, int]:
    """KAI's job order: priority descending, creation time, uid (``Session.JobOrderFn``)."""
    return (-job.priority, job.submit_s, job.job_id)


def pod_milli(job: Job, pods: list[int]) -> list[int]:
    if job.is_sharing:
        return [job.gpu_milli]
    return [g * MILLI for g in pods]


class Tree:
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


class TreeCache:
    def __init__(self) -> None:
        self._topo: Topology | None = None
        self._tree: Tree | None = None

    def get(self, topology: Topology) -> Tree:
        if self._topo is not topology or self._tree is None:
            self._tree = Tree(topology)
            self._topo = topology
        return self._tree


def _node_sets(
    tree: Tree, job: Job, pods: list[int], free: IntArray, whole: IntArray
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
        tasks_gpus = job.gpu_milli / MILLI
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


def place_arrays(
    tree: Tree,
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
                shared = (ge & (rows < MILLI)).any(axis=1)
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
        self._trees = TreeCache()

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        tree = self._trees.get(state.topology)
        pods = state.pods_of(job)
        return place_arrays(tree, job, pods, state.gpu_milli_left, state.free_gpus, state.free_gpus)
