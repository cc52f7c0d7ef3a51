"""The scheduler and the defragmentation controller killed (SIGKILL) ten times in one scenario
and restarted: no double bind, no lost pod, no repeated move, every pod runs in the end.

Both run as real processes (``python -m gpudefrag scheduler|defrag``) against the fake API
server, on the wall clock (scale 1), with short leases so a restarted process leads again
quickly (it keeps its identity, as a restarted pod keeps its name).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from gpudefrag_fakecluster.cluster import FakeCluster
from gpudefrag_fakecluster.workload_items import LEAF_LABEL, mixed_nodes
from gpudefrag_fakecluster.workloads import WorkItem

pytestmark = pytest.mark.fake_only  # runs its own fake cluster (store, kubelet, job controller)


def _items(seed: int) -> list[WorkItem]:
    """About 25 s of arrivals on 6 nodes x 8 GPUs: small pods that fragment the nodes (some under
    a PDB that forbids evicting them), 8-GPU pods that then need moves, and 2 x 8-GPU gangs."""
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(70):
        t += rng.expovariate(1 / 0.35)
        u = rng.random()
        if u < 0.55:
            out.append(
                WorkItem(
                    t,
                    f"s{i:03d}",
                    gpus=rng.choice((1, 1, 2)),
                    run_s=rng.uniform(4, 14),
                    checkpoint_interval_s=1.0,
                    pdb_min_available=int(rng.random() < 0.25),
                )
            )
        elif u < 0.75:
            out.append(
                WorkItem(
                    t,
                    f"f{i:03d}",
                    gpus=1,
                    gpu_milli=rng.choice((250, 500)),
                    run_s=rng.uniform(4, 12),
                    checkpoint_interval_s=1.0,
                )
            )
        elif u < 0.92:
            out.append(WorkItem(t, f"b{i:03d}", gpus=8, run_s=rng.uniform(3, 8), checkpoint_interval_s=1.0))
        else:
            out.append(
                WorkItem(
                    t,
                    f"g{i:03d}",
                    pods=2,
                    gpus=8,
                    run_s=rng.uniform(3, 6),
                    constraint=f"preferred:{LEAF_LABEL}",
                )
            )
    return out


def _start(kind: str, kubeconfig) -> subprocess.Popen:
    levels = kubeconfig.parent / "levels.yaml"
    levels.write_text(f"levels:\n  - nodeLabel: {LEAF_LABEL}\n")
    cmd = [sys.executable, "-m", "gpudefrag", kind, "--kubeconfig", str(kubeconfig), "--identity", kind]
    cmd += ["--lease-namespace", "default", "--lease-duration-s", "2"]
    if kind == "defrag":
        cmd += ["--interval-s", "0.3", "--reservation-s", "20", "--restart-s", "1"]
    else:
        cmd += ["--gang-timeout-s", "20", "--topology-levels", str(levels)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_ten_sigkills_lose_nothing_and_repeat_nothing():
    with FakeCluster(scale=1.0, heartbeat_s=5.0) as fc:
        fc.auditor.gang_window_s = 30.0  # a gang's binds may straddle a crash; it is completed after
        for node in mixed_nodes(6, leaf_nodes=3):
            fc.store.create("nodes", None, node)
        procs = {k: _start(k, fc.kubeconfig) for k in ("scheduler", "defrag")}
        try:
            items = _items(seed=5)
            fc.replay(items)
            rng = random.Random(11)
            kills = sorted(rng.uniform(2.0, 26.0) for _ in range(10))
            t0 = time.monotonic()
            for i, at in enumerate(kills):
                time.sleep(max(0.0, at - (time.monotonic() - t0)))
                kind = ("scheduler", "defrag")[i % 2]
                procs[kind].send_signal(signal.SIGKILL)
                procs[kind].wait()
                procs[kind] = _start(kind, fc.kubeconfig)
            done = fc.wait(fc.jobs.all_done, timeout_s=150.0, poll_s=0.2)
            report = fc.auditor.report()
        finally:
            for p in procs.values():
                p.kill()
                p.wait()
        not_done = [s.name for s in fc.jobs.statuses() if not s.completed]
        assert done, f"jobs never completed: {not_done}"
        assert report.double_binds == [] and report.overcommits == []
        assert report.partial_gangs == [] and report.forbidden_evictions == []
        evicted = Counter(r["uid"] for r in fc.store.audit if r["verb"] == "evict")
        assert all(c == 1 for c in evicted.values()), (
            f"pods evicted twice: {[u for u, c in evicted.items() if c > 1]}"
        )
        assert report.binds >= len(items)
        print(f"{len(items)} jobs, {report.binds} binds, {report.evictions} evictions, 10 SIGKILLs")
