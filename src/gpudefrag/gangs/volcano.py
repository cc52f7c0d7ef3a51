"""Volcano's gang scheduling with the ``binpack`` and ``network-topology-aware`` plugins.

Upstream: volcano-sh/volcano at commit ed72c7c815a9fd547a787134676f73d42e9d049c (2026-08-20):

* ``pkg/scheduler/actions/allocate/allocate.go`` -- ``allocateForJob`` (hypernode gradients,
  one dry run per candidate hypernode, best-scoring hypernode wins), ``allocateForSubJob``,
  ``allocateResourcesForTasks`` (tasks one by one, the highest-scoring node each) and
  ``prioritizeNodes``;
* ``pkg/scheduler/plugins/binpack/binpack.go`` -- ``BinPackingScore``;
* ``pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go`` --
  ``hyperNodeGradientFn`` / ``isEligibleHyperNode``, ``HyperNodeOrderFn`` (hypernode-level
  binpack), ``batchNodeOrderFnForNetworkAwarePods`` (LCA-tier score + task-count tie break) and
  ``batchNodeOrderFnForNormalPods`` (hypernode binpack with tier fading);
* ``pkg/scheduler/framework/session.go`` -- ``addClusterTopHyperNode`` and
  ``adjustNetworkTopologySpec`` (soft mode is run as hard mode with the virtual cluster-top
  hypernode's tier as ``highestTierAllowed``);
* ``pkg/scheduler/util/scheduler_helper.go`` -- ``SelectBestNodeAndScore`` (random among ties).
"""

from __future__ import annotations

import numpy as np

from gpudefrag.gangs.topo_search import (
    BoolArray,
    FloatArray,
    GangShape,
    IntArray,
    TopoIndex,
    gang_shape,
    node_capacity_mask,
    topo_index,
)
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

__all__ = ["VolcanoBinpack"]

MAX_NODE_SCORE = 100.0  # k8s.io/kube-scheduler/framework MaxNodeScore


