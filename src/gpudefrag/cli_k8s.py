"""``gpudefrag scheduler`` and ``gpudefrag defrag``: the Kubernetes scheduler and the
defragmentation controller, against the cluster a kubeconfig names (docs/kubernetes.md).

Both run until interrupted (SIGINT / SIGTERM), lead through a ``coordination.k8s.io`` Lease
(only the leader writes) and log one line per notable action to stderr.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudefrag.errors import ConfigError
from gpudefrag.model.constants import GPU_MILLI_PER_GPU

if TYPE_CHECKING:
    from gpudefrag.batch.placer import SolverConfig

__all__ = ["add_k8s_commands"]


def _identity(given: str | None) -> str:
    return given or f"{socket.gethostname()}_{os.getpid()}"


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _levels(args: argparse.Namespace) -> list[str]:
    if args.topology_levels is None:
        return []
    from gpudefrag.k8s.topology_config import load_topology_levels

    return load_topology_levels(args.topology_levels)


def _solver_config(args: argparse.Namespace) -> SolverConfig:
    """The batch placer's settings from ``--age-weight``, ``--age-max-gpus`` and
    ``--whole-gpu-above`` (a :class:`ConfigError` naming the flag when one is out of range)."""
    if not (math.isfinite(args.age_weight) and args.age_weight >= 0):
        raise ConfigError(f"--age-weight {args.age_weight}: must be a finite number >= 0")
    if args.age_max_gpus < 0:
        raise ConfigError(f"--age-max-gpus {args.age_max_gpus}: must be >= 0")
    if not 0 <= args.whole_gpu_above < GPU_MILLI_PER_GPU:
        raise ConfigError(f"--whole-gpu-above {args.whole_gpu_above}: must be in [0, {GPU_MILLI_PER_GPU})")
    from gpudefrag.batch.placer import SolverConfig  # OR-Tools only when a scheduler runs

    return SolverConfig(
        age_weight_milli_per_s=args.age_weight,
        age_max_gpus=args.age_max_gpus,
        whole_gpu_above_milli=args.whole_gpu_above,
    )


def cmd_scheduler(args: argparse.Namespace) -> int:
    from gpudefrag.k8s.scheduler import KubeScheduler, SchedulerConfig

    solver = _solver_config(args)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from gpudefrag.k8s.client import client_factory  # lightkube only when a cluster is used

    factory = client_factory(args.kubeconfig)
    config = SchedulerConfig(
        policy=args.policy,
        identity=_identity(args.identity),
        lease_namespace=args.lease_namespace,
        lease_duration_s=args.lease_duration_s,
        topology_levels=_levels(args),
        gang_timeout_s=args.gang_timeout_s,
        solver=solver,
    )
    sched = KubeScheduler(factory, config)
    _stop_on_signals(sched.stop)
    sched.run()
    c = sched.counters
    print(
        f"scheduler stopped: {c.binds} binds, {c.bind_conflicts} conflicts, {c.bind_failures} failures, {c.bind_transport_errors} transport errors",
        file=sys.stderr,
    )
    return 0


def cmd_defrag(args: argparse.Namespace) -> int:
    import json

    from gpudefrag.k8s.defrag import DefragConfig, run_controller

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    if args.interval_s <= 0 or args.restart_s < 0 or args.reservation_s <= 0:
        raise ConfigError("--interval-s and --reservation-s must be > 0, --restart-s >= 0")
    if not 0 <= args.headroom < 1 or args.max_moves < 1:
        raise ConfigError("--headroom must be in [0, 1) and --max-moves at least 1")
    from gpudefrag.k8s.client import client_factory  # lightkube only when a cluster is used

    factory = client_factory(args.kubeconfig)
    config = DefragConfig(
        interval_s=args.interval_s,
        reservation_s=args.reservation_s,
        restart_s=args.restart_s,
        max_moves=args.max_moves,
        headroom_fraction=args.headroom,
        dry_run=args.dry_run,
        identity=_identity(args.identity),
        lease_namespace=args.lease_namespace,
        lease_duration_s=args.lease_duration_s,
    )
    stop = threading.Event()
    _stop_on_signals(stop)
    rec = run_controller(factory, config, stop)
    if args.dry_run:
        for plan in rec.counters.printed:
            print(json.dumps(plan, sort_keys=True))
        if not rec.counters.printed:
            print("no plan: no pending pod is blocked by fragmentation with a move worth its cost")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import json
    import math

    from gpudefrag.k8s.demo import run_k8s, run_sim
    from gpudefrag.k8s.workload_items import suite1b_items

    if args.scale <= 0 or args.hours <= 0 or args.nodes <= 0:
        raise ConfigError("--scale, --hours and --nodes must be > 0")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s", stream=sys.stderr)
    workload = suite1b_items(args.load, args.seed, args.hours, args.nodes)
    defrag = not args.no_defrag
    print(
        f"k8s-demo: suite 1b scenario load {args.load} seed {args.seed}: {len(workload.nodes)} nodes, "
        f"{len(workload.items)} pods over {args.hours} h, replayed at {args.scale:g}x through a fake API "
        f"server on 127.0.0.1 (about {args.hours * 3600 / args.scale:.0f} s)",
        file=sys.stderr,
    )
    k = run_k8s(workload, args.scale, args.policy, defrag, args.restart_s, progress=not args.json)
    sim = run_sim(args.load, args.seed, args.hours, args.nodes, defrag, args.restart_s)
    a = k.audit
    if args.json:
        out = {
            "kubernetes": {
                **{
                    f: getattr(k, f)
                    for f in (
                        "alloc_pct",
                        "wait_p50_s",
                        "wait_p95_s",
                        "binds",
                        "evictions",
                        "plans",
                        "wall_s",
                    )
                },
                "audit_ok": a.ok,
            },
            "simulator": sim,
        }
        print(
            json.dumps(
                out, sort_keys=True, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x
            )
        )
        return 0 if a.ok else 1
    rows = [
        ("GPU allocation %", f"{k.alloc_pct:.2f}", f"{sim['alloc_pct']:.2f}"),
        ("wait p50 s", f"{k.wait_p50_s:.0f}", f"{sim['wait_p50_s']:.0f}"),
        ("wait p95 s", f"{k.wait_p95_s:.0f}", f"{sim['wait_p95_s']:.0f}"),
        ("moves (evictions)", str(k.evictions), f"{sim['moves']:.0f}"),
    ]
    print(f"{'':24}{'kubernetes':>12}{'simulator':>12}")
    for name, kv, sv in rows:
        print(f"{name:24}{kv:>12}{sv:>12}")
    print(
        f"audit: {a.binds} binds of {a.pods_created} pods, {len(a.double_binds)} double binds, "
        f"{len(a.overcommits)} over capacity, {len(a.partial_gangs)} partial gangs, "
        f"{len(a.forbidden_evictions)} forbidden evictions ({a.evictions} evictions); wall {k.wall_s:.0f} s"
    )
    return 0 if a.ok else 1


def cmd_k8s_bench(args: argparse.Namespace) -> int:
    from gpudefrag.k8s.bench import run_bench

    if args.nodes <= 0 or args.pods <= args.latency_pods or args.rate <= 0:
        raise ConfigError("need --nodes > 0, --pods > --latency-pods, --rate > 0")
    print(
        f"k8s-bench: {args.nodes} nodes x 8 GPUs, {args.latency_pods} pods one at a time at {args.rate:g}/s, "
        f"then {args.pods - args.latency_pods} in a burst; scheduler ({args.policy}) in its own process",
        file=sys.stderr,
    )
    r = run_bench(args.nodes, args.pods, args.latency_pods, args.rate, args.policy)
    print(
        f"creation -> bind latency (one-pod sessions, {r.latency_pods} pods): p50 {r.latency_p50_ms:.1f} ms, p99 {r.latency_p99_ms:.1f} ms, max {r.latency_max_ms:.1f} ms"
    )
    print(f"throughput ({r.burst_pods} pods in a burst): {r.binds_per_s:.0f} binds/s")
    print(f"scheduler peak RSS with {r.nodes} nodes and {r.pods} pods: {r.scheduler_rss_mib:.0f} MiB")
    print(f"pods left unbound: {r.unbound}")
    return 0 if r.unbound == 0 else 1


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", type=Path, required=True, help="kubeconfig of the cluster")
    p.add_argument("--identity", default=None, help="leader-election identity (default: host_pid)")
    p.add_argument("--lease-namespace", default="kube-system")
    p.add_argument("--lease-duration-s", type=int, default=15)


def add_k8s_commands(sub: Any) -> None:
    s = sub.add_parser(
        "scheduler", help="schedule pods with spec.schedulerName=gpudefrag on a cluster", description=__doc__
    )
    _common(s)
    s.add_argument("--policy", default="fgd", help="fgd, bestfit, gpupacking, ... or solver (CP-SAT batches)")
    s.add_argument(
        "--topology-levels", type=Path, default=None, help="Kueue-style Topology YAML (levels[].nodeLabel)"
    )
    s.add_argument(
        "--gang-timeout-s", type=float, default=300.0, help="release a gang left partly bound after this"
    )
    s.add_argument(
        "--age-weight",
        type=float,
        default=0.0,
        metavar="MILLI_PER_S",
        help="solver: milli-GPU a pod's wait adds per second to its worth (suite 1b: 1)",
    )
    s.add_argument(
        "--age-max-gpus",
        type=int,
        default=0,
        help="solver: only pods of at most this many GPUs earn the age bonus, 0 every pod (suite 1b: 0)",
    )
    s.add_argument(
        "--whole-gpu-above",
        type=int,
        default=0,
        metavar="MILLI",
        help="solver: a sharing pod asking more milli-GPU than this counts as a whole GPU, 0 off (suite 1b: 700)",
    )
    s.set_defaults(func=cmd_scheduler)
    d = sub.add_parser(
        "defrag",
        help="the defragmentation controller (evicts to free room for blocked pods)",
        description=__doc__,
    )
    _common(d)
    d.add_argument("--dry-run", action="store_true", help="print the plans and change nothing")
    d.add_argument("--interval-s", type=float, default=10.0)
    d.add_argument("--reservation-s", type=float, default=600.0)
    d.add_argument("--restart-s", type=float, default=60.0, help="restart time of a moved pod (cost model)")
    d.add_argument("--max-moves", type=int, default=8, help="moves per plan at most")
    d.add_argument(
        "--headroom", type=float, default=0.05, help="share of GPUs that must stay free for a 2+ GPU plan"
    )
    d.set_defaults(func=cmd_defrag)
    k = sub.add_parser(
        "k8s-demo",
        help="replay a suite 1b workload through a fake API server with the scheduler and controller",
        description="Starts a fake API server, kubelet and job controller on 127.0.0.1, replays one suite 1b "
        "scenario in accelerated time, runs the scheduler and the defragmentation controller against it, and "
        "prints allocation, waits and moves beside the simulator's figures (exit 1 if the audit fails).",
    )
    k.add_argument("--load", type=float, default=1.0)
    k.add_argument("--seed", type=int, default=42)
    k.add_argument("--hours", type=float, default=2.0)
    k.add_argument("--nodes", type=int, default=100)
    k.add_argument("--scale", type=float, default=100.0, help="simulated seconds per wall second")
    k.add_argument("--policy", default="fgd")
    k.add_argument("--restart-s", type=float, default=60.0)
    k.add_argument("--no-defrag", action="store_true", help="scheduler only")
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=cmd_demo)
    b = sub.add_parser(
        "k8s-bench",
        help="the scheduler's binds/s, creation-to-bind latency and RSS against the fake API server",
    )
    b.add_argument("--nodes", type=int, default=1000)
    b.add_argument("--pods", type=int, default=10_000)
    b.add_argument("--latency-pods", type=int, default=1000, help="pods of the one-at-a-time phase")
    b.add_argument("--rate", type=float, default=50.0, help="pods per second in the one-at-a-time phase")
    b.add_argument("--policy", default="fgd")
    b.set_defaults(func=cmd_k8s_bench)
