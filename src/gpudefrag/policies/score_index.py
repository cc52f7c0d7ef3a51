"""An incremental, exact index of per-node scores: one decision costs O(changes x log nodes).

A full-scan policy visits every node per decision.  :class:`ScoreIndex` watches one
:class:`~gpudefrag.model.cluster.ClusterState` (it registers itself with ``state.watch``) and
keeps, per pod shape it has been asked about, a tournament tree of the nodes' scores for that
shape (:mod:`gpudefrag.policies.index_kernel`).  Every node change is appended to a change log;
when a shape is asked for again, only the nodes logged since its last use are rescored, each
with ``log2(nodes)`` tree steps, and the root is the answer.

The rule it keeps: ``best(pod)`` returns exactly the node a full scan of the same policy returns
(highest score, ties to the lowest ``tie_rank``, then the lowest node index), because leaves are
scored by the policy's own kernels and the tree orders equal scores by that tie-break.

FGD and BestFit keep trees per *GPU request* instead (GPU count, milli, model mask) and
*floor* (CPU, memory): the tree of a floor holds, for every node with at least that CPU and memory
left, a bound on the score of any pod with that GPU request asking at least the floor; a pod is
answered from the tree of its GPU request with the highest floor it reaches (CPU first), by a
bounded search that scores a few leaves exactly (:mod:`gpudefrag.policies.bound_kernel`).  The
floors are (0, 0) and the requests the index is warmed with (:meth:`ScoreIndex.warm`: the
typical pods', and any the policy was told to expect), so the trees are bounded by the
workload's requests, and a pod with a new CPU or memory figure costs a search, not a tree over
every node.

Trees are bounded by :data:`TREE_BUDGET_BYTES`.  Other kinds keep a tree per full shape: past
the budget, the shape used least recently loses its tree (rebuilt over every node if it comes
back).  For FGD and BestFit the budget bounds what :meth:`ScoreIndex.warm` builds (requests past
it get no floor tree of their own, so give them most common first); the floor-(0, 0) trees of
new GPU requests are built whatever the budget (GPU requests are few).

The log is bounded: when it fills, entries every shape has consumed are dropped, and a shape
that lags more than one node count behind is marked for a rescan of all nodes on next use
(cheaper than replaying the log), after which the log is compacted again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from gpudefrag import aot
from gpudefrag.frag.typical import TypicalArrays
from gpudefrag.model.cluster import ClusterState, affinity_tag
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.kinds import BOUNDED_KINDS
from gpudefrag.policies.kinds import LEAF_INFEASIBLE as INFEASIBLE

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
_KernelArgs: TypeAlias = tuple[
    IntArray,  # position
    IntArray,  # tree
    IntArray,  # leaf_score
    IntArray,  # leaf_gpu
    IntArray,  # leaf_version
    IntArray,  # cpu_milli_left
    IntArray,  # memory_mib_left
    IntArray,  # gpu_milli_left
    IntArray,  # gpu_count
    IntArray,  # model_id
    IntArray,  # pod_count
    IntArray,  # affinity
    IntArray,  # version
    FloatArray,  # frag
    IntArray,  # frag_version
    int,  # pod cpu_milli
    int,  # pod memory_mib
    int,  # pod num_gpu
    int,  # pod gpu_milli
    int,  # pod gpu_model_mask
    int,  # pod affinity tag
    IntArray,  # typical cpu
    IntArray,  # typical gpu milli
    IntArray,  # typical num gpu
    IntArray,  # typical model mask
    FloatArray,  # typical frequency
]
"""Everything :func:`refresh` and :func:`rebuild` take after their leading arguments."""

__all__ = ["TREE_BUDGET_BYTES", "ScoreIndex"]

TREE_BUDGET_BYTES = 2 << 30
"""Bytes of trees an index keeps (module docstring; at least :data:`MIN_TREES` whatever their
size): about 230 trees at 200,000 nodes."""

MIN_TREES = 16


def _kernels() -> tuple[Callable[..., int], Callable[..., int], Callable[..., int]]:
    """(refresh, rebuild, refresh_best_bounded): ahead-of-time compiled when built
    (:mod:`gpudefrag.aot`), else the JIT kernels of :mod:`~gpudefrag.policies.index_kernel` and
    :mod:`~gpudefrag.policies.bound_kernel` (imported only then)."""
    names = ("index_refresh", "index_rebuild", "index_refresh_best_bounded")
    compiled = tuple(aot.kernel(name) for name in names)
    if all(k is not None for k in compiled):
        return compiled  # type: ignore[return-value]
    from gpudefrag.policies import bound_kernel, index_kernel

    return index_kernel.refresh, index_kernel.rebuild, bound_kernel.refresh_best_bounded


refresh, rebuild, refresh_best_bounded = _kernels()

_NO_TYPICAL: TypicalArrays = (
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.float64),
)


@dataclass
class _ShapeTree:
    """One pod shape's kernel arguments (its tree and leaves, the state's arrays, the pod's
    request; built once, the arrays change in place) and its GPU per node; ``cursor`` is the
    log position consumed so far (-1: rescan every node on next use)."""

    leaf_gpu: IntArray
    args: _KernelArgs
    cursor: int


class ScoreIndex:
    """The module docstring's index for one policy kind on one state.

    ``kind`` is :data:`~gpudefrag.policies.kinds.FGD_KIND` or a baseline kind of
    :mod:`~gpudefrag.policies.kinds`; ``typical`` the FGD typical-pod
    arrays (unused by baselines).
    """

    def __init__(self, state: ClusterState, kind: int, typical: TypicalArrays | None = None) -> None:
        n = state.num_nodes
        self.state = state
        self.kind = kind
        self._tp = typical if typical is not None else _NO_TYPICAL
        self._order = np.lexsort((np.arange(n, dtype=np.int64), state.tie_rank)).astype(np.int64)
        self._position = np.empty(n, dtype=np.int64)
        self._position[self._order] = np.arange(n, dtype=np.int64)
        self._size = 1
        while self._size < n:
            self._size *= 2
        self._frag = np.zeros(n, dtype=np.float64)
        self._frag_version = np.full(n, -1, dtype=np.int64)
        self._shapes: dict[tuple[int, int, int, int, int], _ShapeTree] = {}
        self._log = np.empty(max(1024, 2 * n), dtype=np.int64)
        self._log_len = 0
        self._bounded = int(kind in BOUNDED_KINDS)
        # GPU request -> its floors (CPU milli, memory MiB) that have a tree
        self._floors: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
        # pod fit key -> the tree of the highest floor it reaches (cleared on a new floor)
        self._picks: dict[tuple[int, int, int, int, int], _ShapeTree] = {}
        self._out = np.zeros(3, dtype=np.int64)
        # one tree's bytes: tree (2 x size), leaf scores (size), leaf GPU and version (n each)
        tree_bytes = 8 * (3 * self._size + 2 * n)
        self._max_trees = max(MIN_TREES, TREE_BUDGET_BYTES // max(tree_bytes, 1))
        self.leaves_scored = 0
        """Leaves scored exactly by bounded queries so far (how tight the bounds are)."""
        state.watch(self)

    def close(self) -> None:
        """Stop watching the state (the index is unusable afterwards)."""
        self.state.unwatch(self)
        self._shapes.clear()

    def nbytes(self) -> int:
        """Bytes the index holds: its own arrays and every shape's tree and leaves."""
        own = sum(a.nbytes for a in (self._order, self._position, self._frag, self._frag_version, self._log))
        # args[1:5] are the shape's own arrays: tree, leaf_score, leaf_gpu, leaf_version
        per_shape = sum(sum(a.nbytes for a in shape.args[1:5]) for shape in self._shapes.values())
        return own + per_shape

    # ---- NodeWatcher ------------------------------------------------------------------------
    def node_changed(self, node: int) -> None:
        if self._log_len == self._log.size:
            self._make_room(1)
        self._log[self._log_len] = node
        self._log_len += 1

    def nodes_changed(self, nodes: IntArray) -> None:
        k = int(nodes.size)
        if self._log_len + k > self._log.size:
            self._make_room(k)
        self._log[self._log_len : self._log_len + k] = nodes
        self._log_len += k

    def _make_room(self, k: int) -> None:
        n = self.state.num_nodes
        for shape in self._shapes.values():
            if shape.cursor >= 0 and self._log_len - shape.cursor > n:
                shape.cursor = -1
        live = [s.cursor for s in self._shapes.values() if s.cursor >= 0]
        drop = min(live, default=self._log_len)
        if drop:
            self._log[: self._log_len - drop] = self._log[drop : self._log_len]
            self._log_len -= drop
            for shape in self._shapes.values():
                if shape.cursor >= 0:
                    shape.cursor -= drop
        while self._log_len + k > self._log.size:
            grown = np.empty(2 * self._log.size, dtype=np.int64)
            grown[: self._log_len] = self._log[: self._log_len]
            self._log = grown

    # ---- queries ----------------------------------------------------------------------------
    def _new_shape(self, fit_key: tuple[int, int, int, int, int], tag: int) -> _ShapeTree:
        n, size, st = self.state.num_nodes, self._size, self.state
        tree = np.full(2 * size, -1, dtype=np.int64)
        tree[size : size + n] = np.arange(n, dtype=np.int64)
        leaf_score = np.full(size, INFEASIBLE, dtype=np.int64)
        leaf_gpu = np.full(n, -1, dtype=np.int64)
        args: _KernelArgs = (
            self._position,
            tree,
            leaf_score,
            leaf_gpu,
            np.full(n, -1, dtype=np.int64),
            st.cpu_milli_left,
            st.memory_mib_left,
            st.gpu_milli_left,
            st.gpu_count,
            st.model_id,
            st.pod_count,
            st.affinity,
            st.version,
            self._frag,
            self._frag_version,
            *fit_key,
            tag,
            *self._tp,
        )
        return _ShapeTree(leaf_gpu, args, -1)

    def warm(self, requests: Iterable[tuple[int, ...]]) -> int:
        """Build now the trees of these requests, ``(cpu_milli, memory_mib, num_gpu, gpu_milli,
        mask)`` (a pod's ``fit_key``) or ``(cpu_milli, num_gpu, gpu_milli, mask)`` (memory 0):
        for a bounded kind the tree of each GPU request at floor ``(0, 0)`` and at the request's
        CPU and memory (module docstring); other kinds keep one tree per full shape, built when
        first asked.  Stops at :attr:`max_trees` (module docstring).  Returns the trees built."""
        if not self._bounded:
            return 0
        before = len(self._shapes)
        for req in requests:
            if len(self._shapes) + 2 > self._max_trees:
                break
            cpu, mem, num, milli, mask = req if len(req) == 5 else (req[0], 0, *req[1:])
            for floor in ((0, 0), (cpu, mem)):
                self._floor_tree(floor, (num, milli, mask))
        return len(self._shapes) - before

    def _floor_tree(self, floor: tuple[int, int], request: tuple[int, int, int]) -> _ShapeTree:
        """The bounded tree of a GPU request at floor ``(cpu_milli, memory_mib)`` (built if new,
        brought up to date when it is used)."""
        num, milli, mask = request
        fit_key = (*floor, num, milli, mask)
        shape = self._shapes.get(fit_key)
        if shape is None:
            self._floors.setdefault(request, []).append(floor)
            self._picks.clear()  # a new floor may suit shapes already picked better
            tag = max(affinity_tag(PodSpec(0, 0, num, milli, mask)), 0)
            shape = self._tree(fit_key, tag)[0]
        return shape

    @property
    def max_trees(self) -> int:
        """Trees the index keeps at most (:data:`TREE_BUDGET_BYTES`; module docstring)."""
        return self._max_trees

    @property
    def trees(self) -> int:
        """Trees the index keeps (one per shape, or per GPU request for a bounded kind)."""
        return len(self._shapes)

    def _tree(self, fit_key: tuple[int, int, int, int, int], tag: int) -> tuple[_ShapeTree, int]:
        """The tree of ``fit_key`` brought up to date, and its best position (-1: none)."""
        shape = self._shapes.get(fit_key)
        if shape is None:
            if not self._bounded and len(self._shapes) >= self._max_trees:
                del self._shapes[next(iter(self._shapes))]  # the least recently used
            shape = self._shapes[fit_key] = self._new_shape(fit_key, tag)
        elif not self._bounded:  # most recently used last
            del self._shapes[fit_key]
            self._shapes[fit_key] = shape
        return shape, self._update(shape)

    def _update(self, shape: _ShapeTree) -> int:
        """Bring ``shape``'s tree up to the log's end; its best position (-1: none)."""
        if shape.cursor < 0:
            pos = rebuild(self.kind, self._bounded, *shape.args)
        else:
            pos = refresh(self._log[shape.cursor : self._log_len], self.kind, self._bounded, *shape.args)
        shape.cursor = self._log_len
        return int(pos)

    def best(self, pod: PodSpec) -> tuple[int, int]:
        """(node, sharing-pod GPU or -1) the policy picks for ``pod``; (-1, -1) if none fits."""
        tag = max(affinity_tag(pod), 0)
        if not self._bounded:
            shape, pos = self._tree(pod.fit_key, tag)
            if pos < 0:
                return -1, -1
            node = int(self._order[pos])
            return node, int(shape.leaf_gpu[node])
        shape = self._pick(pod)
        if shape.cursor < 0:
            self._update(shape)  # a rescan of every node
        a = shape.args
        pos = refresh_best_bounded(
            self._log[shape.cursor : self._log_len],
            self._out,
            self.kind,
            self._order,
            *a[:17],
            *pod.fit_key,
            tag,
            *self._tp,
        )
        shape.cursor = self._log_len
        self.leaves_scored += int(self._out[2])
        if pos < 0:
            return -1, -1
        return int(self._order[pos]), int(self._out[1])

    def _pick(self, pod: PodSpec) -> _ShapeTree:
        """The tree of the highest floor of ``pod``'s GPU request that it reaches (a bounded
        kind; module docstring), not yet brought up to date."""
        key = pod.fit_key
        picked = self._picks.get(key)
        if picked is None:
            request = (pod.num_gpu, pod.gpu_milli, pod.gpu_model_mask)
            cpu, mem = pod.cpu_milli, pod.memory_mib
            floors = self._floors.get(request, ())
            floor = max((f for f in floors if f[0] <= cpu and f[1] <= mem), default=(0, 0))
            picked = self._picks[key] = self._floor_tree(floor, request)
        return picked

    def top(self, pod: PodSpec, k: int) -> tuple[IntArray, IntArray]:
        """(nodes, scores) of the ``k`` best nodes for ``pod``, best first, in a full scan's
        order (highest score, ties to the lowest ``tie_rank``, then the lowest node index);
        fewer when fewer fit.  FGD and BestFit only (a bounded kind)."""
        if not self._bounded:
            raise ValueError(f"kind {self.kind} keeps no bounded trees: scan for its top nodes")
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        from gpudefrag.policies.bound_kernel import top_bounded

        shape = self._pick(pod)
        if shape.cursor != self._log_len:
            self._update(shape)
        a = shape.args
        floor_cpu = a[15]
        pos, score, gpu = (np.empty(max(k, 1), dtype=np.int64) for _ in range(3))
        tag = max(affinity_tag(pod), 0)
        count, scored = top_bounded(
            k,
            pos,
            score,
            gpu,
            self.kind,
            floor_cpu,
            self._order,
            a[1],
            a[2],
            *a[5:15],
            *pod.fit_key,
            tag,
            *self._tp,
        )
        self.leaves_scored += int(scored)
        return self._order[pos[:count]], score[:count].copy()
