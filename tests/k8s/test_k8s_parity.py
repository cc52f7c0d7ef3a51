"""Parity: for the same pods in the same order, the Kubernetes scheduler (through the fake API
server, one pod at a time) places every pod where the arrival-only simulator does (FGD, the same
typical pods): same node, same GPUs, same pods left unplaced."""

from __future__ import annotations

import random
import threading

import pytest

from gpudefrag.frag.typical import typical_pods
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.client import client_factory
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.scheduler import KubeScheduler, SchedulerConfig
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.policies.fgd import FgdPolicy
from gpudefrag.sim.arrival import run_arrivals
from gpudefrag_fakecluster.cluster import FakeCluster
from gpudefrag_fakecluster.workloads import WorkItem, node_manifest, pod_manifest

pytestmark = pytest.mark.fake_only  # runs its own fake cluster (store, kubelet, job controller)

MODELS = ("V100M16", "T4", "A10")


def _nodes(rng: random.Random) -> list[dict]:
    return [
        node_manifest(
            f"n{i:02d}", rng.choice((2, 4, 8)), rng.choice(MODELS), rng.choice((32_000, 64_000)), 262_144, {}
        )
        for i in range(30)
    ]


def _items(rng: random.Random, n: int) -> list[WorkItem]:
    out = []
    for i in range(n):
        kind = rng.random()
        gpus, milli = (
            (0, 0)
            if kind < 0.1
            else (1, rng.choice((200, 500)))
            if kind < 0.45
            else (rng.choice((1, 2, 4, 8)), 0)
        )
        model = rng.choice(("", "", "", "T4", "V100M16|A10"))
        out.append(
            WorkItem(
                0.0,
                f"p{i:03d}",
                cpu_milli=rng.choice((1000, 4000, 8000)),
                memory_mib=rng.choice((1024, 8192)),
                gpus=gpus,
                gpu_milli=milli,
                gpu_model=model if gpus else "",
            )
        )
    return out


def _spec(item: WorkItem) -> tuple[PodSpec, str]:
    cache = ClusterCache()
    if item.gpu_milli:
        return PodSpec(
            item.cpu_milli, item.memory_mib, 1, item.gpu_milli, cache.models.mask_of(item.gpu_model)
        ), item.gpu_model
    n = item.gpus
    return PodSpec(
        item.cpu_milli, item.memory_mib, n, 1000 if n else 0, cache.models.mask_of(item.gpu_model)
    ), item.gpu_model


def test_scheduler_places_like_the_simulator():
    rng = random.Random(2026)
    nodes = _nodes(rng)
    items = _items(rng, 160)
    specs = [_spec(i) for i in items]
    typical = typical_pods(pod_batch([s for s, _ in specs], [g for _, g in specs]))
    # the simulator: arrival-only FGD on the nodes in name order
    ref = ClusterCache()
    ref.replace_nodes(nodes)
    sim = run_arrivals(ref.state.copy(), pod_batch([s for s, _ in specs]), FgdPolicy(typical))
    expected = []
    for k in range(len(items)):
        node = int(sim.node[k])
        gpus = tuple(g for g in range(8) if (int(sim.gpu_mask[k]) >> g) & 1)
        expected.append((ref.order[node], gpus) if node >= 0 else None)
    # the scheduler, one pod at a time through the API
    got = []
    with FakeCluster(scale=1.0, heartbeat_s=600.0) as fc:
        for n in nodes:
            fc.store.create("nodes", None, n)
        core = DecisionCore("fgd", [], typical=typical)
        sched = KubeScheduler(
            client_factory(fc.kubeconfig),
            SchedulerConfig(lease_namespace="default", lease_duration_s=5),
            core=core,
        )
        threading.Thread(target=sched.run, daemon=True).start()
        for item in items:
            uid = fc.store.create("pods", "default", pod_manifest(item, 0))["metadata"]["uid"]
            name = f"{item.name}-0"

            def settled(uid=uid, name=name) -> bool:
                return (
                    bool(fc.store.get("pods", "default", name)["spec"].get("nodeName"))
                    or uid in sched._tried_at
                )

            assert fc.wait(settled, timeout_s=10.0), name
            pod = fc.store.get("pods", "default", name)
            node = pod["spec"].get("nodeName")
            index = pod["metadata"].get("annotations", {}).get("alibabacloud.com/gpu-index", "")
            got.append((node, tuple(int(g) for g in index.split(",") if g)) if node else None)
        sched.stop.set()
    assert sum(e is None for e in expected) > 0 and sum(e is not None for e in expected) > 50
    mismatches = [(i, e, g) for i, (e, g) in enumerate(zip(expected, got)) if e != g]
    assert mismatches == []
