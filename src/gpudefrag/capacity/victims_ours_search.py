"""The searches behind our victim rule's estimates (:mod:`gpudefrag.capacity.victims_ours`).

Both work on free milli per GPU (:class:`Milli`: the state's rows, with victims taken off or put
back), never on a copy of the state.

* :class:`NodeSearch` — one pod on one node: the cheapest set of allowed jobs of that node
  whose eviction makes room (``g`` fully free GPUs, or one GPU with the pod's milli free).
  Exact over the ``max_candidates`` cheapest jobs of the node: subsets by size, each size
  stopped once even its cheapest subset cannot beat the best found.
* :class:`GangSearch` — a gang of ``k`` full-node pods (+ a remainder pod) in one domain.
  Greedy: each step frees the node whose remaining jobs cost least, either per node
  (``per_node=False``) or per node the step leaves wholly free (``per_node=True``: a gang
  spanning several nodes counts for each of them, up to the nodes still needed); after the
  ``k`` nodes, the remainder pod by :class:`NodeSearch` on another node; then the victims are
  reprieved, most expensive first, while the domain can still host the gang.  Both orders are
  run from each of the ``lookahead`` best first steps (and unforced), and the cheapest result
  is the estimate.  The steps use a heap of per-node keys with lazy updates, so a step costs
  about the nodes its victims touch, not the domain's size.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from gpudefrag.capacity.victims_base import held_milli, original_nodes
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job

__all__ = ["GangSearch", "Milli", "NodeSearch", "pod_fits"]

TIE = 1e-6  # GPU-seconds: costs closer than this are equal

Found = tuple[float, tuple[int, ...]]
BoolArray = npt.NDArray[np.bool_]


def pod_fits(row: list[int], pod_gpus: int, gpu_milli: int) -> bool:
    """Does one pod fit on a node with free milli ``row``?"""
    if gpu_milli < GPU_MILLI_PER_GPU:
        return any(v >= gpu_milli for v in row)
    return sum(1 for v in row if v == GPU_MILLI_PER_GPU) >= pod_gpus


class Milli:
    """Free milli per GPU of the nodes victims touch, as victims are taken off or put back."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.rows: dict[int, list[int]] = {}

    def row(self, node: int) -> list[int]:
        r = self.rows.get(node)
        if r is None:
            r = self.rows[node] = [int(v) for v in self.state.gpu_milli_left[node]]
        return r

    def take_off(self, j: int, sign: int = 1) -> list[int]:
        """Take job ``j`` off (``sign=-1``: put it back); returns the nodes it touches."""
        nodes = []
        for node, g, milli in held_milli(self.state, j):
            self.row(node)[g] += sign * milli
            nodes.append(node)
        return nodes

    def free_gpus(self, node: int) -> int:
        r = self.rows.get(node)
        if r is None:
            return int(self.state.free_gpus[node])
        return sum(1 for v in r if v == GPU_MILLI_PER_GPU)


class NodeSearch:
    """Cheapest victims on one node for one pod (module docstring)."""

    def __init__(
        self, state: ClusterState, on_node: dict[int, list[int]], cost: dict[int, float], max_candidates: int
    ) -> None:
        self.state, self.on_node, self.cost, self.max_candidates = state, on_node, cost, max_candidates

    def cheapest(
        self, node: int, pod_gpus: int, gpu_milli: int, milli: Milli, taken: Iterable[int] = ()
    ) -> Found | None:
        """The cheapest set of allowed jobs on ``node`` (not in ``taken``, which ``milli``
        already has off) whose eviction lets the pod fit there; ``(0, ())`` if it fits now."""
        base = milli.row(node)
        if pod_fits(base, pod_gpus, gpu_milli):
            return 0.0, ()
        skip = set(taken)
        cost = self.cost
        cands = sorted((j for j in self.on_node.get(node, ()) if j not in skip), key=lambda j: (cost[j], j))
        cands = cands[: self.max_candidates]
        gives = []
        for j in cands:
            add = [0] * len(base)
            for n, g, m in held_milli(self.state, j):
                if n == node:
                    add[g] += m
            gives.append(add)
        every = [v + sum(add[g] for add in gives) for g, v in enumerate(base)]
        if not pod_fits(every, pod_gpus, gpu_milli):
            return None  # not even with every candidate off
        costs = [cost[j] for j in cands]
        best: Found | None = None
        for size in range(1, len(cands) + 1):
            if best is not None and sum(costs[:size]) >= best[0] - TIE:
                break  # costs are sorted and not negative: no larger set is cheaper
            for combo in itertools.combinations(range(len(cands)), size):
                c = sum(costs[i] for i in combo)
                if best is not None and c >= best[0] - TIE:
                    continue
                row = list(base)
                for i in combo:
                    for g, m in enumerate(gives[i]):
                        row[g] += m
                if pod_fits(row, pod_gpus, gpu_milli):
                    best = (c, tuple(cands[i] for i in combo))
        return best


