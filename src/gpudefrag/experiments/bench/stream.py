"""``gpudefrag bench --gpus N --stream openb``: decision latency on a realistic pod stream.

The cluster and the stream, seeded:

* the workload's node list repeated to at least ``gpus`` GPUs
  (:func:`~gpudefrag.workloads.replicate.replicate_nodes`), and its pods prepared as FGD's
  protocol prepares them for that cluster (:func:`~gpudefrag.workloads.fgd_protocol.prepare_run`:
  shuffled by the seed, tuned to 130 % of the GPU capacity);
* **fill**: the policy places the arrivals in order, its incremental index attached, until
  ``fill`` of the GPU milli is allocated (a pod that fits nowhere is dropped, as in FGD's
  protocol).  Not timed per decision;
* **stream**: the policy's index is dropped and attached afresh, so that every pod shape is cold
  when it first comes (attaching FGD's or BestFit's index builds the trees of the workload's
  requests, CPU and GPU, as a scheduler told what its cluster runs would; timed apart and
  printed), and the next ``decisions`` arrivals are placed one by one, each timed
  around ``select`` and then bound.  A decision is *cold* when its shape (the pod's
  ``fit_key``: CPU, memory, GPU count, GPU milli, model mask) has not been asked before in the
  stream;
* **scan**: the same arrivals on a copy of the filled state without the index (every node
  scored per decision), the yardstick the index must beat.

Reported per mode: p50 / p99 / max per decision (ms), the cold decisions' median and max, the
shapes seen, the index's memory as shapes accumulate, and the peak RSS of the process.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

import numpy as np

from gpudefrag.experiments.bench.scale import warm_up
from gpudefrag.experiments.common.inputs import cluster_from_nodes, workload_inputs
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.pods import PodBatch
from gpudefrag.policies.base import Policy
from gpudefrag.policies.registry import make_policy
from gpudefrag.workloads.fgd_protocol import DEFAULT_TUNE_RATIO, prepare_run
from gpudefrag.workloads.replicate import replicate_nodes

__all__ = ["StreamResult", "bench_stream", "filled_cluster", "format_stream"]

MEMORY_EVERY = 500
"""The index's memory is read after every this many stream decisions."""


@dataclass(frozen=True)
class StreamResult:
    """One (policy, mode)'s stream: latencies (ms), which decisions were cold, the node each
    decision chose (-1: none fits), shapes seen, index MiB after every :data:`MEMORY_EVERY`
    decisions, and how the fill went."""

    policy: str
    mode: str  # "index" or "scan", "k8s index" or "k8s scan" (:mod:`~gpudefrag.k8s.stream_bench`)
    gpus: int
    nodes: int
    fill_pct: float
    fill_s: float
    latency_ms: np.ndarray
    cold: np.ndarray  # bool per decision
    node: np.ndarray  # per decision
    shapes: int
    index_mib: tuple[float, ...]
    max_rss_mib: float  # the process's peak so far (this run and every run before it)
    attach_s: float = 0.0  # attaching the index (trees of the typical GPU requests built)
    trees: tuple[int, int] = (0, 0)  # the index's trees after attaching and at the end

    @property
    def placed(self) -> int:
        return int((self.node >= 0).sum())

    def percentile(self, q: float, cold_only: bool = False) -> float:
        x = self.latency_ms[self.cold] if cold_only else self.latency_ms
        return float(np.percentile(x, q)) if x.size else float("nan")


def filled_cluster(
    workload: str, gpus: int, policy: Policy, seed: int, fill: float
) -> tuple[ClusterState, PodBatch, int, float]:
    """(state, arrivals, first arrival not yet placed, fill seconds): the module docstring's
    cluster filled by ``policy`` (attached, then reset) to ``fill`` of its GPU milli."""
    inputs = workload_inputs(workload)
    nodes = replicate_nodes(inputs.nodes, gpus)
    prepared = prepare_run(inputs.pods, nodes.names, nodes.total_gpus * 1000, seed, DEFAULT_TUNE_RATIO)
    state = cluster_from_nodes(nodes, prepared.tie_rank)
    arrivals = prepared.arrivals
    target = fill * state.gpu_capacity_milli
    started = time.perf_counter()
    policy.attach(state)
    i = 0
    while i < len(arrivals) and state.used_gpu_milli < target:
        placement = policy.select(state, arrivals.pod(i))
        if placement is not None:
            state.bind(placement)
        i += 1
    policy.reset()
    return state, arrivals, i, time.perf_counter() - started


def _index_mib(policy: Policy) -> float:
    nbytes = policy.index_nbytes()
    return nbytes / 2**20 if nbytes is not None else 0.0


@dataclass(frozen=True)
class _Stream:
    latency_ms: np.ndarray
    cold: np.ndarray
    node: np.ndarray
    shapes: int
    index_mib: tuple[float, ...]
    attach_s: float
    trees: tuple[int, int]


