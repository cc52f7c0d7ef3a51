"""Slurm's ``topology/tree`` node selection (``_eval_nodes_topo``).

Upstream: SchedMD/slurm at commit 284c3b95f08a2dc2478499837b03355e1b9c5c75 (2026-08-20):

* ``src/plugins/topology/tree/eval_nodes_tree.c`` -- ``eval_nodes_tree`` ->
  ``_eval_nodes_topo`` (top switch, best leaf switch by ``_topo_choose_best_switch`` /
  ``_topo_compare_switches``, nodes in bitmap order, ``_decrement_node_cnt``);
* ``src/plugins/topology/tree/switch_record.c`` -- switch levels and ``switches_dist`` (hop
  counts between switches, Floyd-Warshall over the tree);
* ``src/plugins/topology/common/eval_nodes.c`` -- ``eval_nodes_enough_nodes``;
* ``doc/html/topology.shtml`` -- "identify the lowest level switch in the hierarchy that can
  satisfy a job's request and then allocate resources on its underlying leaf switches using a
  best-fit algorithm"; ``--switches=count[@time]``.

The older algorithm of the same name (``_job_test_topo`` in ``select/linear``, removed in
commit 85063ad493, and the cons_res/cons_tres ``_eval_nodes_topo`` of that time) took the
lowest-level fitting switch with the fewest nodes and then filled its leaf switches with the
fewest idle CPUs first; the current one modelled here reaches the same "lowest fitting switch,
best fit" through its switch comparison (see :class:`SlurmTree`).
"""

from __future__ import annotations

import numpy as np

from gpudefrag.gangs.topo_search import (
    BoolArray,
    IntArray,
    TopoIndex,
    all_in_one_domain,
    gang_shape,
    topo_index,
)
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

__all__ = ["SlurmTree", "tree_select"]

_INF = np.iinfo(np.int64).max // 4


def _leaf_distances(ix: TopoIndex, leaf: int, n_leaves: int) -> IntArray:
    """``switches_dist[leaf][*]`` for the leaf switches: 2 hops per level up to the lowest
    common ancestor switch, infinite without one."""
    d = np.full(n_leaves, _INF, dtype=np.int64)
    for q in range(ix.num_levels, 1, -1):
        anc = ix.dom[q][ix.rep[1]]
        d[anc == anc[leaf]] = 2 * (q - 1)
    d[leaf] = 0
    return d


def tree_select(ix: TopoIndex, eligible: BoolArray, n_nodes: int) -> list[int] | None:
    """``_eval_nodes_topo`` for a request of ``n_nodes`` nodes among the ``eligible`` ones
    (one scheduling weight, no required nodes, CPUs not binding).  Nodes in the order taken;
    None when the request cannot be met now."""
    levels = ix.num_levels
    if levels == 0:  # no switch: one virtual leaf switch holds every node
        nodes = np.flatnonzero(eligible)
        return [int(x) for x in nodes[:n_nodes]] if nodes.size >= n_nodes else None
    # switch node counts, positions 1 (leaf switches) .. levels
    cnt = [np.zeros(0, dtype=np.int64)] + [
        np.bincount(ix.dom[p][eligible], minlength=ix.ndom[p]).astype(np.int64) for p in range(1, levels + 1)
    ]
    # top switch: the last fitting switch of the highest level that has one (table order:
    # levels bottom-up, domains ascending; ``level >= top level`` replaces)
    top_p, top_d = -1, -1
    for p in range(levels, 0, -1):
        fits = np.flatnonzero(cnt[p] >= n_nodes)
        if fits.size:
            top_p, top_d = p, int(fits[-1])
            break
    if top_p < 0:
        return None
    elig = eligible & (ix.dom[top_p] == top_d)
    cnt = [cnt[0]] + [
        np.bincount(ix.dom[p][elig], minlength=ix.ndom[p]).astype(np.int64) for p in range(1, levels + 1)
    ]
    up = ix.up  # up[p]: parent (position p + 1) of a domain at position p
    n_leaves = ix.ndom[1]
    leaf_of = ix.dom[1]
    dist = np.zeros(n_leaves, dtype=np.int64)
    rem = n_nodes
    taken: list[int] = []
    used = np.zeros(elig.size, dtype=np.bool_)

    def compare(i: int, j: int) -> tuple[int, bool]:
        """``_topo_compare_switches``: (1 if leaf i fits better, -1 if j, 0; i's fit)."""
        p = 1
        while True:
            ci, cj = int(cnt[p][i]), int(cnt[p][j])
            i_fit, j_fit = ci >= rem, cj >= rem
            if i_fit and j_fit:
                if ci != cj:
                    return (1 if ci < cj else -1), i_fit
                break
            if i_fit:
                return 1, i_fit
            if j_fit:
                return -1, i_fit
            if p < levels and up[p][i] != up[p][j]:
                i, j, p = int(up[p][i]), int(up[p][j]), p + 1
                continue
            break
        ci, cj = int(cnt[p][i]), int(cnt[p][j])
        return (1 if ci > cj else -1 if ci < cj else 0), i_fit

    prev_rem = rem + 1
    while prev_rem != rem:
        prev_rem = rem
        best = -1
        leaf_cnt = cnt[1]
        for i in np.flatnonzero(leaf_cnt).tolist():  # ``_topo_choose_best_switch``
            if dist[i] >= _INF:
                continue
            if best < 0:
                best = i
                continue
            tcs, i_fit = compare(i, best)
            if (dist[i] < dist[best] and i_fit) or (dist[i] == dist[best] and tcs > 0):
                best = i
        if best < 0:
            break
        step = _leaf_distances(ix, best, n_leaves)
        dist = np.where((dist >= _INF) | (step >= _INF), _INF, dist + step)
        free_here = np.flatnonzero(elig & (leaf_of == best) & ~used)
        take = free_here[:rem]
        used[take] = True
        taken.extend(int(x) for x in take)
        rem -= int(take.size)
        if rem <= 0:
            return taken
        # ``_decrement_node_cnt``: the leaf's whole count comes off every ancestor
        n_off = int(leaf_cnt[best])
        d = best
        for p in range(1, levels + 1):
            cnt[p][d] = max(0, int(cnt[p][d]) - n_off)
            if p < levels:
                d = int(up[p][d])
        leaf_cnt[best] = 0
    return None