class GangSearch:
    """The estimate of a gang's room in one domain (module docstring)."""

    def __init__(
        self,
        state: ClusterState,
        job: Job,
        members: list[int],
        on_node: dict[int, list[int]],
        cost: dict[int, float],
        nodes: NodeSearch,
        lookahead: int,
    ) -> None:
        self.state, self.job, self.members, self.cost = state, job, members, cost
        self.on_node, self.nodes, self.lookahead = on_node, nodes, lookahead
        gpn = state.topology.max_gpus_per_node
        sizes = state.pods_of(job)
        self.full = sum(1 for s in sizes if s == gpn)
        self.rest = [s for s in sizes if s != gpn]
        self.member_set = set(members)
        self.eligible = self._freeable()
        self._base_rest: list[tuple[float, int, tuple[int, ...]]] | None = None
        self._room: tuple[BoolArray, BoolArray, int, int] | None = None
        self._reprieved: dict[frozenset[int], Found] = {}

    def room_base(self) -> tuple[BoolArray, BoolArray, int, int]:
        """Per node (all of the topology's): wholly free (largest size) and, if not, room for
        the remainder pod, on the state without victims; and their counts over the members."""
        if self._room is None:
            topo = self.state.topology
            free = self.state.free_gpus
            whole = (free == topo.gpus_per_node) & (topo.gpus_per_node >= topo.max_gpus_per_node)
            rest = self.rest[0] if self.rest else 0
            roomy = ~whole & (rest > 0) & (free >= max(rest, 1))
            idx = np.asarray(self.members, dtype=np.int64)
            self._room = (whole, roomy, int(whole[idx].sum()), int(roomy[idx].sum()))
        return self._room

    def _freeable(self) -> set[int]:
        """Members of the largest node size whose GPUs are all free once their jobs are off,
        every one of those jobs being an allowed victim."""
        state, cost = self.state, self.cost
        gpn = state.topology.max_gpus_per_node
        out: set[int] = set()
        for n in self.members:
            gpus = int(state.topology.gpus_per_node[n])
            if gpus < gpn or any(j not in cost for j in state.node_jobs[n]):
                continue
            row = [int(v) for v in state.gpu_milli_left[n]]
            for j in state.node_jobs[n]:
                for m, g, held in held_milli(state, j):
                    if m == n:
                        row[g] += held
            if all(v == GPU_MILLI_PER_GPU for v in row[:gpus]):
                out.add(n)
        return out

    def estimate(self) -> Found | None:
        """The cheapest result of the greedy runs (module docstring)."""
        if len(self.eligible) < self.full:
            return None
        best: Found | None = None
        for per_node in (False, True):
            heap = [self._key(n, set(), set(), self.full, per_node)[0] for n in self.eligible]
            heapq.heapify(heap)
            firsts: list[int | None] = [None, *(k[2] for k in heapq.nsmallest(self.lookahead, heap))]
            for first in firsts:
                found = self._run(list(heap), per_node, first)
                if found is not None and (best is None or found[0] < best[0] - TIE):
                    best = found
        return best

    def _key(
        self, n: int, taken: set[int], chosen: set[int], need: int, per_node: bool
    ) -> tuple[tuple[float, int, int], set[int], list[int]]:
        """Node ``n``'s step key (cost per node gained, more nodes first, lower index), the jobs
        the step evicts, and the nodes it leaves wholly free (at most ``need``)."""
        jobs = self.state.node_jobs[n]
        new = {j for j in jobs if j not in taken}
        c = sum(self.cost[j] for j in new)
        freed = [n]
        if per_node and new:
            around = {m for j in new for m in original_nodes(self.state, j)} & self.eligible
            both = taken | new
            freed = sorted(m for m in around - chosen if self.state.node_jobs[m] <= both)
        gain = min(len(freed), need)
        return (c / gain, -gain, n), new, freed[:gain]

    def _run(self, heap: list[tuple[float, int, int]], per_node: bool, first: int | None) -> Found | None:
        milli = Milli(self.state)
        taken: set[int] = set()
        chosen: set[int] = set()
        need = self.full
        forced = first
        while need > 0:
            if forced is not None:
                _, new, freed = self._key(forced, taken, chosen, need, per_node)
                forced = None
            else:
                if not heap:
                    return None
                key = heapq.heappop(heap)
                n = key[2]
                if n in chosen:
                    continue
                now, new, freed = self._key(n, taken, chosen, need, per_node)
                if now != key:
                    heapq.heappush(heap, now)  # stale: its key changed since it was pushed
                    continue
            touched: set[int] = set()
            for j in sorted(new):
                taken.add(j)
                touched.update(milli.take_off(j))
            chosen.update(freed)
            need -= len(freed)
            if need == 0:
                break
            # nodes near the evicted jobs may have become cheaper: push their new keys
            near = {
                m for t in touched for j in self.state.node_jobs[t] for m in original_nodes(self.state, j)
            }
            for m in (near | touched) & self.eligible - chosen:
                heapq.heappush(heap, self._key(m, taken, chosen, need, per_node)[0])
        if self.rest and not self._place_rest(milli, taken, chosen):
            return None
        return self._reprieve(milli, taken)

    def _place_rest(self, milli: Milli, taken: set[int], chosen: set[int]) -> bool:
        """Add to ``taken`` the cheapest victims making room for the remainder pod on a member
        not in ``chosen``; False if none can."""
        g, m = self.rest[0], self.job.gpu_milli
        touched = {n for j in taken for n in original_nodes(self.state, j)} & self.member_set
        best: tuple[float, int, tuple[int, ...]] | None = None
        for n in sorted(touched - chosen):
            found = self.nodes.cheapest(n, g, m, milli, taken)
            if found is not None and (best is None or found[0] < best[0] - TIE):
                best = (found[0], n, found[1])
        if self._base_rest is None:
            base: list[tuple[float, int, tuple[int, ...]]] = []
            fresh = Milli(self.state)
            for n in self.members:
                if int(self.state.topology.gpus_per_node[n]) >= g:
                    found = self.nodes.cheapest(n, g, m, fresh)
                    if found is not None:
                        base.append((found[0], n, found[1]))
            self._base_rest = sorted(base)
        for c, n, victims in self._base_rest:
            if n in chosen or n in touched:
                continue
            if best is None or c < best[0] - TIE:
                best = (c, n, victims)
            break  # sorted: the first usable one is the cheapest untouched node
        if best is None:
            return False
        for j in best[2]:
            taken.add(j)
            milli.take_off(j)
        return True

    def _reprieve(self, milli: Milli, taken: set[int]) -> Found:
        """Put victims back, most expensive first, while the domain still hosts the gang (the
        same victims from another run give the same answer: cached)."""
        key = frozenset(taken)
        if key in self._reprieved:
            return self._reprieved[key]
        hosts = _DomainRoom(self, milli)
        for j in sorted(taken, key=lambda j: (-self.cost[j], j)):
            nodes = milli.take_off(j, -1)
            hosts.update(nodes)
            if hosts.ok():
                taken.discard(j)
            else:
                hosts.update(milli.take_off(j))
        found = float(sum(self.cost[j] for j in taken)), tuple(sorted(taken))
        self._reprieved[key] = found
        return found


