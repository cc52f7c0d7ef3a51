"""``gpudefrag k8s-demo``: a workload replayed through the fake API server in accelerated time,
scheduled by the Kubernetes scheduler and defragmented by the controller, with the figures of
the simulator beside it for the same workload.

The fake cluster (:class:`~gpudefrag_fakecluster.cluster.FakeCluster`) runs on a clock ``scale``
times faster than the wall clock; the scheduler and the controller run in threads of this
process on the same clock.  Allocation is the time average of GPUs held by bound pods over the
scenario's measured window (after its warm-up), from the API server's own writes; waits run
from a job's submission to its first bind.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.k8s.defrag import DefragConfig, DefragReconciler, run_controller
from gpudefrag.k8s.scheduler import KubeScheduler, SchedulerConfig
from gpudefrag_fakecluster.audit import AuditReport
from gpudefrag_fakecluster.cluster import FakeCluster
from gpudefrag_fakecluster.workload_items import ReplayWorkload, wait_percentiles_s


@dataclass(frozen=True)
class DemoResult:
    alloc_pct: float
    wait_p50_s: float
    wait_p95_s: float
    jobs_submitted: int
    jobs_started: int
    binds: int
    evictions: int
    plans: int
    audit: AuditReport
    wall_s: float


def _capacity_milli(nodes: list[dict[str, Any]]) -> int:
    return sum(int((n["status"]["allocatable"]).get("nvidia.com/gpu", "0")) * 1000 for n in nodes)


def run_k8s(
    workload: ReplayWorkload, scale: float, policy: str, defrag: bool, restart_s: float, progress: bool
) -> DemoResult:
    """Replay ``workload`` through a fake cluster until its horizon (module docstring)."""
    from gpudefrag.k8s.client import client_factory

    started = time.monotonic()
    with FakeCluster(scale=scale) as fc:
        for node in workload.nodes:
            fc.store.create("nodes", None, node)
        factory = client_factory(fc.kubeconfig)
        sched = KubeScheduler(
            factory,
            SchedulerConfig(policy=policy, lease_namespace="default", lease_duration_s=5),
            clock=fc.clock.now_s,
        )
        stop = threading.Event()
        holder: list[DefragReconciler] = []
        threads = [threading.Thread(target=sched.run, daemon=True)]
        if defrag:
            cfg = DefragConfig(
                interval_s=30.0 / scale, restart_s=restart_s, lease_namespace="default", lease_duration_s=5
            )
            # the simulator's "history" estimate: the mean residual life over the workload's run times
            history = ResidualLife([item.run_s for item in workload.items])
            threads.append(
                threading.Thread(
                    target=lambda: holder.append(run_controller(factory, cfg, stop, fc.clock.now_s, history)),
                    daemon=True,
                )
            )
        for t in threads:
            t.start()
        t0 = fc.clock.now_s()
        replayer = fc.replay(workload.items, progress=progress)
        fc.clock.sleep_until(t0 + workload.horizon_s, threading.Event())
        replayer.stop()
        sched.stop.set()
        stop.set()
        for t in threads:
            t.join(timeout=10)
        window_s = workload.horizon_s - workload.warmup_s
        held = fc.auditor.gpu_milli_seconds(t0 + workload.warmup_s, t0 + workload.horizon_s)
        alloc = 100.0 * held / (_capacity_milli(workload.nodes) * window_s)
        statuses = fc.jobs.statuses()
        waits = [
            s.first_bind_s - s.submitted_s
            for s in statuses
            if s.first_bind_s is not None and s.submitted_s - t0 >= workload.warmup_s
        ]
        p50, p95 = wait_percentiles_s(waits)
        counters = holder[0].counters if holder else None
        return DemoResult(
            alloc_pct=alloc,
            wait_p50_s=p50,
            wait_p95_s=p95,
            jobs_submitted=len(statuses),
            jobs_started=sum(1 for s in statuses if s.first_bind_s is not None),
            binds=sched.counters.binds,
            evictions=counters.evictions if counters else 0,
            plans=counters.plans if counters else 0,
            audit=fc.auditor.report(),
            wall_s=time.monotonic() - started,
        )


def run_sim(
    load: float, seed: int, hours: float, n_nodes: int, defrag: bool, restart_s: float
) -> dict[str, float]:
    """The suite-1b simulator's figures for the same scenario."""
    from gpudefrag.experiments.suite1b.config import Suite1bConfig
    from gpudefrag.experiments.suite1b.scenario import run_scenario

    config = replace(Suite1bConfig(), horizon_h=hours, n_nodes=n_nodes)
    result, _ = run_scenario(config, "fgd+defrag" if defrag else "fgd", load, seed, restart_s)
    return {
        "alloc_pct": result.gpu_alloc_pct,
        "wait_p50_s": result.wait_p50_s,
        "wait_p95_s": result.wait_p95_s,
        "moves": float(result.migrations_executed),
        "arrived": float(result.arrived),
    }
