"""FGD's workload preparation (spec §2.3): shuffle, tune to 130 % of GPU capacity, rename nodes.

Draws from Go's ``math/rand`` seeded with the run's seed, in the reference's order:

1. pods sorted by name (typical pods come from this original list);
2. one ``Int63`` (a debug-log argument);
3. ``Shuffle`` of the name-sorted list;
4. tune: while below ``ratio * GPU capacity``, clone the pod at ``Intn(n_original)`` of the
   name-sorted list, stopping (and discarding the clone) when ``total + clone's per-GPU milli``
   would exceed the target; clones are named ``<name>-tuned-<i>`` and appended after the shuffled
   originals.  Above the target: remove the pod at ``Intn(len(list))`` until at or below it;
5. ten ``Float64`` draws (informer start-up);
6. ``Perm(n_nodes)``: node ``i`` in name order gets tie-break rank ``perm[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpudefrag.gorand import GoRand
from gpudefrag.model.pods import PodBatch

DEFAULT_TUNE_RATIO = 1.3
INFORMER_DRAWS = 10


@dataclass(frozen=True)
class PreparedRun:
    """The arrival sequence and the node tie-break ranks of one seeded run."""

    arrivals: PodBatch
    tie_rank: NDArray[np.int64]
    clones: int
    requested_gpu_milli: int


def name_order(names: tuple[str, ...]) -> list[int]:
    """Indices that sort the names ascending (Go's string order = code-point order)."""
    return sorted(range(len(names)), key=names.__getitem__)


def prepare_run(
    pods: PodBatch,
    node_names: tuple[str, ...],
    gpu_capacity_milli: int,
    seed: int,
    tune_ratio: float = DEFAULT_TUNE_RATIO,
) -> PreparedRun:
    """Arrival order and tie-break ranks for ``seed``, as the module docstring states."""
    rng = GoRand(seed)
    rng.int63()
    original = name_order(pods.names)
    order = list(original)
    rng.shuffle_list(order)
    total_gpu = pods.total_gpu_milli
    total = int(total_gpu.sum())
    target = tune_ratio * gpu_capacity_milli
    names = [pods.names[i] for i in order]
    clones = 0
    if total < target:
        n_orig = len(original)
        while True:
            idx = original[rng.intn(n_orig)]
            if total + int(pods.gpu_milli[idx]) > target:
                break
            total += int(total_gpu[idx])
            order.append(idx)
            names.append(f"{pods.names[idx]}-tuned-{clones}")
            clones += 1
    elif total > target:
        while total > target:
            j = rng.intn(len(order))
            total -= int(total_gpu[order[j]])
            del order[j]
            del names[j]
    for _ in range(INFORMER_DRAWS):
        rng.float64()
    perm = rng.perm(len(node_names))
    rank = np.empty(len(node_names), dtype=np.int64)
    for pos, node in enumerate(name_order(node_names)):
        rank[node] = perm[pos]
    return PreparedRun(pods.take(order, names), rank, clones, total)
