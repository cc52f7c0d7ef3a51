"""``gpudefrag bench --gpus N --stream openb --k8s``: the same stream through the Kubernetes
scheduler's decision path, without an API server.

The cluster and the stream are those of the policy-alone stream bench
(``experiments/bench/stream.py``, which formats these runs too), handed to the scheduler's cache (:class:`~gpudefrag.k8s.cache.ClusterCache`) as the driver would see them:

* **nodes**: one v1 Node object per node (allocatable CPU, memory and ``nvidia.com/gpu``, the
  GPU model label), read by ``replace_nodes`` as after a relist; one node in
  :data:`CORDONED_EVERY` is cordoned, with the ``node.kubernetes.io/unschedulable`` taint the
  node controller adds (its pods keep running; no new pod goes there).  The cache orders nodes by
  name, so ties go to the lowest name (the driver's rule), not to the simulator's random rank;
* **fill**: the policy places the arrivals on the cache's state until ``fill`` of the GPU milli
  is allocated, counted into the state directly as the cache counts bound pods, without pod
  objects (about a million objects would take minutes to read, and the cycle never reads a
  bound pod's object).  Not timed;
* **attach**: one cycle with no pending pod syncs the cache's decision view and attaches the
  policy's index to it (the trees of the typical pods' and the expected requests; timed apart
  and printed);
* **stream**: each further arrival becomes a pending Pod object (openb's annotations) and one
  decision is timed from the pod's watch event to its assumption: ``apply_pod``, the pending
  queue, the cycle (:func:`~gpudefrag.k8s.decide.decide_cycle`: view sync, policy, binds) and
  ``assume``.  Not timed: the bind's confirmation (the pod seen bound, applied to the cache), as
  it comes back from the API server after the decision;
* **scan**: the same on a second cache holding the same fill (its placements bound again), with
  the policy's index never attached (every node scored per decision).

The decision core is :class:`~gpudefrag.k8s.policy.DecisionCore` with the workload's typical
pods fixed (the workload's, passed in).  Its observation of the cache's pods is not run (with the fill's pods counted it
would next run at twice their number); what it would tell the policy, the requests of the pods
the cache holds, most common first (:meth:`~gpudefrag.k8s.policy.DecisionCore.expect_requests`),
is told from the fill's placements, so the attach builds their trees (up to the index's budget);
a stream shape no fill pod has is cold.

Results are :class:`K8sStreamRun`, field for field the policy-alone bench's result; the mode is
``k8s index`` or ``k8s scan``.
"""

from __future__ import annotations

import gc
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gpudefrag.frag.typical import TypicalPods
from gpudefrag.k8s import names
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.decide import decide_cycle
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.timefmt import to_rfc3339
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import ANY_GPU_MODEL
from gpudefrag.model.gpu_models import MODEL_ID
from gpudefrag.model.pods import PodBatch, PodSpec
from gpudefrag.policies.base import Policy
from gpudefrag.policies.scheduler import PolicyScheduler
from gpudefrag.workloads.fgd_protocol import DEFAULT_TUNE_RATIO, prepare_run
from gpudefrag.workloads.openb import NodeTable
from gpudefrag.workloads.replicate import replicate_nodes

__all__ = ["K8sStreamRun", "bench_k8s_stream", "node_objects", "pod_object"]

CORDONED_EVERY = 100
"""Every this many nodes (by position in the repeated node list), one is cordoned."""

START_S = 1.8e9
"""Creation time of the first stream pod (epoch seconds); one second apart after it."""

