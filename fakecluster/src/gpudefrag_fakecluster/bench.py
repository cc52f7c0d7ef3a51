"""``gpudefrag k8s-bench``: the scheduler's throughput, latency and memory against the fake API
server (in this process) with ``nodes`` nodes, the scheduler running as its own process
(``gpudefrag scheduler``), as it would in a cluster.

Two phases, each pod a small GPU request that fits (so every pod binds):

1. **Latency, one-pod sessions**: pods created one at a time at ``rate_per_s``; each pod's
   latency is the API server's time of its bind minus the time of its creation (from the
   server's own audit log).
2. **Throughput**: the remaining pods created in one burst; binds per second = pods bound
   divided by the time from the first creation to the last bind.

At the end it reads the scheduler process's peak resident memory (``VmHWM``) with all pods bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudefrag_fakecluster.cluster import FakeCluster
from gpudefrag_fakecluster.workloads import make_nodes

SHAPES = ((1, 0), (0, 250), (0, 500), (0, 250), (1, 0))
"""(whole GPUs, GPU milli of a shared GPU) of the benchmark pods, in rotation: 0.6 GPU on average."""


@dataclass(frozen=True)
class BenchResult:
    nodes: int
    pods: int
    latency_pods: int
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    burst_pods: int
    binds_per_s: float
    scheduler_rss_mib: float
    unbound: int


def _pod(i: int) -> dict:
    gpus, milli = SHAPES[i % len(SHAPES)]
    ann = {"alibabacloud.com/gpu-milli": str(milli), "alibabacloud.com/gpu-count": "1"} if milli else {}
    res = {"cpu": "100m", "memory": "256Mi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i:06d}", "namespace": "default", "annotations": ann},
        "spec": {
            "schedulerName": "gpudefrag",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": res, "limits": res}}],
        },
    }


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _leader_lease(fc: FakeCluster) -> bool:
    """The scheduler holds its Lease."""
    return any(
        lz["metadata"]["name"] == "gpudefrag-scheduler" for lz in fc.store.list("leases", "default")[0]
    )


def _times(fc: FakeCluster, verb: str) -> dict[str, float]:
    return {r["name"]: r["t"] for r in list(fc.store.audit) if r["verb"] == verb and r["kind"] == "pods"}


def run_bench(
    nodes: int, pods: int, latency_pods: int, rate_per_s: float, policy: str, timeout_s: float = 600.0
) -> BenchResult:
    """Run both phases (module docstring) and return the figures."""
    with FakeCluster(scale=1.0, heartbeat_s=60.0) as fc:
        make_nodes(fc.store, nodes)
        cmd = [sys.executable, "-m", "gpudefrag", "scheduler", "--kubeconfig", str(fc.kubeconfig)]
        cmd += [
            "--lease-namespace",
            "default",
            "--lease-duration-s",
            "5",
            "--policy",
            policy,
            "--identity",
            "bench",
        ]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ)
        )
        try:
            if not fc.wait(lambda: _leader_lease(fc), 60):
                raise RuntimeError("the scheduler did not take its lease within 60 s")
            time.sleep(1.0)
            for i in range(latency_pods):
                fc.store.create("pods", "default", _pod(i))
                time.sleep(1.0 / rate_per_s)
            fc.wait(lambda: len(_times(fc, "bind")) >= latency_pods, 60)
            burst_start = time.time()
            for i in range(latency_pods, pods):
                fc.store.create("pods", "default", _pod(i))
            fc.wait(lambda: len(_times(fc, "bind")) >= pods, timeout_s)
            created, bound = _times(fc, "create"), _times(fc, "bind")
            rss = _rss_mib(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    lat = (
        np.array(
            [bound[n] - created[n] for n in (f"bench-{i:06d}" for i in range(latency_pods)) if n in bound]
        )
        * 1000
    )
    burst_names = [f"bench-{i:06d}" for i in range(latency_pods, pods)]
    burst_bound = [bound[n] for n in burst_names if n in bound]
    span = (max(burst_bound) - burst_start) if burst_bound else float("nan")
    return BenchResult(
        nodes=nodes,
        pods=pods,
        latency_pods=latency_pods,
        latency_p50_ms=float(np.percentile(lat, 50)) if lat.size else float("nan"),
        latency_p99_ms=float(np.percentile(lat, 99)) if lat.size else float("nan"),
        latency_max_ms=float(lat.max()) if lat.size else float("nan"),
        burst_pods=len(burst_names),
        binds_per_s=len(burst_bound) / span if burst_bound else 0.0,
        scheduler_rss_mib=rss,
        unbound=pods - len(bound),
    )
