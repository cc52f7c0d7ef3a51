"""The state a scheduling cycle decides on, kept up to date by the nodes that changed.

Rule: after :meth:`DecisionView.sync` with a set of masked nodes, :attr:`DecisionView.state`
equals the cache's state with those nodes masked (:meth:`ClusterState.mask`: nothing left, pod
limit reached), node for node, in everything a policy reads.  Only the nodes that changed since
the last sync are copied or masked: the ones the cache's state changed (it is watched), the
ones a cycle changed on the view itself (its binds, undone at the next sync unless the cache
assumed them), and the ones whose mask flipped.  So the view is one long-lived object that a
policy's incremental index stays attached to
(:class:`~gpudefrag.policies.score_index.ScoreIndex`), and a cycle costs what changed, not a
copy of every node.

The view is for deciding: its used-GPU total and ``epoch`` mean nothing (as on any masked
copy); read the cache's state for accounting.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.cluster import ClusterState

__all__ = ["DecisionView"]

IntArray = NDArray[np.int64]


class DecisionView:
    """The module docstring's view of ``source`` (built as a copy of it; ``source`` is watched)."""

    def __init__(self, source: ClusterState) -> None:
        self.source = source
        self.state = source.copy()
        self._changed: set[int] = set()
        self._masked = np.zeros(0, dtype=np.int64)
        source.watch(self)
        self.state.watch(self)

    def close(self) -> None:
        """Stop watching (the view is not kept up to date afterwards)."""
        self.source.unwatch(self)
        self.state.unwatch(self)

    # ---- NodeWatcher, for both states ---------------------------------------------------------
    def node_changed(self, node: int) -> None:
        self._changed.add(node)

    def nodes_changed(self, nodes: IntArray) -> None:
        self._changed.update(nodes.tolist())

    # ---- the rule -----------------------------------------------------------------------------
    def sync(self, masked: IntArray) -> ClusterState:
        """The view, made the source with ``masked`` (node indices) masked (module docstring).
        Cheapest when ``masked`` is the same array object as at the last sync (then it must not
        have been changed in place)."""
        changed = np.fromiter(self._changed, dtype=np.int64, count=len(self._changed))
        if masked is self._masked:  # only the changed nodes to look at
            todo = np.unique(changed)
        else:
            given = np.asarray(masked, dtype=np.int64)
            ascending = given.size < 2 or bool((np.diff(given) > 0).all())
            masked = given if ascending else np.unique(given)  # kept as given when it can be
            todo = np.union1d(changed, np.setxor1d(masked, self._masked, assume_unique=True))
        at = np.minimum(np.searchsorted(masked, todo), max(masked.size - 1, 0))
        hide = masked[at] == todo if masked.size else np.zeros(todo.size, dtype=bool)
        self.state.take_rows(self.source, todo)  # masked ones too: a mask keeps the affinity
        self.state.mask_many(todo[hide])
        self._masked = masked
        self._changed.clear()  # including what take_rows and mask_many just reported
        return self.state
