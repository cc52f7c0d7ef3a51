"""Plan the cheapest migrations that free room for a pod blocked by fragmentation.

A pod is *blocked by fragmentation* when the cluster's free resources cover its request in
total (CPU, memory, and GPU milli on nodes of an accepted model) but no single node can host it.

For such a pod the planner searches exactly, per candidate node X:

* which movable pods S on X to move out (at most ``max_moves``; never do-not-disrupt or gang
  pods) so that the blocked pod fits on X once they are gone: a depth-first branch and bound
  over X's pods in increasing cost order, pruning any partial set whose cheapest completion
  (the fewest further moves that could free room, taken from the next-cheapest pods) costs at
  least the best plan found;
* where each pod of S goes: another node with room for it *now* (a moved pod holds its source
  and its target during the eviction grace period), found by an exhaustive depth-first search
  over nodes with the canonical GPU choice (tightest GPU for sharing pods, lowest free GPUs for
  whole-GPU pods).

Cost = sum over S of ``gpus * (work lost since last checkpoint + restart_s)`` (GPU-seconds).
Benefit = the blocked pod's GPUs times how much earlier the room becomes available: until
X, or (when few pods compete for such room) some other node, would have had room as running
pods finish on their own, less the time the plan takes to free X (the migration model's
eviction grace period); see :mod:`gpudefrag.defrag.benefit`.  A lone pod that the next
natural completion will serve is not worth a migration; a backlog of pods wanting the same
room is.  With ``wait_draws`` > 0 that wait is averaged over joint draws of the running pods'
remaining run times (:mod:`gpudefrag.defrag.natural_wait`), and the same draws bound the
benefit of every node before the search: no plan costing more than
``bound / (1 + margin)`` is searched for.

Queue harm (with ``harm_weight`` > 0 and the blocked pod's run time given) = the GPU-seconds
of room on X the queue would have had, as X's pods finished, while the blocked pod runs there
instead (:func:`gpudefrag.defrag.benefit.queue_harm_gpu_s`).  X is chosen by the least
``cost + harm_weight * harm`` of its cheapest plan, and the plan is returned only if
``benefit >= (1 + margin) * (cost + harm_weight * harm)`` (hysteresis).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudefrag.defrag.benefit import occupy, plan_benefit_gpu_s, queue_harm_gpu_s, release
from gpudefrag.defrag.cost import MovablePod, move_cost_gpu_s
from gpudefrag.defrag.natural_wait import RunningDraws, mean_wait_beyond_s
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.fit import (
    NodeView,
    fits_empty_mask,
    fits_now_mask,
    fits_on_view,
    node_view,
    place_on_view,
)
from gpudefrag.model.pods import PodSpec

Destinations = list[tuple[int, tuple[int, ...]]]
"""Where each moved pod goes: (node, GPUs), aligned with the moved pods."""


@dataclass(frozen=True)
class _Groups:
    """Running pods by node, and by node those movable pods that have another home (in
    increasing move cost, then pod id) with their move costs (GPU-seconds)."""

    excluded: frozenset[int]
    on_node: dict[int, list[MovablePod]]
    by_node: dict[int, list[MovablePod]]
    costs: dict[int, list[float]]


@dataclass(frozen=True)
class PlannedMove:
    pod_id: int
    from_node: int
    to_node: int
    to_gpus: tuple[int, ...]


@dataclass(frozen=True)
class DefragPlan:
    """Moves that free ``target_node`` for the blocked pod, with their cost and benefit."""

    target_node: int
    moves: tuple[PlannedMove, ...]
    cost_gpu_s: float
    benefit_gpu_s: float
    harm_gpu_s: float = 0.0


class DefragPlanner:
    """Exact cheapest-migration search (see the module docstring)."""

    def __init__(self, config: PlannerConfig | None = None) -> None:
        self.config = config or PlannerConfig()
        self._fits_memo: dict[tuple[int, ...], set[int]] = {}
        # what the memo and the grouping were computed for: (state, its node versions, running)
        self._memo_for: tuple[ClusterState, np.ndarray, list[MovablePod]] | None = None
        self._groups: _Groups | None = None

    def candidate_nodes(self, state: ClusterState, pod: PodSpec) -> list[int]:
        """Nodes whose capacity (not free space) can hold ``pod``."""
        return [int(n) for n in np.flatnonzero(fits_empty_mask(state, pod))]

    def destinations(
        self, state: ClusterState, moved: list[MovablePod], avoid: int, excluded: frozenset[int] = frozenset()
    ) -> Destinations | None:
        """Nodes (not ``avoid``, not ``excluded``) and GPUs for every moved pod at once, or ``None``."""
        order = sorted(
            range(len(moved)),
            key=lambda i: (-moved[i].spec.total_gpu_milli, -moved[i].spec.cpu_milli, moved[i].pod_id),
        )
        self._start_call(state)
        views: dict[int, NodeView] = {}
        chosen: list[tuple[int, tuple[int, ...]] | None] = [None] * len(moved)
        budget = [self.config.destination_search_limit]
        nodes = [n for n in range(state.num_nodes) if n != avoid and n not in excluded]

        def view_of(n: int) -> NodeView:
            if n not in views:
                views[n] = node_view(state, n)
            return views[n]

        specs = [p.spec for p in moved]
        fits_alone = [self._fits_alone(state, p.spec) for p in moved]
        for i, p in enumerate(moved):
            if p.excluded_nodes:  # the pod may not go there (its selectors, taints)
                fits_alone[i] = fits_alone[i] - p.excluded_nodes

        def assign(k: int) -> bool:
            if k == len(order):
                return True
            i = order[k]
            spec = specs[i]
            for n in nodes:
                if n not in fits_alone[i]:
                    continue
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                v = view_of(n)
                trial = v.copy()
                gpus = place_on_view(trial, spec)
                if gpus is None:
                    continue
                views[n] = trial
                chosen[i] = (n, gpus)
                if assign(k + 1):
                    return True
                views[n] = v
            return False

        return [c for c in chosen if c is not None] if assign(0) else None

    def _start_call(self, state: ClusterState, running: list[MovablePod] | None = None) -> None:
        """Drop the fit memo unless this call sees the same ``state`` object with the same node
        versions (so equal contents), and the grouping also unless it sees the same ``running``
        list object (``None``: a call that does not group, which keeps the grouping's list).

        Callers pass a new ``running`` list whenever a pod's movability or placement changes
        (as the controller does after each plan), never the same list mutated in place."""
        memo_for = self._memo_for
        if memo_for is not None and memo_for[0] is state and np.array_equal(memo_for[1], state.version):
            if running is None or memo_for[2] is running:
                return
            self._groups = None
            self._memo_for = (state, memo_for[1], running)
            return
        self._fits_memo = {}
        self._groups = None
        self._memo_for = (state, state.version.copy(), running if running is not None else [])

    def _grouped(self, state: ClusterState, running: list[MovablePod], excluded: frozenset[int]) -> _Groups:
        """``running`` by node, and by node the movable pods that fit on another node (not
        excluded) on their own, cheapest move first; computed once per :meth:`_start_call`
        window and ``excluded``."""
        groups = self._groups
        if groups is not None and groups.excluded == excluded:
            return groups
        on_node: dict[int, list[MovablePod]] = {}
        by_node: dict[int, list[MovablePod]] = {}
        # (fit key, the pod's own excluded nodes) -> nodes, not excluded, where it fits now
        homes: dict[tuple[tuple[int, ...], frozenset[int]], set[int]] = {}
        for p in running:
            on_node.setdefault(p.node, []).append(p)
            if not p.movable:
                continue
            home_key = (p.spec.fit_key, p.excluded_nodes)
            home = homes.get(home_key)
            if home is None:
                home = homes[home_key] = self._fits_alone(state, p.spec) - excluded
                if p.excluded_nodes:
                    home -= p.excluded_nodes
            if len(home) > 1 or (len(home) == 1 and p.node not in home):  # it has another home
                by_node.setdefault(p.node, []).append(p)
        restart_s = self.config.migration.restart_s
        costs: dict[int, list[float]] = {}
        for x, pods_x in by_node.items():
            pods_x.sort(key=lambda p: (move_cost_gpu_s(p, restart_s), p.pod_id))
            costs[x] = [move_cost_gpu_s(p, restart_s) for p in pods_x]
        self._groups = _Groups(excluded, on_node, by_node, costs)
        return self._groups

    def _fits_alone(self, state: ClusterState, spec: PodSpec) -> set[int]:
        """Nodes where a pod of ``spec``'s shape fits now, on its own (memoised while the state
        is unchanged, see :meth:`_start_call`)."""
        found = self._fits_memo.get(spec.fit_key)
        if found is None:
            found = set(np.flatnonzero(fits_now_mask(state, spec)).tolist())
            self._fits_memo[spec.fit_key] = found
        return found

    def plan(
        self,
        state: ClusterState,
        running: list[MovablePod],
        pod: PodSpec,
        excluded: frozenset[int] = frozenset(),
        competing: int = 1,
        duration_s: float | None = None,
        draws: RunningDraws | None = None,
        margin: float | None = None,
        pod_excluded: frozenset[int] = frozenset(),
    ) -> DefragPlan | None:
        """The cheapest plan that lets ``pod`` start, if it passes hysteresis; else ``None``.

        ``excluded`` nodes (e.g. reserved for other pods) are neither freed nor used as targets.
        ``pod_excluded`` nodes are the ones ``pod`` may not use (selectors, taints): they are
        not freed for it and their room does not count in its natural wait, but moved pods may
        go there (a moved pod's own :attr:`~gpudefrag.defrag.cost.MovablePod.excluded_nodes`
        are never its destination).
        ``competing`` is the number of pending pods (``pod`` included) that could use the room
        freed for ``pod`` (see :mod:`gpudefrag.defrag.benefit`).  ``duration_s`` is ``pod``'s
        run time, for the queue harm (with ``harm_weight`` > 0; ``None``: no harm counted).
        With ``draws`` (of the same running pods' further run times) the natural wait is their
        average (:mod:`gpudefrag.defrag.natural_wait`); without, it comes from each pod's
        ``remaining_s``.  ``margin`` is the hysteresis margin of this call (``None``: the
        config's).
        A pod that fits on no other node on its own can never be part of a plan, so it is
        treated as immovable up front.
        """
        cfg = self.config
        if margin is None:
            margin = cfg.margin
        elif not margin > -1.0:
            raise ValueError(f"margin must be above -1, got {margin}")
        self._start_call(state, running)
        candidates = [
            x for x in self.candidate_nodes(state, pod) if x not in excluded and x not in pod_excluded
        ]
        delay_s = cfg.migration.eviction_grace_s
        gpus = pod.num_gpu * max(pod.gpu_milli, 0) / GPU_MILLI_PER_GPU
        # only a plan costing less than (benefit bound) / (1 + margin) can pass hysteresis
        cost_cap = float("inf")
        if draws is not None:
            most_s = mean_wait_beyond_s(state, draws, pod, None, candidates, delay_s, competing)
            cost_cap = gpus * most_s / (1.0 + margin)
            if cost_cap <= 0.0:
                return None
        groups = self._grouped(state, running, excluded)
        by_node, on_node = groups.by_node, groups.on_node
        # best: (cost + weighted harm, cost, harm, node, moved pods, destinations)
        best: tuple[float, float, float, int, list[MovablePod], Destinations] | None = None
        for x in candidates:
            if x not in by_node:
                continue  # nothing on x can move, so no plan frees it
            pods_x, costs = by_node[x], groups.costs[x]
            # harm >= 0, so a plan costing at least the best total cannot win
            bound = best[0] if best is not None else cost_cap
            if costs[0] >= bound:
                continue  # even the cheapest single move costs too much
            found = self._search_node(state, x, node_view(state, x), pods_x, costs, pod, bound, excluded)
            if found is None:
                continue
            harm = (
                queue_harm_gpu_s(state, x, on_node.get(x, []), found[1], pod, duration_s)
                if cfg.harm_weight > 0 and duration_s is not None
                else 0.0
            )
            total = found[0] + cfg.harm_weight * harm
            if best is None or total < best[0]:
                best = (total, found[0], harm, x, found[1], found[2])
        if best is None:
            return None
        total, cost, harm, x, moved, dest = best
        if draws is None:
            benefit = plan_benefit_gpu_s(state, running, pod, x, candidates, delay_s, competing)
        else:
            wait_s = mean_wait_beyond_s(state, draws, pod, x, candidates, delay_s, competing)
            benefit = gpus * wait_s
        if benefit < (1.0 + margin) * total:
            return None
        moves = tuple(PlannedMove(p.pod_id, p.node, n, g) for p, (n, g) in zip(moved, dest))
        return DefragPlan(x, moves, cost, benefit, harm)

    def _search_node(
        self,
        state: ClusterState,
        x: int,
        view: NodeView,
        pods_x: list[MovablePod],
        costs: list[float],
        pod: PodSpec,
        bound: float,
        excluded: frozenset[int],
    ) -> tuple[float, list[MovablePod], Destinations] | None:
        """Cheapest non-empty subset of ``pods_x`` (≤ max_moves) freeing room on ``x`` and with
        destinations elsewhere; (cost, subset, destinations) or ``None``."""
        best_cost = bound
        best: tuple[float, list[MovablePod], Destinations] | None = None

        whole = pod.gpu_milli >= GPU_MILLI_PER_GPU
        max_gpus = max((p.spec.num_gpu for p in pods_x), default=0)
        max_moves = self.config.max_moves
        freed = view.copy()  # the node with the pods of ``chosen`` gone (kept in step by the DFS)
        chosen: list[MovablePod] = []

        def hopeless(start: int, cost: float) -> bool:
            """True if no set of further pods from ``pods_x[start:]`` added to ``chosen`` (at
            ``cost``) can free room for the pod at a cost below ``best_cost``.

            Lower bound on the further moves: 1; for a whole-GPU pod, the wholly free GPUs
            still missing over the most GPUs one move frees.  The cheapest that many further
            pods are the next ones (costs ascend), summed in the order the DFS sums them
            (float addition is monotone, so no completion can cost less)."""
            need = 1
            if whole:
                missing = pod.num_gpu - freed.gpu_left.count(GPU_MILLI_PER_GPU)
                if missing > 0:
                    if max_gpus == 0:
                        return True
                    need = -(-missing // max_gpus)
            if len(chosen) + need > max_moves or start + need > len(pods_x):
                return True
            for j in range(start, start + need):
                cost += costs[j]
            return cost >= best_cost

        if hopeless(0, 0.0):
            return None

        def dfs(start: int, cost: float) -> None:
            nonlocal best_cost, best
            for j in range(start, len(pods_x)):
                c = cost + costs[j]
                if c >= best_cost:
                    return  # costs ascend: every later pod costs at least as much
                chosen.append(pods_x[j])
                release(freed, pods_x[j])
                if fits_on_view(freed, pod):
                    dest = self.destinations(state, list(chosen), x, excluded)
                    if dest is not None:
                        best_cost, best = c, (c, list(chosen), dest)
                    # a superset of a fitting set only costs more: no deeper search
                elif not hopeless(j + 1, c):
                    dfs(j + 1, c)
                occupy(freed, pods_x[j])
                chosen.pop()

        dfs(0, 0.0)
        return best