class _DomainRoom:
    """Whether a domain can host a gang (full-node pods on wholly free nodes, the remainder on
    another node with room), kept up to date node by node: the flags of the state without
    victims are computed once per domain (:meth:`base`), a run recomputes the nodes it touches."""

    def __init__(self, search: GangSearch, milli: Milli) -> None:
        self.state, self.milli = search.state, milli
        self.full = search.full
        self.rest = search.rest[0] if search.rest else 0
        self.members = search.member_set
        self.base_whole, self.base_roomy, self.n_whole, self.n_roomy = search.room_base()
        self.whole: dict[int, bool] = {}
        self.roomy: dict[int, bool] = {}
        self.update(list(milli.rows))

    def _set(self, n: int) -> None:
        gpus = int(self.state.topology.gpus_per_node[n])
        free = self.milli.free_gpus(n)
        whole = free == gpus and gpus >= self.state.topology.max_gpus_per_node
        roomy = not whole and self.rest > 0 and free >= self.rest
        self.n_whole += int(whole) - int(self.whole.get(n, bool(self.base_whole[n])))
        self.n_roomy += int(roomy) - int(self.roomy.get(n, bool(self.base_roomy[n])))
        self.whole[n], self.roomy[n] = whole, roomy

    def update(self, nodes: list[int]) -> None:
        for n in set(nodes) & self.members:
            self._set(n)

    def ok(self) -> bool:
        if self.n_whole < self.full:
            return False
        return self.rest == 0 or self.n_whole > self.full or self.n_roomy > 0