class SlurmTree:
    """Slurm ``select/cons_tres`` + ``topology/tree`` (``TopologyParam`` without ``dragonfly``
    or ``TopoOptional``).

    **Mapping.**  Our levels are switch levels: ``levels[0]`` domains are the leaf switches
    (``SwitchName=... Nodes=...``), each higher level's domains the switches above them
    (``Switches=...``); the switch table lists them level by level bottom-up, domains in
    index order, which is where Slurm's order-dependent choices break ties.  A job is
    ``sbatch -N <pods> --gres=gpu:<G>`` with one task per node: a node is eligible when it has
    ``G`` free GPUs (``G`` = the job's first pod, so the nodes of a multi-node job are wholly
    free nodes, as ``--exclusive`` GPU jobs use them; a lone pod asks for its own GPUs or, for
    a GPU share, a GPU with that much free).  The remainder pod of a multi-node job goes on
    the last node taken.  With ``hetjob=True`` the remainder pod is instead a second
    heterogeneous-job component (``-N 1 --gres=gpu:<rest>``), selected by the same algorithm
    after the first component's nodes are taken (Slurm places components independently).
    CPUs and memory never bind.

    **Algorithm** (``_eval_nodes_topo``): the *top switch* is the highest-level switch with
    enough eligible nodes (the last in table order at that level); only its nodes are used.
    Then, repeatedly, one leaf switch is chosen and its eligible nodes are taken in index
    order ("bitmap order") until the request is met.  A leaf is chosen by scanning the
    leaves in table order and replacing the current choice when the new leaf is closer (in
    switch hops from the leaves already used) and fits, or equally close and better by
    ``_topo_compare_switches``: a leaf that fits the remaining nodes beats one that does not,
    between two that fit the one with fewer nodes wins (best fit); when neither fits, their
    parent switches are compared the same way (climbing while the parents differ) and, under a
    common parent, the switch with more nodes wins.  So a job that fits a leaf takes the
    fitting leaf with the fewest free nodes; a larger one typically starts in the largest leaf under the
    best-fitting lowest common switch and continues in its nearest leaves.  After a leaf is
    used, its remaining node count is subtracted from all its ancestors.

    **Constraints.**  ``required:L`` -> the allocation must lie within one switch of level L
    (for the leaf level this is ``--switches=1`` with no time limit; for higher levels and for
    ``node`` it is the same check, which Slurm has no option for): otherwise the job waits
    (None).  ``preferred:L`` and no constraint are the same request: the tree plugin always
    minimises switches and ``--switches=N@time`` only delays the start.

    **Not modelled**: node weights (one weight), required node lists, the dragonfly variant,
    ``--switches`` wait times, ``max_switch_wait``, CPU/memory/socket layout, node features,
    partitions, backfill reservations and GRES topology within a node.
    """

    def __init__(self, hetjob: bool = False, name: str = "slurm-tree") -> None:
        self.name = name
        self.hetjob = hetjob

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        ix = topo_index(state.topology)
        shape = gang_shape(state, job)
        free = state.free_gpus
        if shape.full == 0:
            if shape.sharing:
                elig = np.asarray((state.gpu_milli_left >= shape.milli).any(axis=1))
            else:
                elig = free >= shape.rest
            nodes = tree_select(ix, elig, 1)
        else:
            whole = free >= shape.full_size
            if not self.hetjob or not shape.rest:
                nodes = tree_select(ix, whole, len(shape.sizes))
            else:
                nodes = tree_select(ix, whole, shape.full)
                if nodes is not None:
                    after = free.copy()
                    after[nodes] -= shape.full_size
                    second = tree_select(ix, after >= shape.rest, 1)
                    nodes = None if second is None else nodes + second
        if nodes is None:
            return None
        c = job.constraint
        if c is not None and c.mode == "required":
            li = state.topology.level_index(c.level)
            if not all_in_one_domain(state.topology, li, nodes):
                return None
        return nodes