def stream_decisions(
    state: ClusterState, arrivals: PodBatch, first: int, decisions: int, policy: Policy, scan: bool
) -> _Stream:
    """Latencies (ms), cold flags, nodes chosen, shapes, index MiB per :data:`MEMORY_EVERY`,
    attach seconds and trees of arrivals ``first .. first + decisions - 1`` on ``state``
    (changed: each placement bound)."""
    attach_s, trees_at_attach = 0.0, 0
    if not scan:
        started = time.perf_counter()
        policy.attach(state)
        attach_s = time.perf_counter() - started
        if policy.index_nbytes() is None:
            raise ValueError(f"policy {policy.name!r} keeps no index: run it with scan=True")
        trees_at_attach = policy.index_trees() or 0
    cold = arrivals.first_of_request(first, decisions)
    n = decisions
    latency = np.empty(n, dtype=np.float64)
    node = np.full(n, -1, dtype=np.int64)
    memory: list[float] = []
    for k in range(n):
        pod = arrivals.pod(first + k)
        t0 = time.perf_counter_ns()
        placement = policy.select(state, pod)
        latency[k] = (time.perf_counter_ns() - t0) / 1e6
        if placement is not None:
            state.bind(placement)
            node[k] = placement.node
        if (k + 1) % MEMORY_EVERY == 0:
            memory.append(_index_mib(policy))
    if n % MEMORY_EVERY:
        memory.append(_index_mib(policy))
    trees = (trees_at_attach, policy.index_trees() or 0)
    policy.reset()
    return _Stream(latency, cold, node, int(cold.sum()), tuple(memory), attach_s, trees)


def bench_stream(
    workload: str,
    gpus: int,
    policy_name: str,
    decisions: int = 2000,
    seed: int = 42,
    fill: float = 0.85,
    modes: tuple[str, ...] = ("index", "scan"),
) -> list[StreamResult]:
    """The module docstring's bench for one policy: one result per mode."""
    inputs = workload_inputs(workload)
    warm_up(policy_name, inputs.typical)
    policy = make_policy(policy_name, inputs.typical, seed)
    policy.expect(inputs.pods.requests())
    state, arrivals, first, fill_s = filled_cluster(workload, gpus, policy, seed, fill)
    fill_pct = 100.0 * state.used_gpu_milli / state.gpu_capacity_milli
    out = []
    for mode in modes:
        work = state.copy() if len(modes) > 1 else state
        chooser = make_policy(policy_name, inputs.typical, seed)
        chooser.expect(inputs.pods.requests())  # the workload's requests: trees built on attach
        run = stream_decisions(work, arrivals, first, decisions, chooser, scan=mode == "scan")
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        total_gpus = int(state.gpu_count.sum())
        out.append(
            StreamResult(
                policy_name,
                mode,
                total_gpus,
                state.num_nodes,
                fill_pct,
                fill_s,
                run.latency_ms,
                run.cold,
                run.node,
                run.shapes,
                run.index_mib,
                rss,
                run.attach_s,
                run.trees,
            )
        )
    return out


def format_stream(results: list[StreamResult]) -> str:
    """The results as a table (ms), then the index memory as shapes accumulate."""
    lines = [
        f"{'policy':<8} {'mode':<9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'cold':>5} {'cold p50':>9} "
        f"{'cold max':>9} {'placed':>7} {'index MiB':>10} {'RSS peak MiB':>13}"
    ]
    for r in results:
        lines.append(
            f"{r.policy:<8} {r.mode:<9} {r.percentile(50):>8.3f} {r.percentile(99):>8.3f} "
            f"{r.latency_ms.max():>8.3f} {int(r.cold.sum()):>5} {r.percentile(50, True):>9.3f} "
            f"{r.latency_ms[r.cold].max() if r.cold.any() else float('nan'):>9.3f} {r.placed:>7} "
            f"{r.index_mib[-1] if r.index_mib else 0.0:>10.1f} {r.max_rss_mib:>13.0f}"
        )
    by_policy: dict[str, dict[str, StreamResult]] = {}
    for r in results:
        by_policy.setdefault(r.policy, {})[r.mode] = r
    for name, modes in by_policy.items():
        for prefix in ("", "k8s "):
            index, scan = modes.get(f"{prefix}index"), modes.get(f"{prefix}scan")
            if index is not None and scan is not None:
                same = int((index.node == scan.node).sum())
                lines.append(
                    f"{name} {prefix}index and {prefix}scan chose the same node for {same:,} of "
                    f"{index.node.size:,} arrivals"
                )
    for r in results:
        if r.mode.endswith("index") and r.index_mib:
            source = "the running pods' requests" if r.mode.startswith("k8s") else "the workload's requests"
            steps = ", ".join(
                f"{min((i + 1) * MEMORY_EVERY, r.latency_ms.size)}: {m:.1f}"
                for i, m in enumerate(r.index_mib)
            )
            lines.append(f"{r.policy} {r.mode} MiB after decisions {steps}")
            lines.append(
                f"{r.policy} {r.mode} attached in {r.attach_s:.2f} s with {r.trees[0]} trees ({source}); "
                f"{r.trees[1]} trees after the stream"
            )
    return "\n".join(lines)