_MODEL_NAMES = {i: name for name, i in MODEL_ID.items()}


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def node_objects(nodes: NodeTable) -> list[dict]:
    """One Ready v1 Node object per node of ``nodes``, one in :data:`CORDONED_EVERY` cordoned."""
    out = []
    for i, name in enumerate(nodes.names):
        alloc = {
            "cpu": f"{int(nodes.cpu_milli[i])}m",
            "memory": f"{int(nodes.memory_mib[i])}Mi",
            names.NVIDIA_GPU: str(int(nodes.gpu_count[i])),
            "pods": "110",
        }
        labels = {names.ALIBABA_GPU_MODEL: nodes.models[i]} if nodes.models[i] else {}
        spec = {}
        if i % CORDONED_EVERY == CORDONED_EVERY - 1:
            spec = {"unschedulable": True, "taints": [{"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}]}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "uid": f"node-{i}", "labels": labels},
                "spec": spec,
                "status": {
                    "capacity": dict(alloc),
                    "allocatable": alloc,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return out


def pod_object(spec: PodSpec, name: str, created_s: float) -> dict:
    """A pending v1 Pod of ours asking ``spec`` (GPUs by openb's annotations, the model
    constraint by the model annotation)."""
    ann: dict[str, str] = {}
    if spec.gpu_milli > 0:
        ann[names.ALIBABA_GPU_MILLI] = str(spec.gpu_milli)
        ann[names.ALIBABA_GPU_COUNT] = str(spec.num_gpu)
        if spec.gpu_model_mask != ANY_GPU_MODEL:
            accepted = [m for i, m in sorted(_MODEL_NAMES.items()) if spec.gpu_model_mask >> i & 1]
            ann[names.ALIBABA_GPU_MODEL] = "|".join(accepted)
    requests = {"cpu": f"{spec.cpu_milli}m", "memory": f"{spec.memory_mib}Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"uid-{name}",
            "creationTimestamp": to_rfc3339(created_s),
            "annotations": ann,
        },
        "spec": {
            "schedulerName": names.SCHEDULER_NAME,
            "containers": [{"name": "main", "resources": {"requests": requests, "limits": dict(requests)}}],
        },
        "status": {"phase": "Pending"},
    }


class _ScanOnly(Policy):
    """``policy`` with its index never attached: every decision scans every node."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self.name = policy.name

    def select(self, state: ClusterState, pod: PodSpec) -> Placement | None:
        return self._policy.select(state, pod)

    def score_nodes(self, state: ClusterState, pod: PodSpec) -> NDArray[np.int64]:
        return self._policy.score_nodes(state, pod)


@dataclass
class _Fill:
    """The module docstring's nodes (as objects), arrivals, and the fill's placements, made once
    and handed to a fresh cache per mode."""

    nodes: list[dict]
    arrivals: PodBatch
    placements: list[Placement]
    first: int  # the first arrival not placed by the fill
    fill_s: float

    def cache(self) -> ClusterCache:
        """A cache of the nodes with the fill counted in its state."""
        cache = ClusterCache()
        cache.replace_nodes(self.nodes)
        for p in self.placements:
            cache.state.bind(p)
        return cache


@dataclass(frozen=True)
class K8sStreamRun:
    """One (policy, mode)'s stream (module docstring): latencies (ms), cold flags, the node each
    decision chose (-1: none fits), shapes seen, index MiB every ``memory_every`` decisions, the
    process's peak RSS so far, attach seconds, trees after attaching and at the end."""

    policy: str
    mode: str
    gpus: int
    nodes: int
    fill_pct: float
    fill_s: float
    latency_ms: np.ndarray
    cold: np.ndarray
    node: np.ndarray
    shapes: int
    index_mib: tuple[float, ...]
    max_rss_mib: float
    attach_s: float
    trees: tuple[int, int]


def _fill(node_list: NodeTable, pods: PodBatch, gpus: int, policy: Policy, seed: int, fill: float) -> _Fill:
    """The module docstring's nodes and fill, placed by ``policy`` on a cache's state."""
    nodes = replicate_nodes(node_list, gpus)
    prepared = prepare_run(pods, nodes.names, nodes.total_gpus * 1000, seed, DEFAULT_TUNE_RATIO)
    objects = node_objects(nodes)
    cache = ClusterCache()
    cache.replace_nodes(objects)
    state, arrivals = cache.state, prepared.arrivals
    target = fill * state.gpu_capacity_milli
    started = time.perf_counter()
    policy.attach(state)
    placements = []
    i = 0
    while i < len(arrivals) and state.used_gpu_milli < target:
        placement = policy.select(state, arrivals.pod(i))
        if placement is not None:
            state.bind(placement)
            placements.append(placement)
        i += 1
    policy.reset()
    return _Fill(objects, arrivals, placements, i, time.perf_counter() - started)


def _stream(
    cache: ClusterCache,
    core: DecisionCore,
    policy: Policy,
    arrivals: PodBatch,
    first: int,
    decisions: int,
    memory_every: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, tuple[float, ...], float, tuple[int, int]]:
    """Latencies (ms), cold flags, nodes, shapes, index MiB, attach seconds and trees of the
    stream (module docstring) through ``decide_cycle`` with ``policy``."""
    scheduler = PolicyScheduler(policy)
    started = time.perf_counter()
    decide_cycle(cache, [], scheduler, policy, None, START_S)
    attach_s = time.perf_counter() - started
    trees_at_attach = policy.index_trees() or 0
    cold = arrivals.first_of_request(first, decisions)
    n = decisions
    latency = np.empty(n, dtype=np.float64)
    node = np.full(n, -1, dtype=np.int64)
    memory: list[float] = []
    for k in range(n):
        spec = arrivals.pod(first + k)
        now = START_S + k
        obj = pod_object(spec, f"stream-{k:07d}", now)
        t0 = time.perf_counter_ns()
        cache.apply_pod("ADDED", obj)
        result = decide_cycle(cache, cache.pending(), scheduler, policy, core.topology, now)
        for rec, placement in result.binds:
            cache.assume(rec.uid, placement)
        latency[k] = (time.perf_counter_ns() - t0) / 1e6
        if result.binds:
            placement = result.binds[0][1]
            node[k] = placement.node
            obj["spec"]["nodeName"] = cache.order[placement.node]
            obj["metadata"]["annotations"][names.ALIBABA_GPU_INDEX] = ",".join(map(str, placement.gpus))
            obj["status"]["phase"] = "Running"
            cache.apply_pod("MODIFIED", obj)
        else:  # fits nowhere: gone, as FGD's protocol drops it
            cache.apply_pod("DELETED", obj)
        if (k + 1) % memory_every == 0:
            memory.append((policy.index_nbytes() or 0) / 2**20)
    if n % memory_every:
        memory.append((policy.index_nbytes() or 0) / 2**20)
    trees = (trees_at_attach, policy.index_trees() or 0)
    return latency, cold, node, int(cold.sum()), tuple(memory), attach_s, trees


def bench_k8s_stream(
    node_list: NodeTable,
    pods: PodBatch,
    typical: TypicalPods,
    gpus: int,
    policy_name: str,
    decisions: int = 2000,
    seed: int = 42,
    fill: float = 0.85,
    modes: Sequence[str] = ("index", "scan"),
    memory_every: int = 500,
) -> list[K8sStreamRun]:
    """The module docstring's bench for one policy on a workload's node list, pods and typical
    pods: one run per mode."""
    filled = _fill(node_list, pods, gpus, DecisionCore(policy_name, [], typical=typical).policy, seed, fill)
    out = []
    for mode in modes:
        core = DecisionCore(policy_name, [], typical=typical)
        cache = filled.cache()
        # what observe tells the policy of the pods the cache holds; the fill has no pod objects
        core.expect_requests(p.pod.fit_key for p in filled.placements)
        state = cache.state
        fill_pct = 100.0 * state.used_gpu_milli / state.gpu_capacity_milli
        policy = core.policy if mode == "index" else _ScanOnly(core.policy)
        latency, cold, node, shapes, memory, attach_s, trees = _stream(
            cache, core, policy, filled.arrivals, filled.first, decisions, memory_every
        )
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        out.append(
            K8sStreamRun(
                policy_name,
                f"k8s {mode}",
                int(state.gpu_count.sum()),
                state.num_nodes,
                fill_pct,
                filled.fill_s,
                latency,
                cold,
                node,
                shapes,
                memory,
                rss,
                attach_s,
                trees,
            )
        )
        core.policy.reset()
        del cache, state, core, policy
        gc.collect()
    return out