class VolcanoBinpack:
    """Volcano: gang + ``binpack`` (GPU) + ``network-topology-aware`` with HyperNodes.

    **Mapping.**  Each topology level is a HyperNode tier: ``levels[0]`` is tier 1 (its domains
    hold nodes directly), ``levels[i]`` tier ``i + 1``; the scheduler adds a virtual
    cluster-top HyperNode one tier above the highest.  A job is a PodGroup with
    ``minAvailable`` = all its pods (its default SubJob inherits the job's network topology).
    ``required:L`` -> ``networkTopology: {mode: hard, highestTierAllowed: tier(L)}``;
    ``preferred:L`` -> ``mode: soft`` (upstream has no level for soft mode: the session turns
    it into hard mode up to the cluster-top tier, so the search starts at tier 1 whatever L
    is); no constraint -> no ``networkTopology`` (a "normal" job).  ``required:node`` has no
    upstream counterpart; it is run as hard mode whose only candidates are single nodes.

    **Hard/soft mode** (``allocateForJob``): the gradients are the tiers 1, 2, ... up to the
    highest allowed, lowest first.  Within the first tier that has a solution, every eligible
    HyperNode gets a dry run of the whole gang; the HyperNode with the highest
    ``HyperNodeOrderFn`` score wins: ``100 * weight * (used + request) / allocatable`` of the
    HyperNode's GPU totals, i.e. the fullest HyperNode after placement.  The per-
    SubJob gradient inside a tier-t candidate tries its tier < t descendants first, but those
    already failed in an earlier gradient on the same state, so the SubJob lands in the
    candidate itself; the dry run is therefore decided by :func:`_domains_can_host`, which is
    exactly when the per-pod greedy below succeeds (full-node pods take wholly free nodes,
    then the remainder pod any node with room), and only the winner is simulated.

    **Tasks** (``allocateResourcesForTasks``, ``prioritizeNodes``): pods in
    :meth:`ClusterState.pods_of` order, each on the feasible node with the highest sum of

    * binpack: ``100 * binpack_weight * (used + request) / capacity`` of the GPU resource
      (with ``binpack.cpu = binpack.memory = 0`` and ``binpack.resources: nvidia.com/gpu``,
      the GPU weight cancels out of upstream's weighted mean);
    * for a job with a network topology, ``100 * nta_weight * tierScore(LCA(hypernode of the
      node, the job's allocated hypernode))`` with ``tierScore(t) = (maxTier - t) /
      (maxTier - minTier)`` (1 for the allocated tier-1 HyperNode itself, 0 before the first
      pod), plus ``taskNum / len(tasks)`` for the nodes at the highest tier score (pods of this
      job already in the node's tier-1 HyperNode);
    * for a normal job (``hypernode.binpack.normal-pod.enable``), ``100 * nta_weight *
      sum_t fading^(t-1) * hypernodeBinpack(t) / sum_t fading^(t-1)`` over the node's
      HyperNode at every tier including the cluster top, ``hypernodeBinpack = (used +
      request) / allocatable`` of the HyperNode (0 when it would be overused).

    Gang members see each other's usage (a scratch copy of the free GPUs); a pod that fits
    nowhere fails the whole job (``None``).  Runs of full-node pods are evaluated once per
    tier-1 HyperNode they fill (see :meth:`_allocate_tasks`), with the same result.

    **Ties.**  Upstream picks randomly among equal scores (``SelectBestNodeAndScore``) and
    takes the first in Go map order among equal HyperNodes; here the lowest node index and the
    lowest domain index win, so placement is deterministic.

    **Scheduler configuration assumed**: actions ``enqueue, allocate``; plugins ``gang``,
    ``predicates``, ``binpack``, ``network-topology-aware`` (HyperNodes = our levels).  The
    ``nodeorder`` plugin's kube-scheduler scores (LeastRequested, BalancedAllocation, ...)
    would be added to every node score; they are taken as disabled (weights 0).

    **Not modelled**: CPU and memory (only GPUs are scored or checked; the plugin weights of
    the other resources are taken as 0), the ``Releasing``/future-idle second candidate list
    and pipelining, queues, priorities, preemption/reclaim, ``NominatedHyperNode`` fast paths,
    SubGroup policies (one SubJob per job), node sharding and the ``predicates`` plugin beyond
    GPU capacity.  Upstream stops the feasibility search after ``max(100, adaptive %)``
    feasible nodes from a rotating start index on clusters above 100 nodes
    (``CalculateNumOfFeasibleNodesToFind``); here every feasible node is scored.  GPU sharing
    (``gpu_milli < 1000``) is scored with the share as a fractional GPU request (upstream
    shares GPUs through vGPU / gpu-memory resources instead).
    """

    def __init__(
        self,
        binpack_weight: int = 1,
        nta_weight: int = 1,
        hypernode_binpack: bool = True,
        normal_pod_binpack: bool = True,
        normal_pod_fading: float = 0.8,
        name: str = "volcano-binpack",
    ) -> None:
        """``binpack_weight`` is ``binpack.weight``; ``nta_weight`` the network-topology-aware
        ``weight``; ``hypernode_binpack`` puts ``nvidia.com/gpu`` in
        ``hypernode.binpack.resources`` (else HyperNode scores are all 0 and the lowest
        domain index wins); ``normal_pod_binpack`` / ``normal_pod_fading`` are
        ``hypernode.binpack.normal-pod.enable`` / ``.fading`` (upstream defaults: true, 0.8)."""
        if binpack_weight < 0 or nta_weight < 0 or normal_pod_fading < 0:
            raise ValueError("weights and fading must be non-negative")
        self.name = name
        self.binpack_weight = binpack_weight
        self.nta_weight = nta_weight
        self.hypernode_binpack = hypernode_binpack
        self.normal_pod_binpack = normal_pod_binpack
        self.normal_pod_fading = normal_pod_fading
        self._fill_shortcut = True  # False: the plain per-pod loop (the tests' reference)

    # ---- the policy ------------------------------------------------------------------------
    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        ix = topo_index(state.topology)
        shape = gang_shape(state, job)
        used = self._used_gpus(state)
        c = job.constraint
        if c is None:
            all_nodes = np.arange(state.topology.num_nodes, dtype=np.int64)
            return self._allocate_tasks(state, ix, shape, all_nodes, used, network_aware=False)
        li = state.topology.level_index(c.level)
        top = ix.num_levels + 1  # position of the virtual cluster-top HyperNode
        if c.mode == "required":
            positions = [0] if li < 0 else list(range(1, li + 2))
        else:
            positions = list(range(1, top + 1))
        for p in positions:
            dom = self._dom(ix, p)
            ok = _domains_can_host(state, shape, dom, int(dom.max()) + 1)
            if not ok.any():
                continue
            cand = np.flatnonzero(ok)
            if self.hypernode_binpack and cand.size > 1:
                cap = np.bincount(dom, weights=state.topology.gpus_per_node)[cand]
                hn_used = np.bincount(dom, weights=used)[cand]
                best = int(cand[int(np.argmax((hn_used + shape.request_gpus) / cap))])
            else:
                best = int(cand[0])
            members = np.flatnonzero(dom == best)
            return self._allocate_tasks(state, ix, shape, members, used, network_aware=True)
        return None

    # ---- pieces ----------------------------------------------------------------------------
    @staticmethod
    def _dom(ix: TopoIndex, p: int) -> IntArray:
        """Domain of every node at HyperNode position ``p`` (0 node, 1.. tiers, top+1 all)."""
        if p <= ix.num_levels:
            return ix.dom[p]
        return np.zeros(ix.topology.num_nodes, dtype=np.int64)

    @staticmethod
    def _used_gpus(state: ClusterState) -> FloatArray:
        """GPUs in use per node, counting shared GPUs by their used milli."""
        gpn = state.topology.gpus_per_node
        free = state.gpu_milli_left.sum(axis=1) / GPU_MILLI_PER_GPU
        return np.asarray(gpn - free, dtype=np.float64)

    def _allocate_tasks(
        self,
        state: ClusterState,
        ix: TopoIndex,
        shape: GangShape,
        members: IntArray,
        used_all: FloatArray,
        network_aware: bool,
    ) -> list[int] | None:
        """Pods one by one on ``members`` (node indices, ascending): the best-scoring feasible
        node each; ``None`` if some pod finds no node (the gang is dropped).

        Shortcut (same result as pod by pod, checked in the tests): full-node pods all score
        the same binpack on the wholly free nodes, and the nodes of one tier-1 HyperNode share
        every HyperNode score, so once a full pod lands in a tier-1 HyperNode the next ones
        strictly prefer its other wholly free nodes (lowest index first) until it has none;
        the scores are evaluated once per tier-1 HyperNode used instead of once per pod."""
        gpn = state.topology.gpus_per_node[members].astype(np.float64)
        free = state.free_gpus[members].copy()
        used = used_all[members].copy()
        share = shape.milli / GPU_MILLI_PER_GPU if shape.sharing else 0.0
        n_pods = len(shape.sizes)
        out: list[int] = []
        # network-aware state: the allocated HyperNode (position, a node inside it) and the
        # job's pods per tier-1 HyperNode
        alloc_pos, alloc_rep = 0, -1
        hn1 = ix.dom[1][members] if ix.num_levels > 0 else np.zeros(members.size, dtype=np.int64)
        pods_in_hn1 = np.zeros(int(hn1.max()) + 1, dtype=np.int64)
        nta_on = self.nta_weight > 0
        normal = (not network_aware) and self.normal_pod_binpack and nta_on
        tiers = self._normal_pod_tiers(state, ix, used_all, members) if normal else []
        # with a HyperNode term, a tier-1 HyperNode just used is strictly preferred next
        fill = self._fill_shortcut and nta_on and (network_aware or normal)
        i = 0
        while i < n_pods:
            size = shape.sizes[i]
            req = share if shape.sharing else float(size)
            if shape.sharing:
                cand = np.flatnonzero((state.gpu_milli_left[members] >= shape.milli).any(axis=1))
            else:
                cand = np.flatnonzero(free >= size)
            if cand.size == 0:
                return None
            if cand.size == 1:
                pick = int(cand[0])
            else:
                score = MAX_NODE_SCORE * self.binpack_weight * (used[cand] + req) / gpn[cand]
                if network_aware and alloc_rep >= 0 and nta_on:
                    nta = self._lca_tier_score(ix, members[cand], alloc_pos, alloc_rep)
                    at_max = nta == nta.max()
                    nta = nta + np.where(at_max, pods_in_hn1[hn1[cand]] / n_pods, 0.0)
                    score = score + MAX_NODE_SCORE * self.nta_weight * nta
                elif normal:
                    score = score + MAX_NODE_SCORE * self.nta_weight * self._normal_pod_score(
                        tiers, cand, req
                    )
                pick = int(cand[int(np.argmax(score))])
            picks = np.array([pick], dtype=np.int64)
            if fill and i + 1 < shape.full:  # pods i, i + 1, ... are full-node pods
                # ``pick`` is the lowest-index candidate of its tier-1 HyperNode (equal scores)
                picks = cand[hn1[cand] == hn1[pick]][: shape.full - i]
            run = int(picks.size)
            out.extend(int(x) for x in members[picks])
            if not shape.sharing:
                free[picks] -= size
            used[picks] += req
            for t_dom, t_used, _cap, _w in tiers:
                t_used[t_dom[pick]] += req * run  # one tier-1 HyperNode: one domain per tier
            pods_in_hn1[hn1[pick]] += run
            node = int(members[pick])
            if alloc_rep < 0:
                alloc_pos, alloc_rep = 1, node
            else:
                alloc_pos = self._lca_position(ix, node, alloc_pos, alloc_rep)
            i += run
        return out

    # -- network-aware pods ------------------------------------------------------------------
    @staticmethod
    def _lca_position(ix: TopoIndex, node: int, pos: int, rep: int) -> int:
        """Position of the lowest common HyperNode of ``node``'s tier-1 HyperNode and the one
        at ``pos`` containing ``rep`` (``num_levels + 1``: the cluster top)."""
        for p in range(max(pos, 1), ix.num_levels + 1):
            if ix.dom[p][node] == ix.dom[p][rep]:
                return p
        return ix.num_levels + 1

    @staticmethod
    def _lca_tier_score(ix: TopoIndex, nodes: IntArray, pos: int, rep: int) -> FloatArray:
        """``networkTopologyAwareScore`` of every node: the tier of the LCA of its tier-1
        HyperNode and the allocated one, mapped to ``(maxTier - t) / (maxTier - minTier)``."""
        max_tier = ix.num_levels + 1
        if max_tier == 1:
            return np.ones(nodes.size, dtype=np.float64)
        t = np.full(nodes.size, max_tier, dtype=np.int64)
        for p in range(ix.num_levels, max(pos, 1) - 1, -1):
            t[ix.dom[p][nodes] == ix.dom[p][rep]] = p
        return np.asarray((max_tier - t) / (max_tier - 1), dtype=np.float64)

    # -- normal pods -------------------------------------------------------------------------
    def _normal_pod_tiers(
        self, state: ClusterState, ix: TopoIndex, used_all: FloatArray, members: IntArray
    ) -> list[tuple[IntArray, FloatArray, FloatArray, float]]:
        """Per tier 1 .. cluster top: (HyperNode of each member node, used GPUs per
        HyperNode (a scratch copy), allocatable GPUs per HyperNode, tier weight)."""
        out: list[tuple[IntArray, FloatArray, FloatArray, float]] = []
        gpn = state.topology.gpus_per_node
        for p in range(1, ix.num_levels + 2):
            dom = self._dom(ix, p)
            k = int(dom.max()) + 1
            t_used = np.bincount(dom, weights=used_all, minlength=k).astype(np.float64)
            t_cap = np.bincount(dom, weights=gpn, minlength=k).astype(np.float64)
            out.append((dom[members], t_used, t_cap, self.normal_pod_fading ** (p - 1)))
        return out

    @staticmethod
    def _normal_pod_score(
        tiers: list[tuple[IntArray, FloatArray, FloatArray, float]], cand: IntArray, req: float
    ) -> FloatArray:
        total = np.zeros(cand.size, dtype=np.float64)
        w_sum = 0.0
        for t_dom, t_used, t_cap, w in tiers:
            d = t_dom[cand]
            after = t_used[d] + req
            total += w * np.where(after <= t_cap[d], after / t_cap[d], 0.0)
            w_sum += w
        return total / w_sum if w_sum > 0 else total


def _domains_can_host(state: ClusterState, shape: GangShape, dom: IntArray, k: int) -> BoolArray:
    """For every domain of the map ``dom`` (``k`` domains): does the per-pod greedy succeed
    in it?  Full-node pods need wholly free nodes of the largest size; the remainder (or lone)
    pod a node with room, which must be a partly used one when the full pods take every wholly
    free node."""
    free = state.free_gpus
    if shape.full == 0:
        fits = node_capacity_mask(free, state.gpu_milli_left, shape.rest, shape.milli)
        return np.asarray(np.bincount(dom, weights=fits, minlength=k) > 0)
    gpn = state.topology.gpus_per_node
    whole = (free == gpn) & (gpn >= shape.full_size)
    wc = np.bincount(dom, weights=whole, minlength=k)
    ok = wc >= shape.full
    if shape.rest:
        part = np.bincount(dom, weights=(~whole) & (free >= shape.rest), minlength=k) > 0
        ok &= (wc > shape.full) | part
    return np.asarray(ok)
