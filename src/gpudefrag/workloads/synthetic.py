"""Synthetic open-loop workloads for the time-driven simulator (issue 4).

* :func:`sample_cluster` draws a smaller cluster from a node list, stratified by
  (GPU model, GPU count) so the mix of node shapes is kept.
* :func:`durations_from_table` reads pod run times from the trace's creation/deletion times.
* :func:`make_workload` resamples (pod, duration) pairs from the trace and lets them arrive as
  a Poisson process whose rate gives a chosen *offered load*:

      lambda = offered_load * cluster_gpu_milli / E[gpu_milli_total * duration]

  with the expectation over the resampling distribution (the mean over the eligible trace pods
  of the product, durations already clipped).  Offered load 1.0 therefore asks, per second,
  for as much GPU time as the cluster has GPUs.

Every random draw comes from the one ``numpy.random.Generator`` passed in, in a fixed order,
so a workload is a pure function of its inputs and the generator's seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.pods import PodBatch
from gpudefrag.workloads.openb import NodeTable, PodTable

DEFAULT_CHECKPOINT_INTERVALS_S: tuple[float, ...] = (600.0, 1800.0, 3600.0)


# ------------------------------------------------------------------------------------- cluster
def _largest_remainder(sizes: NDArray[np.int64], total: int) -> NDArray[np.int64]:
    """``total`` split proportionally to ``sizes``; leftover units go to the largest fractional
    remainders (ties: the earlier group)."""
    quota = sizes * total / sizes.sum()
    alloc: NDArray[np.int64] = np.floor(quota).astype(np.int64)
    left = total - int(alloc.sum())
    order = np.lexsort((np.arange(len(sizes)), -(quota - alloc)))
    alloc[order[:left]] += 1
    return alloc


def sample_cluster(nodes: NodeTable, n_nodes: int, rng: np.random.Generator) -> NodeTable:
    """``n_nodes`` nodes drawn without replacement, stratified by (model, gpu_count).

    Groups (in order of first appearance in the table) get a proportional share, rounded by
    largest remainder; when ``n_nodes`` is at least the number of groups, every group gets at
    least one node (taken from the group with the largest share).  The sample keeps the
    table's row order.
    """
    total = len(nodes)
    if not 0 < n_nodes <= total:
        raise ValueError(f"n_nodes must be within 1..{total}, got {n_nodes}")
    keys = list(zip(nodes.models, nodes.gpu_count.tolist()))
    groups: dict[tuple[str, int], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    members = list(groups.values())
    sizes = np.array([len(m) for m in members], dtype=np.int64)
    alloc = _largest_remainder(sizes, n_nodes)
    if n_nodes >= len(members):
        for g in np.flatnonzero(alloc == 0):
            donor = int(np.lexsort((np.arange(len(alloc)), -alloc))[0])
            alloc[donor] -= 1
            alloc[g] = 1
    chosen: list[int] = []
    for idx, k in zip(members, alloc):
        if k:
            picked = rng.choice(len(idx), size=int(k), replace=False)
            chosen.extend(idx[j] for j in picked)
    keep = np.array(sorted(chosen), dtype=np.int64)
    return NodeTable(
        tuple(nodes.names[i] for i in keep),
        nodes.cpu_milli[keep],
        nodes.memory_mib[keep],
        nodes.gpu_count[keep],
        tuple(nodes.models[i] for i in keep),
        source_path=nodes.source_path,
    )


# ------------------------------------------------------------------------------------- durations
def durations_from_table(table: PodTable) -> NDArray[np.float64]:
    """Run time per pod in seconds (``deletion_time - creation_time``, float64).

    Pods whose times are missing (-1), negative or not increasing get the median of the valid
    durations; a table without any valid duration is an error.
    """
    created = np.asarray(table.creation_time, dtype=np.int64)
    deleted = np.asarray(table.deletion_time, dtype=np.int64)
    valid = (created >= 0) & (deleted >= 0) & (deleted > created)
    if not valid.any():
        raise ValueError("no pod has valid creation and deletion times")
    out = (deleted - created).astype(np.float64)
    out[~valid] = float(np.median(out[valid]))
    return out


# ------------------------------------------------------------------------------------- workload
@dataclass(frozen=True)
class SyntheticWorkload:
    """Arrivals (in time order) with everything the simulator needs per pod.

    ``pods[i]`` arrives at ``arrival_s[i]`` and needs ``duration_s[i]`` seconds of running time.
    It checkpoints at work progress ``checkpoint_phase_s[i] + k * checkpoint_interval_s[i]``;
    ``do_not_disrupt[i]`` forbids migrating it; higher ``priority`` is scheduled first.  Metrics
    are taken over ``[warmup_s, horizon_s]``.  ``source_index[i]`` is the trace row resampled.
    """

    pods: PodBatch
    arrival_s: NDArray[np.float64]
    duration_s: NDArray[np.float64]
    checkpoint_interval_s: NDArray[np.float64]
    checkpoint_phase_s: NDArray[np.float64]
    do_not_disrupt: NDArray[np.bool_]
    priority: NDArray[np.int64]
    warmup_s: float
    horizon_s: float
    offered_load: float
    arrival_rate_per_s: float = 0.0
    source_index: NDArray[np.int64] | None = None

    def __len__(self) -> int:
        return len(self.pods)

    def __post_init__(self) -> None:
        n = len(self.pods)
        for name in (
            "arrival_s",
            "duration_s",
            "checkpoint_interval_s",
            "checkpoint_phase_s",
            "do_not_disrupt",
            "priority",
        ):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, expected {n}")
        if n and np.any(np.diff(self.arrival_s) < 0):
            raise ValueError("arrival_s must be non-decreasing")
        if len(set(self.pods.names)) != n:
            raise ValueError("pod names must be unique")


def _poisson_times(rate: float, horizon_s: float, rng: np.random.Generator) -> NDArray[np.float64]:
    """Arrival times of a Poisson process of ``rate`` per second on ``[0, horizon_s)``."""
    if rate <= 0 or horizon_s <= 0:
        return np.zeros(0, dtype=np.float64)
    chunks: list[NDArray[np.float64]] = []
    t = 0.0
    expected = rate * horizon_s
    while True:
        n = int(expected + 6 * np.sqrt(expected) + 16)
        times = t + np.cumsum(rng.exponential(1.0 / rate, size=n))
        chunks.append(times[times < horizon_s])
        if times[-1] >= horizon_s:
            break
        t = float(times[-1])
    return np.concatenate(chunks)


def make_workload(
    pods: PodBatch,
    durations_s: NDArray[np.float64],
    cluster_gpu_milli: int,
    offered_load: float,
    horizon_s: float,
    rng: np.random.Generator,
    *,
    duration_cap_s: float = 4 * 3600.0,
    min_duration_s: float = 60.0,
    warmup_fraction: float = 0.25,
    include_cpu_pods: bool = False,
    checkpoint_intervals_s: tuple[float, ...] = DEFAULT_CHECKPOINT_INTERVALS_S,
    do_not_disrupt_fraction: float = 0.05,
    priority_choices: tuple[int, ...] = (0,),
) -> SyntheticWorkload:
    """Resampled trace pods arriving as a Poisson process at ``offered_load`` (module docstring).

    Draw order: arrival times, trace rows, checkpoint intervals, phases, do-not-disrupt flags,
    priorities (uniform over ``priority_choices``).
    """
    durations = np.asarray(durations_s, dtype=np.float64)
    if len(durations) != len(pods):
        raise ValueError(f"{len(durations)} durations for {len(pods)} pods")
    if offered_load < 0 or horizon_s <= 0 or cluster_gpu_milli <= 0:
        raise ValueError("offered_load must be >= 0, horizon_s and cluster_gpu_milli > 0")
    if not 0.0 <= warmup_fraction < 1.0:
        raise ValueError("warmup_fraction must be in [0, 1)")
    eligible = np.arange(len(pods)) if include_cpu_pods else np.flatnonzero(pods.total_gpu_milli > 0)
    if eligible.size == 0:
        raise ValueError("no eligible pod to resample (the trace has no GPU pod)")
    clipped = np.clip(durations[eligible], min_duration_s, duration_cap_s)
    demand = float(np.mean(pods.total_gpu_milli[eligible] * clipped))  # milli-GPU seconds per pod
    rate = offered_load * cluster_gpu_milli / demand if demand > 0 else 0.0
    arrival = _poisson_times(rate, horizon_s, rng)
    n = len(arrival)
    pick = rng.integers(0, eligible.size, size=n)
    source = eligible[pick]
    intervals = np.asarray(checkpoint_intervals_s, dtype=np.float64)
    interval = intervals[rng.integers(0, len(intervals), size=n)]
    phase = rng.uniform(0.0, 1.0, size=n) * interval
    dnd = rng.random(n) < do_not_disrupt_fraction
    prios = np.asarray(priority_choices, dtype=np.int64)
    priority = prios[rng.integers(0, len(prios), size=n)] if len(prios) > 1 else np.full(n, prios[0])
    names = [f"{pods.names[j]}-s{i}" for i, j in enumerate(source)]
    return SyntheticWorkload(
        pods=pods.take(source, names),
        arrival_s=arrival,
        duration_s=clipped[pick],
        checkpoint_interval_s=interval,
        checkpoint_phase_s=phase,
        do_not_disrupt=dnd,
        priority=priority.astype(np.int64),
        warmup_s=warmup_fraction * horizon_s,
        horizon_s=float(horizon_s),
        offered_load=float(offered_load),
        arrival_rate_per_s=rate,
        source_index=source,
    )
