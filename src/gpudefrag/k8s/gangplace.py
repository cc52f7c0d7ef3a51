"""All-or-nothing placement of a gang's pods on a :class:`ClusterState`, inside topology domains.

Rule (Kueue TAS semantics, with a per-pod policy doing the placement inside a domain):

* no constraint: the whole cluster is the one domain;
* ``required`` at level L: one domain of L, or nothing;
* ``preferred`` at level L: one domain of L if any can host the gang, else one domain of the
  next level up, ..., else the whole cluster.

At a level, the domains tried are those whose free GPU milli covers the gang's, fewest free
first (best fit, so large free domains stay whole for larger gangs), ties by domain number.
Inside a domain the pods are placed one after another with the policy on a copy of the state
on which every node outside the domain is masked; the first domain where every pod lands wins.
Pods already bound (``pinned_nodes``, after a restart left a gang partly bound) restrict the
domains to the one holding them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.jobs import Constraint
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.topology import NODE_LEVEL, Topology
from gpudefrag.policies.base import Policy

HOSTNAME_LABEL = "kubernetes.io/hostname"


def level_index(topology: Topology | None, level: str) -> int | None:
    """Topology level index of a constraint's level (a node label key); -1 for the node
    itself (``kubernetes.io/hostname`` or ``node``); ``None`` when the topology lacks it."""
    if level in (HOSTNAME_LABEL, NODE_LEVEL):
        return -1
    if topology is None or level not in topology.levels:
        return None
    return topology.levels.index(level)


def candidate_levels(topology: Topology | None, constraint: Constraint | None) -> list[int | None] | None:
    """Levels to try in order (``None`` = the whole cluster).  A level the topology lacks: a
    preferred constraint falls back to the whole cluster, a required one gives ``None`` (the gang
    cannot be placed as asked and waits)."""
    if constraint is None:
        return [None]
    li = level_index(topology, constraint.level)
    if li is None:
        return None if constraint.mode == "required" else [None]
    if constraint.mode == "required":
        return [li]
    top = len(topology.levels) if topology is not None else 0
    return [*range(li, top), None]


def _domains(
    state: ClusterState, topology: Topology | None, level: int | None, need_milli: int, pinned: Sequence[int]
) -> list[np.ndarray]:
    n = state.num_nodes
    if level is None:
        return [np.arange(n, dtype=np.int64)]
    dom = np.arange(n, dtype=np.int64) if level == -1 or topology is None else topology.domains(level)
    free = state.gpu_milli_left.sum(axis=1)
    ids = np.unique(dom[list(pinned)]) if pinned else np.unique(dom)
    if pinned and ids.size != 1:
        return []
    free_by_dom = np.bincount(dom, weights=free, minlength=int(dom.max()) + 1)
    ok = [int(d) for d in ids if free_by_dom[d] >= need_milli]
    ok.sort(key=lambda d: (free_by_dom[d], d))
    return [np.flatnonzero(dom == d) for d in ok]


def place_in_domain(
    state: ClusterState, specs: Sequence[PodSpec], policy: Policy, nodes: np.ndarray
) -> list[Placement] | None:
    """Every pod of ``specs`` placed by ``policy`` on ``nodes`` only, or ``None``."""
    work = state.copy()
    outside = np.setdiff1d(np.arange(state.num_nodes, dtype=np.int64), nodes, assume_unique=True)
    work.mask_many(outside)
    out: list[Placement] = []
    for spec in specs:
        p = policy.select(work, spec)
        if p is None:
            return None
        work.bind(p)
        out.append(p)
    return out


def place_gang(
    state: ClusterState,
    specs: Sequence[PodSpec],
    policy: Policy,
    topology: Topology | None,
    constraint: Constraint | None,
    pinned_nodes: Sequence[int] = (),
) -> list[Placement] | None:
    """Placements for all of ``specs`` (module docstring), or ``None``; ``state`` unchanged."""
    levels = candidate_levels(topology, constraint)
    if levels is None or not specs:
        return None if levels is None else []
    need = sum(s.total_gpu_milli for s in specs)
    for level in levels:
        for dom_nodes in _domains(state, topology, level, need, pinned_nodes):
            placed = place_in_domain(state, specs, policy, dom_nodes)
            if placed is not None:
                return placed
    return None
