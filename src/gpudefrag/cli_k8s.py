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
import time
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import LOAD, SEED
from gpudefrag.cli_k8s_options import POLICIES
from gpudefrag.errors import ConfigError
from gpudefrag.k8s.defrag_config import DefragConfig
from gpudefrag.settings import flag, value

__all__ = ["add_k8s_commands"]


def _identity(given: str | None) -> str:
    return given or f"{socket.gethostname()}_{os.getpid()}"


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_scheduler(args: argparse.Namespace) -> int:
    from gpudefrag.cli_k8s_options import placer, solver_config, topology_levels
    from gpudefrag.k8s.scheduler import KubeScheduler, SchedulerConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from gpudefrag.k8s.client import client_factory  # lightkube only when a cluster is used

    factory = client_factory(args.kubeconfig)
    config = SchedulerConfig(
        policy=placer(args),
        identity=_identity(args.identity),
        lease_namespace=args.lease_namespace,
        lease_duration_s=args.lease_duration_s,
        topology_levels=topology_levels(args),
        gang_timeout_s=args.gang_timeout_s,
        solver=solver_config(args),
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

    from gpudefrag.cli_args import refuse
    from gpudefrag.cli_k8s_options import controller_settings
    from gpudefrag.k8s.defrag import DefragConfig, run_controller

    live_only = {
        "interval_s": "--interval-s",
        "identity": "--identity",
        "lease_namespace": "--lease-namespace",
    }
    live_only["lease_duration_s"] = "--lease-duration-s"
    if args.snapshot:
        if not args.dry_run:
            raise ConfigError("--snapshot: plans on files only with --dry-run (nothing to evict in a file)")
        refuse(args, live_only, "only for a controller running against a cluster, not with --snapshot")
        return _defrag_snapshot(args)
    if args.now is not None and not args.dry_run:
        raise ConfigError("--now: only with --dry-run (a controller acts at the clock's time)")
    if args.dry_run:
        refuse(args, live_only, "a dry run plans once, now, and takes no Lease")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from gpudefrag.k8s.client import client_factory  # lightkube only when a cluster is used

    factory = client_factory(args.kubeconfig)
    config = DefragConfig(
        **controller_settings(args),
        interval_s=args.interval_s if args.interval_s is not None else DefragConfig.interval_s,
        dry_run=args.dry_run,
        identity=_identity(args.identity),
        lease_namespace=args.lease_namespace or DefragConfig.lease_namespace,
        lease_duration_s=args.lease_duration_s or DefragConfig.lease_duration_s,
    )
    stop = threading.Event()
    _stop_on_signals(stop)
    now = args.now
    clock = (lambda: float(now)) if isinstance(now, float) else time.time
    if now == "snapshot":
        raise ConfigError("--now snapshot: only with --snapshot (give a time for a live cluster)")
    rec = run_controller(factory, config, stop, clock=clock)
    if args.dry_run:
        _print_plans(rec.counters.printed)
    return 0


def _defrag_snapshot(args: argparse.Namespace) -> int:
    """``defrag --dry-run --snapshot FILE``: the controller's one pass over a snapshot."""
    from gpudefrag.cli_k8s_options import controller_settings, read_snapshot, snapshot_now
    from gpudefrag.k8s.defrag import DefragConfig, dry_run

    snap = read_snapshot(args.snapshot)
    now_s = snapshot_now(snap, args.now)
    _print_plans(dry_run(snap.nodes, snap.pods, DefragConfig(**controller_settings(args)), now_s).plans)
    return 0


def _print_plans(plans: list[dict]) -> None:
    import json

    for plan in plans:
        print(json.dumps(plan, sort_keys=True))
    if not plans:
        print("no plan: no pending pod is blocked by fragmentation with a move worth its cost")


def _harness(module: str) -> Any:
    """A module of the fake cluster, which is not part of the product: a :class:`ConfigError`
    saying how to install it when it is missing."""
    import importlib

    try:
        return importlib.import_module(f"gpudefrag_fakecluster.{module}")
    except ModuleNotFoundError as e:
        if e.name != "gpudefrag_fakecluster":
            raise
        raise ConfigError(
            "k8s-demo and k8s-bench run against the fake cluster, which is not part of gpudefrag: "
            "install it with `pip install -e ./fakecluster` from the source tree"
        ) from None


def cmd_demo(args: argparse.Namespace) -> int:
    import json

    demo = _harness("demo")
    suite1b_items = _harness("workload_items").suite1b_items
    run_k8s, run_sim = demo.run_k8s, demo.run_sim

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s", stream=sys.stderr)
    workload = suite1b_items(args.load, args.seed, args.hours, args.nodes)
    defrag = not args.no_defrag
    print(
        f"k8s-demo: suite 1b scenario load {args.load} seed {args.seed}: {len(workload.nodes)} nodes, "
        f"{len(workload.items)} pods over {args.hours} h, replayed at {args.scale:g}x through a fake API "
        f"server on 127.0.0.1 (about {args.hours * 3600 / args.scale:.0f} s)",
        file=sys.stderr,
    )
    k = run_k8s(
        workload,
        args.scale,
        args.policy,
        defrag,
        args.restart_s,
        progress=not (args.json or args.no_progress),
    )
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
    run_bench = _harness("bench").run_bench

    if args.pods <= args.latency_pods:
        raise ConfigError(f"--latency-pods {args.latency_pods}: must be fewer than --pods ({args.pods})")
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


def _lease_options(p: argparse.ArgumentParser, defaults: bool = True) -> None:
    p.add_argument("--identity", default=None, help="leader-election identity (default: host_pid)")
    p.add_argument(
        "--lease-namespace",
        default="kube-system" if defaults else None,
        help="namespace of the leader-election Lease (default kube-system)",
    )
    p.add_argument(
        "--lease-duration-s",
        type=flag(DefragConfig, "lease_duration_s"),
        default=15 if defaults else None,
        help="seconds a Lease is held without renewal (default 15)",
    )


def add_k8s_commands(sub: Any) -> None:
    from gpudefrag.cli_k8s_options import add_controller_options, add_placement_options, add_profile_option
    from gpudefrag.cli_plan import add_source_options

    s = sub.add_parser(
        "scheduler", help="schedule pods with spec.schedulerName=gpudefrag on a cluster", description=__doc__
    )
    s.add_argument("--kubeconfig", type=Path, required=True, help="kubeconfig of the cluster")
    _lease_options(s)
    add_profile_option(s)
    add_placement_options(s)
    s.add_argument(
        "--gang-timeout-s",
        type=value(Annotated[float, Interval(gt=0, le=86_400)]),
        default=300.0,
        help="release a gang left partly bound after this (default 300)",
    )
    s.set_defaults(func=cmd_scheduler)
    d = sub.add_parser(
        "defrag",
        help="the defragmentation controller (evicts to free room for blocked pods)",
        description=__doc__,
    )
    add_source_options(d)
    _lease_options(d, defaults=False)
    d.add_argument("--dry-run", action="store_true", help="print the plans and change nothing")
    d.add_argument(
        "--interval-s",
        type=flag(DefragConfig, "interval_s"),
        default=None,
        help="seconds between reconciles (default 10)",
    )
    add_profile_option(d)
    add_controller_options(d)
    d.set_defaults(func=cmd_defrag)
    k = sub.add_parser(
        "k8s-demo",
        help="replay a suite 1b workload through a fake API server with the scheduler and controller",
        description="Starts a fake API server, kubelet and job controller on 127.0.0.1, replays one suite 1b "
        "scenario in accelerated time, runs the scheduler and the defragmentation controller against it, and "
        "prints allocation, waits and moves beside the simulator's figures (exit 1 if the audit fails).",
    )
    k.add_argument("--load", type=LOAD, default=1.0, help="offered GPU load (default 1.0)")
    k.add_argument("--seed", type=SEED, default=42, help="seed (default 42)")
    k.add_argument(
        "--hours",
        type=value(Annotated[float, Interval(gt=0, le=48)]),
        default=2.0,
        help="simulated hours (default 2)",
    )
    k.add_argument(
        "--nodes",
        type=flag("gpudefrag.experiments.suite1b.config:Suite1bConfig", "n_nodes"),
        default=100,
        help="nodes sampled (default 100)",
    )
    k.add_argument(
        "--scale",
        type=value(Annotated[float, Interval(gt=0, le=100_000)]),
        default=100.0,
        help="simulated seconds per wall second (default 100)",
    )
    k.add_argument("--policy", choices=POLICIES, default="fgd", help="placement policy (default fgd)")
    k.add_argument(
        "--restart-s",
        type=flag(DefragConfig, "restart_s"),
        default=60.0,
        help="restart time of a moved pod (default 60)",
    )
    k.add_argument("--no-defrag", action="store_true", help="scheduler only")
    k.add_argument("--no-progress", action="store_true", help="no progress bar")
    k.add_argument("--json", action="store_true", help="print one JSON object")
    k.set_defaults(func=cmd_demo)
    b = sub.add_parser(
        "k8s-bench",
        help="the scheduler's binds/s, creation-to-bind latency and RSS against the fake API server",
    )
    b.add_argument(
        "--nodes",
        type=value(Annotated[int, Interval(ge=1, le=100_000)]),
        default=1000,
        help="nodes (default 1000)",
    )
    b.add_argument(
        "--pods",
        type=value(Annotated[int, Interval(ge=2, le=1_000_000)]),
        default=10_000,
        help="pods (default 10000)",
    )
    b.add_argument(
        "--latency-pods",
        type=value(Annotated[int, Interval(ge=1, le=1_000_000)]),
        default=1000,
        help="pods of the one-at-a-time phase (default 1000; fewer than --pods)",
    )
    b.add_argument(
        "--rate",
        type=value(Annotated[float, Interval(gt=0, le=100_000)]),
        default=50.0,
        help="pods per second in the one-at-a-time phase (default 50)",
    )
    b.add_argument("--policy", choices=POLICIES, default="fgd", help="placement policy (default fgd)")
    b.set_defaults(func=cmd_k8s_bench)
