"""Domain aggregates of a cluster state (:class:`DomainCounts`): for every topology level and the
root (the whole cluster, see :mod:`gpudefrag.model.domain_index`), the number of wholly free
nodes per domain and the histogram of fully free GPUs per node per domain."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.domain_index import DomainIndex

IntArray = npt.NDArray[np.int64]

__all__ = ["DomainCounts"]


@dataclass(frozen=True, slots=True)
class DomainCounts:
    """Per level index ``li`` in ``0 .. L`` (``L`` = the root, one domain): ``whole[li][d]``
    counts the wholly free nodes (every GPU fully free) of domain ``d``; ``free_hist[li][d, f]``
    counts its nodes with exactly ``f`` fully free GPUs (``f`` in ``0 .. max_gpus_per_node``).
    A node with ``max_gpus_per_node`` free GPUs is wholly free and of the largest size."""

    whole: tuple[IntArray, ...]
    free_hist: tuple[IntArray, ...]

    @staticmethod
    def recount(index: DomainIndex, free_gpus: IntArray, gpus_per_node: IntArray) -> DomainCounts:
        """The counts of ``free_gpus`` from scratch (O(levels x nodes))."""
        cols = int(gpus_per_node.max()) + 1
        whole_node = (free_gpus == gpus_per_node).astype(np.int64)
        whole: list[IntArray] = []
        hist: list[IntArray] = []
        for li, dom in enumerate(index.domain_of):
            nd = index.num_domains[li]
            whole.append(np.bincount(dom, weights=whole_node, minlength=nd).astype(np.int64))
            flat = np.bincount(dom * cols + free_gpus, minlength=nd * cols)
            hist.append(flat.astype(np.int64).reshape(nd, cols))
        return DomainCounts(tuple(whole), tuple(hist))

    def copy(self) -> DomainCounts:
        return DomainCounts(tuple(w.copy() for w in self.whole), tuple(h.copy() for h in self.free_hist))

    def equals(self, other: DomainCounts) -> bool:
        """Same counts everywhere."""
        return all(np.array_equal(a, b) for a, b in zip(self.whole, other.whole)) and all(
            np.array_equal(a, b) for a, b in zip(self.free_hist, other.free_hist)
        )
