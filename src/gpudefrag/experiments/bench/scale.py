"""``gpudefrag bench --gpus N``: single-pod decision latency on a large, fragmented cluster.

The cluster (:func:`large_cluster`): a suite 2 topology preset (``superpod``: 8 GPUs per node,
``nvl72``: 4) sized to ``gpus`` GPUs, every node with 16 CPU cores and 128 GiB of memory per GPU,
filled to ``fill`` of its GPUs, seeded:

* ``1 - openb_share`` of the filled GPUs by ITP cluster04 jobs, each drawn with probability
  proportional to its duration (a job is running at a random instant with a probability
  proportional to how long it runs, so the GPUs of each job size then come out in proportion to
  the GPU time that size carries), split
  into pods of at most one node's GPUs (:func:`~gpudefrag.model.jobs.pod_sizes`), each pod asking
  8 CPU cores and 64 GiB per GPU; a job is placed whole or not at all;
* the rest by pods drawn uniformly from the openb pod mix (GPU pods only, model constraints
  dropped, CPU and memory as in the trace).

Every pod goes on the first of up to ``TRIES`` random nodes that fits, on its lowest free GPUs:
a fragmented starting occupancy, not an empty cluster.  The same seed gives the same cluster.

The measurement (:func:`bench_scale`): the policy is attached to the state (its incremental
index, :mod:`gpudefrag.policies.score_index`, is built then and by one query per pod shape: the
*index build* time) unless ``scan`` asks for the full scan of every node per decision; then
``decisions`` placements per pod shape (a half GPU, 1, 2 and 8 whole GPUs), each timed around the
policy's ``select`` and bound, so the state keeps changing as in a scheduler.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

import numpy as np

from gpudefrag.frag.typical import TypicalPods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import ANY_GPU_MODEL, GPU_MILLI_PER_GPU
from gpudefrag.model.gpu_models import model_id
from gpudefrag.model.jobs import Job, pod_sizes
from gpudefrag.model.pods import PodBatch, PodSpec
from gpudefrag.model.topology import PRESETS
from gpudefrag.policies.registry import make_policy

SHAPES: dict[str, PodSpec] = {
    "0.5 GPU": PodSpec(4000, 16_384, 1, 500),
    "1 GPU": PodSpec(8000, 32_768, 1, GPU_MILLI_PER_GPU),
    "2 GPUs": PodSpec(16_000, 65_536, 2, GPU_MILLI_PER_GPU),
    "8 GPUs": PodSpec(64_000, 262_144, 8, GPU_MILLI_PER_GPU),
}
TRIES = 16
"""Random nodes tried per filling pod before it is dropped."""
ITP_CPU_MILLI_PER_GPU = 8_000
ITP_MEMORY_MIB_PER_GPU = 65_536


def _gpus_for(state: ClusterState, node: int, pod: PodSpec) -> tuple[int, ...] | None:
    free = np.flatnonzero(state.gpu_milli_left[node, : state.gpu_count[node]] >= pod.gpu_milli)
    if free.size < pod.num_gpu:
        return None
    gpus = tuple(int(g) for g in free[: pod.num_gpu])
    return gpus if state.why_not_fits(node, pod, gpus) is None else None


def _place_pod(state: ClusterState, pod: PodSpec, rng: np.random.Generator) -> Placement | None:
    for node in rng.integers(0, state.num_nodes, size=TRIES):
        g = _gpus_for(state, int(node), pod)
        if g is not None:
            placement = Placement(int(node), g, pod)
            state.bind(placement)
            return placement
    return None


def _place_job(state: ClusterState, gpus: int, gpn: int, rng: np.random.Generator) -> None:
    """Bind every pod of an ITP job of ``gpus`` GPUs, or none."""
    done: list[Placement] = []
    for size in pod_sizes(gpus, gpn):
        pod = PodSpec(size * ITP_CPU_MILLI_PER_GPU, size * ITP_MEMORY_MIB_PER_GPU, size, GPU_MILLI_PER_GPU)
        placed = _place_pod(state, pod, rng)
        if placed is None:
            for p in done:
                state.unbind(p)
            return
        done.append(placed)


def large_cluster(
    gpus: int,
    preset: str,
    pods: PodBatch,
    seed: int,
    fill: float = 0.6,
    itp_jobs: list[Job] | None = None,
    openb_share: float = 0.2,
) -> ClusterState:
    """The module docstring's cluster (openb pods only when ``itp_jobs`` is None)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown topology preset {preset!r}; known: {', '.join(PRESETS)}")
    gpn = 8 if preset == "superpod" else 4
    nodes = max(1, gpus // gpn)
    topo = PRESETS[preset](nodes)
    count = topo.gpus_per_node
    state = ClusterState(
        topo.node_names,
        np.full(nodes, model_id("V100M16"), dtype=np.int64),
        count,
        count * 16_000,
        count * 131_072,
    )
    rng = np.random.default_rng(seed)
    target = fill * state.gpu_capacity_milli
    if itp_jobs:
        sizes = np.array([j.gpus for j in itp_jobs], dtype=np.int64)
        weight = np.array([j.duration_s for j in itp_jobs], dtype=np.float64)
        itp_target = (1.0 - openb_share) * target
        while state.used_gpu_milli < itp_target:
            for size in rng.choice(sizes, size=1024, p=weight / weight.sum()):
                _place_job(state, int(size), gpn, rng)
                if state.used_gpu_milli >= itp_target:
                    break
    gpu_rows = np.flatnonzero(pods.gpu_milli > 0)
    while state.used_gpu_milli < target:
        for row in rng.choice(gpu_rows, size=4096):
            pod = PodSpec(
                int(pods.cpu_milli[row]),
                int(pods.memory_mib[row]),
                int(pods.num_gpu[row]),
                int(pods.gpu_milli[row]),
                ANY_GPU_MODEL,
            )
            _place_pod(state, pod, rng)
            if state.used_gpu_milli >= target:
                break
    return state


@dataclass(frozen=True)
class ScaleResult:
    """One policy's figures: cluster size, build times, per-shape latencies (ms), peak RSS."""

    gpus: int
    nodes: int
    build_s: float
    index_build_s: float
    latency_ms: dict[str, np.ndarray]
    max_rss_mib: float


def warm_up(policy: str, typical: TypicalPods) -> None:
    """Load the policy's compiled kernels (scan and index) on a two-node state, so that the
    index build time does not include loading them from numba's cache."""
    tiny = ClusterState(
        ("a", "b"), np.zeros(2, dtype=np.int64), np.full(2, 8), np.full(2, 64_000), np.full(2, 1 << 20)
    )
    warm = make_policy(policy, typical)
    warm.select(tiny, SHAPES["1 GPU"])
    warm.attach(tiny)
    warm.select(tiny, SHAPES["1 GPU"])
    warm.reset()


def time_decisions(
    state: ClusterState, typical: TypicalPods, policy: str, decisions: int, seed: int = 42, scan: bool = False
) -> tuple[float, dict[str, np.ndarray]]:
    """(index build s, per-shape latencies in ms) of ``policy`` on ``state`` (changed: every
    decision is bound), as the module docstring describes."""
    warm_up(policy, typical)
    chooser = make_policy(policy, typical, seed)
    started = time.perf_counter()
    if not scan:
        chooser.attach(state)
        for spec in SHAPES.values():
            chooser.select(state, spec)
    index_build_s = time.perf_counter() - started
    latency: dict[str, np.ndarray] = {}
    for name, spec in SHAPES.items():
        times = np.empty(decisions, dtype=np.float64)
        for i in range(decisions):
            t0 = time.perf_counter_ns()
            p = chooser.select(state, spec)
            times[i] = (time.perf_counter_ns() - t0) / 1e6
            if p is not None:
                state.bind(p)
        latency[name] = times
    chooser.reset()
    return index_build_s, latency


def bench_scale(
    gpus: int,
    preset: str,
    pods: PodBatch,
    typical: TypicalPods,
    policy: str,
    decisions: int,
    seed: int = 42,
    itp_jobs: list[Job] | None = None,
    scan: bool = False,
) -> ScaleResult:
    """Build the cluster, then time ``decisions`` placements per shape (module docstring)."""
    started = time.perf_counter()
    state = large_cluster(gpus, preset, pods, seed, itp_jobs=itp_jobs)
    build_s = time.perf_counter() - started
    index_build_s, latency = time_decisions(state, typical, policy, decisions, seed, scan)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return ScaleResult(int(state.gpu_count.sum()), state.num_nodes, build_s, index_build_s, latency, rss_mib)
