"""Shared pieces of the suite-2 placement baselines: a per-topology index of the domain tree
(cached, built once per :class:`~gpudefrag.model.topology.Topology`), the shape of a job's
gang, and vectorised "which nodes can host this pod" masks.

Level indices follow :meth:`Topology.domains`: ``-1`` is the node itself, ``0 .. L-1`` the
levels above it bottom-up.  :class:`TopoIndex` adds, per level, the parent of every domain, the
children of every domain, a representative node, the GPU capacity and a lexicographic rank
(the order of the domain's path of indices from the top level down, used where an upstream
scheduler breaks ties by comparing domain names).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Job
from gpudefrag.model.topology import Topology

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "GangShape",
    "TopoIndex",
    "all_in_one_domain",
    "gang_shape",
    "node_capacity_mask",
    "topo_index",
]


@dataclass(frozen=True, slots=True)
class GangShape:
    """A job's pods as the baselines see them: ``sizes`` in :meth:`ClusterState.pods_of` order,
    ``full`` pods of ``full_size`` GPUs (whole nodes) followed by an optional ``rest`` pod
    (``rest == 0``: none).  A lone pod is ``full == 0`` and ``rest`` = its size.  ``milli`` is
    the per-GPU share (1000 for whole GPUs)."""

    sizes: tuple[int, ...]
    full: int
    full_size: int
    rest: int
    milli: int

    @property
    def sharing(self) -> bool:
        return self.milli < GPU_MILLI_PER_GPU

    @property
    def request_gpus(self) -> float:
        """GPUs the whole gang asks for (a fraction for a sharing pod)."""
        if self.sharing:
            return self.milli / GPU_MILLI_PER_GPU
        return float(sum(self.sizes))


def gang_shape(state: ClusterState, job: Job) -> GangShape:
    sizes = tuple(state.pods_of(job))
    gmax = state.topology.max_gpus_per_node
    if len(sizes) == 1:
        return GangShape(sizes, 0, gmax, sizes[0], job.gpu_milli)
    full = sum(1 for s in sizes if s == gmax)
    rest = sizes[-1] if sizes[-1] != gmax else 0
    return GangShape(sizes, full, gmax, rest, job.gpu_milli)


def node_capacity_mask(
    free_gpus: IntArray, free_milli: IntArray, pod_gpus: int, milli: int, nodes: IntArray | None = None
) -> BoolArray:
    """Nodes (all, or ``nodes``) that can host one pod of ``pod_gpus`` whole GPUs, or of a
    ``milli`` share of one GPU when ``milli < 1000``."""
    if milli < GPU_MILLI_PER_GPU:
        fm = free_milli if nodes is None else free_milli[nodes]
        return np.asarray((fm >= milli).any(axis=1))
    fg = free_gpus if nodes is None else free_gpus[nodes]
    return np.asarray(fg >= pod_gpus)


def all_in_one_domain(topology: Topology, level: int, nodes: list[int]) -> bool:
    """Do ``nodes`` all lie in one domain of level index ``level``?"""
    if not nodes:
        return True
    d = topology.domains(level)[np.asarray(nodes, dtype=np.int64)]
    return bool((d == d[0]).all())


class TopoIndex:
    """Per-level arrays of one topology (see the module docstring).  Level ``-1`` (nodes) is
    stored at position 0 of every list, level ``l`` at position ``l + 1``."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        n = topology.num_nodes
        self.num_levels = len(topology.levels)
        self.dom: list[IntArray] = [topology.domains(lv) for lv in range(-1, self.num_levels)]
        self.ndom: list[int] = [int(d.max()) + 1 for d in self.dom]
        self.rep: list[IntArray] = []
        for d, k in zip(self.dom, self.ndom):
            first = np.full(k, n, dtype=np.int64)
            np.minimum.at(first, d, np.arange(n, dtype=np.int64))
            self.rep.append(first)
        # up[p]: parent (at position p + 1) of every domain at position p
        self.up: list[IntArray] = [self.dom[p + 1][self.rep[p]] for p in range(self.num_levels)]
        gpn = topology.gpus_per_node
        self.cap_gpus: list[IntArray] = [
            np.bincount(d, weights=gpn, minlength=k).astype(np.int64) for d, k in zip(self.dom, self.ndom)
        ]
        # children[p][d]: domains at position p - 1 under domain d at position p, ascending
        self.children: list[list[IntArray]] = [[]]
        for p in range(1, self.num_levels + 1):
            parent = self.up[p - 1]
            order = np.argsort(parent, kind="stable").astype(np.int64)
            bounds = np.searchsorted(parent[order], np.arange(self.ndom[p] + 1))
            self.children.append([order[bounds[i] : bounds[i + 1]] for i in range(self.ndom[p])])
        # lexicographic rank of every domain's path (top level first, then down to itself)
        self.lex_rank: list[IntArray] = []
        for p in range(self.num_levels + 1):
            rep = self.rep[p]
            cols = [self.dom[q][rep] for q in range(p, self.num_levels + 1)]
            order = np.lexsort(cols)  # lexsort: last key is primary, i.e. the top level
            rank = np.empty(self.ndom[p], dtype=np.int64)
            rank[order] = np.arange(self.ndom[p], dtype=np.int64)
            self.lex_rank.append(rank)

    def domains(self, level: int) -> IntArray:
        """Domain of every node at level index ``level`` (-1: the node)."""
        return self.dom[level + 1]

    def num_domains(self, level: int) -> int:
        return self.ndom[level + 1]


_CACHE: weakref.WeakKeyDictionary[Topology, TopoIndex] = weakref.WeakKeyDictionary()


def topo_index(topology: Topology) -> TopoIndex:
    """The cached :class:`TopoIndex` of ``topology`` (built on first use)."""
    idx = _CACHE.get(topology)
    if idx is None:
        idx = TopoIndex(topology)
        _CACHE[topology] = idx
    return idx
