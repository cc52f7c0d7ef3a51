"""Member and child lists of a topology's domains, built once per :class:`Topology` and cached.

Level indices follow :class:`Topology` (``0 .. L-1`` are the named levels, bottom-up) plus the
**root** ``L``: one domain (0) holding every node, the "whole cluster" a placement without a
domain limit sees.  For each level the index keeps, in CSR form (an offsets array and one flat
array):

* the member nodes of every domain, ascending (``members(li, d)``);
* for ``li >= 1``, the child domains of level ``li - 1`` inside every domain, ascending
  (``children(li, d)``); the root's children are the domains of level ``L - 1`` (for a topology
  without levels, the root has no child domains: its members are the nodes);
* for every pair of levels ``lo < up``, each domain of ``lo``'s domain at ``up``
  (``ancestor(lo, up)``);

and the topology's largest node size (``max_gpus_per_node``, which the topology computes on
every call).

:func:`domain_index` builds an index on first use and keeps it while the topology lives (a
weak-keyed cache: :class:`Topology` is frozen and compared by identity).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]

__all__ = ["DomainIndex", "domain_index"]


def _csr(keys: IntArray, n_keys: int) -> tuple[IntArray, IntArray]:
    """Offsets and items grouping ``0 .. keys.size-1`` by ``keys`` (items ascending per key)."""
    order = np.argsort(keys, kind="stable").astype(np.int64)
    start = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=start[1:])
    return start, order


@dataclass(frozen=True, eq=False)
class DomainIndex:
    """See the module docstring.  ``domain_of[li][node]`` for ``li`` in ``0 .. L`` (the root
    maps every node to 0); ``parent[li][d]`` is domain ``d`` of level ``li``'s domain at
    ``li + 1`` (``li`` in ``0 .. L-1``)."""

    root: int
    max_gpus_per_node: int
    domain_of: tuple[IntArray, ...]
    num_domains: tuple[int, ...]
    parent: tuple[IntArray, ...]
    member_start: tuple[IntArray, ...]
    member_nodes: tuple[IntArray, ...]
    child_start: tuple[IntArray, ...]
    child_ids: tuple[IntArray, ...]
    ancestors: dict[tuple[int, int], IntArray]

    @staticmethod
    def build(topology: Topology) -> DomainIndex:
        """The index of ``topology`` (O(levels x nodes) time and memory)."""
        n = topology.num_nodes
        root = len(topology.levels)
        maps = (*topology.domain_of, np.zeros(n, dtype=np.int64))
        counts = tuple(int(m.max()) + 1 for m in maps)
        parent: list[IntArray] = []
        for li in range(root):
            above = np.zeros(counts[li], dtype=np.int64)
            above[maps[li]] = maps[li + 1]
            parent.append(above)
        members = [_csr(maps[li], counts[li]) for li in range(root + 1)]
        empty = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        children = [empty] + [_csr(parent[li - 1], counts[li]) for li in range(1, root + 1)]
        ancestors: dict[tuple[int, int], IntArray] = {}
        for lo in range(root):
            cur = np.arange(counts[lo], dtype=np.int64)
            for up in range(lo + 1, root + 1):
                cur = parent[up - 1][cur]
                ancestors[(lo, up)] = cur
        return DomainIndex(
            root,
            topology.max_gpus_per_node,
            maps,
            counts,
            tuple(parent),
            tuple(m[0] for m in members),
            tuple(m[1] for m in members),
            tuple(c[0] for c in children),
            tuple(c[1] for c in children),
            ancestors,
        )

    @functools.cached_property
    def member_counts(self) -> tuple[IntArray, ...]:
        """Nodes per domain, for every level index ``0 .. root``."""
        return tuple(np.diff(start) for start in self.member_start)

    def members(self, level: int, domain: int) -> IntArray:
        """Nodes of ``domain`` at level index ``level`` (``root`` for the whole cluster), ascending."""
        start = self.member_start[level]
        return self.member_nodes[level][start[domain] : start[domain + 1]]

    def children(self, level: int, domain: int) -> IntArray:
        """Domains of level ``level - 1`` inside ``domain`` of ``level`` (``level >= 1``), ascending."""
        start = self.child_start[level]
        return self.child_ids[level][start[domain] : start[domain + 1]]

    def ancestor(self, level: int, upper: int) -> IntArray:
        """For each domain of ``level``, its domain at ``upper`` (``level < upper <= root``)."""
        return self.ancestors[(level, upper)]


_CACHE: weakref.WeakKeyDictionary[Topology, DomainIndex] = weakref.WeakKeyDictionary()


def domain_index(topology: Topology) -> DomainIndex:
    """The cached :class:`DomainIndex` of ``topology`` (built on first use)."""
    found = _CACHE.get(topology)
    if found is None:
        found = DomainIndex.build(topology)
        _CACHE[topology] = found
    return found
