"""What a scheduling cycle reads of the nodes, kept per node event instead of found by a pass
over every node per cycle.

Rules:

* **unusable**: the nodes not Ready or cordoned (``spec.unschedulable``);
* **reservations**: the nodes carrying the defragmentation controller's reservation
  annotations (a malformed expiry counts as expired: ``until_s`` 0);
* **excluded per pod terms** (tolerations, node selector, required node affinity): the nodes
  whose taints the terms do not tolerate (:mod:`gpudefrag.k8s.taints`) or whose labels they
  reject (:mod:`gpudefrag.k8s.affinity`).  Found once per distinct terms by looking at every
  node, or only at the tainted ones when the terms select every node, then brought up to date
  with the nodes changed in place since (a log of node indices); at most :data:`MAX_TERMS` terms
  are kept.  A new node layout (:meth:`NodeSets.reset`: nodes added, removed or resized) starts
  everything over, and so does a log grown past :data:`MIN_NODE_LOG` or twice the node count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudefrag.k8s import names
from gpudefrag.k8s.affinity import selects, selects_every_node
from gpudefrag.k8s.nodes import NodeInfo
from gpudefrag.k8s.records import Reservation
from gpudefrag.k8s.taints import tolerates_all
from gpudefrag.k8s.timefmt import from_rfc3339

__all__ = ["MAX_TERMS", "MIN_NODE_LOG", "NodeSets", "terms_key"]

MIN_NODE_LOG = 4096
"""The log of nodes changed in place is dropped (and what was kept per pod terms found again)
once it holds more than this or twice the node count."""

MAX_TERMS = 1024
"""Sets of pod terms whose excluded nodes are kept; past it the one kept longest is dropped."""


def terms_key(pod_spec: Mapping[str, Any]) -> str:
    """The pod's node-selection terms (tolerations, node selector, node affinity) as a key."""
    terms = {
        "t": pod_spec.get("tolerations") or [],
        "s": pod_spec.get("nodeSelector"),
        "a": (pod_spec.get("affinity") or {}).get("nodeAffinity"),
    }
    return json.dumps(terms, sort_keys=True)


@dataclass
class _Excluded:
    """The nodes one set of pod terms rules out (ascending), as of node layout ``layout`` and the
    first ``seen`` entries of the node log."""

    layout: int
    seen: int
    nodes: np.ndarray


class NodeSets:
    """The module docstring's sets over one node layout (``order``: names by index)."""

    def __init__(self) -> None:
        self._layout = 0
        self._excluded: dict[str, _Excluded] = {}
        self.reset([], {})

    def reset(self, order: Sequence[str], nodes: Mapping[str, NodeInfo]) -> None:
        """A new node layout: every set found again from ``nodes`` in ``order``."""
        self._order, self._nodes = order, nodes
        self._index = {n: i for i, n in enumerate(order)}
        self._unusable: set[int] = set()
        self._unusable_array: np.ndarray | None = None
        self._reserved: dict[str, Reservation] = {}
        self._tainted: set[int] = set()
        self._log: list[int] = []
        self._layout += 1
        for name in order:
            self._note(name)

    def changed(self, name: str) -> None:
        """Node ``name`` changed in place (its taints, labels, readiness or annotations)."""
        self._note(name)
        self._log.append(self._index[name])
        if len(self._log) > max(MIN_NODE_LOG, 2 * len(self._order)):  # cheaper to start over
            self._log = []
            self._layout += 1

    def _note(self, name: str) -> None:
        info = self._nodes[name]
        i = self._index[name]
        if (i in self._unusable) != (not (info.ready and info.schedulable)):
            self._unusable ^= {i}
            self._unusable_array = None
        if info.taints:
            self._tainted.add(i)
        else:
            self._tainted.discard(i)
        pod = info.annotations.get(names.RESERVED_FOR)
        if not pod:
            self._reserved.pop(name, None)
            return
        try:
            until = from_rfc3339(info.annotations.get(names.RESERVED_UNTIL, ""))
        except ValueError:
            until = 0.0
        self._reserved[name] = Reservation(name, pod, until, info.annotations.get(names.PLAN, ""))

    # ---- queries ------------------------------------------------------------------------------
    def unusable(self) -> list[int]:
        """Indices of the unusable nodes, ascending."""
        return sorted(self._unusable)

    def unusable_array(self) -> np.ndarray:
        """:meth:`unusable` as an array, the same object until the set changes (read-only)."""
        if self._unusable_array is None:
            self._unusable_array = np.array(sorted(self._unusable), dtype=np.int64)
            self._unusable_array.flags.writeable = False
        return self._unusable_array

    def reservations(self) -> list[Reservation]:
        """Every reservation, expired ones included, in node-name order."""
        return [self._reserved[name] for name in sorted(self._reserved)]

    def _rules_out(self, node: int, pod_spec: Mapping[str, Any]) -> bool:
        info = self._nodes[self._order[node]]
        if info.taints and not tolerates_all(pod_spec.get("tolerations") or [], info.taints):
            return True
        return not selects(pod_spec, info.labels)

    def excluded(self, pod_spec: Mapping[str, Any]) -> np.ndarray:
        """Indices of the nodes a pod of ``pod_spec`` may not use, ascending (module docstring)."""
        key = terms_key(pod_spec)
        entry = self._excluded.get(key)
        if entry is None or entry.layout != self._layout:
            every = range(len(self._order))
            candidates = sorted(self._tainted) if selects_every_node(pod_spec) else every
            bad = np.array([i for i in candidates if self._rules_out(i, pod_spec)], dtype=np.int64)
            if entry is None and len(self._excluded) >= MAX_TERMS:
                del self._excluded[next(iter(self._excluded))]
            entry = self._excluded[key] = _Excluded(self._layout, len(self._log), bad)
        elif entry.seen < len(self._log):
            nodes = entry.nodes
            for i in set(self._log[entry.seen :]):
                at = int(np.searchsorted(nodes, i))
                present = at < nodes.size and nodes[at] == i
                out = self._rules_out(i, pod_spec)
                if out and not present:
                    nodes = np.insert(nodes, at, i)
                elif present and not out:
                    nodes = np.delete(nodes, at)
            entry.nodes, entry.seen = nodes, len(self._log)
        return entry.nodes
