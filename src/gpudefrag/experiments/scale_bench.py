"""``gpudefrag bench --gpus N``: single-pod decision latency on a large, fragmented cluster.

The cluster (:func:`large_cluster`): a suite 2 topology preset (``superpod``: 8 GPUs per node,
``nvl72``: 4) sized to ``gpus`` GPUs, every node with 16 CPU cores and 128 GiB of memory per GPU,
filled to ``fill`` of its GPUs by pods drawn (seeded) from the openb pod mix (GPU pods only, model
constraints dropped, CPU and memory as in the trace), each put on the first node that fits out of
random tries and on its lowest free GPUs: a fragmented starting occupancy, not an empty cluster.
The same seed gives the same cluster.

The measurement (:func:`bench_scale`): ``decisions`` placements per pod shape (a half GPU, 1, 2
and 8 whole GPUs), each timed around the policy's ``select`` and then bound, so the state keeps
changing as in a scheduler.  Today's policies scan every node per decision; this is the baseline
an indexed decision must beat.
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


def _gpus_for(state: ClusterState, node: int, pod: PodSpec) -> tuple[int, ...] | None:
    free = np.flatnonzero(state.gpu_milli_left[node, : state.gpu_count[node]] >= pod.gpu_milli)
    if free.size < pod.num_gpu:
        return None
    gpus = tuple(int(g) for g in free[: pod.num_gpu])
    return gpus if state.why_not_fits(node, pod, gpus) is None else None


def large_cluster(gpus: int, preset: str, pods: PodBatch, seed: int, fill: float = 0.6) -> ClusterState:
    """The module docstring's cluster."""
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
    gpu_rows = np.flatnonzero(pods.gpu_milli > 0)
    target = fill * state.gpu_capacity_milli
    while state.used_gpu_milli < target:
        for row in rng.choice(gpu_rows, size=4096):
            pod = PodSpec(
                int(pods.cpu_milli[row]),
                int(pods.memory_mib[row]),
                int(pods.num_gpu[row]),
                int(pods.gpu_milli[row]),
                ANY_GPU_MODEL,
            )
            for node in rng.integers(0, nodes, size=TRIES):
                g = _gpus_for(state, int(node), pod)
                if g is not None:
                    state.bind(Placement(int(node), g, pod))
                    break
            if state.used_gpu_milli >= target:
                break
    return state


@dataclass(frozen=True)
class ScaleResult:
    gpus: int
    nodes: int
    build_s: float
    latency_ms: dict[str, np.ndarray]
    max_rss_mib: float


def bench_scale(
    gpus: int, preset: str, pods: PodBatch, typical: TypicalPods, policy: str, decisions: int, seed: int = 42
) -> ScaleResult:
    """Build the cluster, then time ``decisions`` placements per shape (module docstring)."""
    started = time.perf_counter()
    state = large_cluster(gpus, preset, pods, seed)
    build_s = time.perf_counter() - started
    chooser = make_policy(policy, typical, seed)
    chooser.select(state, SHAPES["1 GPU"])  # load the kernels and fill the per-node caches
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
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return ScaleResult(int(state.gpu_count.sum()), state.num_nodes, build_s, latency, rss_mib)
