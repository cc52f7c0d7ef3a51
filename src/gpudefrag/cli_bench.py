"""``gpudefrag bench``: placement-decision latency, on FGD's protocol or on a cluster of N GPUs
(``--gpus``), or against cluster size (``--sweep``); docs/scale.md."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import GPUS, POLICY_NAMES_CLI, SEED, number_list, refuse, workload_name
from gpudefrag.cli_fgd import DEFAULT_OUT
from gpudefrag.errors import ConfigError
from gpudefrag.settings import value

__all__ = ["add_bench_command"]

SCALE_DEFAULTS = {"decisions": 200, "gang_decisions": 50, "topology": "superpod", "scan": False}
"""``bench --gpus`` / ``--sweep`` settings when not given (given only with those modes)."""


def _scale_defaults(args: argparse.Namespace) -> argparse.Namespace:
    for k, v in SCALE_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def _check_scale_options(args: argparse.Namespace) -> None:
    """The options ``bench --gpus`` and ``bench --sweep`` share."""
    if args.leaf_nodes is not None and args.topology != "superpod":
        raise ConfigError("--leaf-nodes: needs --topology superpod")


def cmd_scale_bench(args: argparse.Namespace) -> int:
    import numpy as np

    from gpudefrag.experiments.bench.scale import bench_scale
    from gpudefrag.experiments.common.inputs import workload_inputs
    from gpudefrag.workloads.itp import load_itp

    _check_scale_options(args)
    inputs = workload_inputs(args.workload)
    itp_jobs = load_itp("itp_cluster04")
    policies = args.policy or ["fgd", "bestfit"]
    how = "full scan of every node" if args.scan else "incremental index (same decisions as the full scan)"
    print(
        f"{args.topology} cluster of {args.gpus} GPUs, 60 % filled (80 % of it ITP cluster04 jobs, 20 % "
        f"{args.workload} pods; seed {args.seed}); {how}; {args.decisions} decisions per pod shape, each bound"
    )
    print(f"{'policy':<10} {'shape':<8} {'nodes':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name in policies:
        r = bench_scale(
            args.gpus,
            args.topology,
            inputs.pods,
            inputs.typical,
            name,
            args.decisions,
            args.seed,
            itp_jobs=itp_jobs,
            scan=args.scan,
        )
        for shape, ms in r.latency_ms.items():
            print(
                f"{name:<10} {shape:<8} {r.nodes:>8} {np.percentile(ms, 50):>8.3f} "
                f"{np.percentile(ms, 99):>8.3f} {ms.max():>8.3f}"
            )
        print(
            f"{name:<10} cluster built in {r.build_s:.1f} s; index built in {r.index_build_s:.2f} s; "
            f"peak RSS {r.max_rss_mib:.0f} MiB"
        )
    sizes = tuple(g for g in (64, 512, 1024, 8192) if g <= args.gpus // 2)
    if args.gang_decisions and sizes:
        from gpudefrag.experiments.bench.gang_scale import bench_gangs, format_result

        print(
            f"\ngangs (suite 2's gang-aware objective on its per-domain counts): {args.gang_decisions} "
            "placements per size, each at the lowest level that can hold it, required"
        )
        res = bench_gangs(
            args.gpus, args.topology, args.seed, args.gang_decisions, sizes, leaf_nodes=args.leaf_nodes
        )
        print(format_result(res))
    return 0


def cmd_batch_stream_bench(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.bench.stream_batch import bench_batch_stream, format_batch_stream

    refuse(
        args, {"k8s": "--k8s", "policy": "--policy"}, "not with --batch (the solver's batches start from FGD)"
    )
    print(
        f"{args.workload} nodes repeated to {args.gpus} GPUs, filled to 85 % by FGD (seed {args.seed}); then "
        f"{args.decisions} further arrivals of its pods in batches of {args.batch}, each decided by the solver's "
        "scheduler (FGD's plan, top FGD candidates, CP-SAT, referee) on the one state and bound: with FGD's "
        "index attached, and scanning every node"
    )
    results = bench_batch_stream(args.workload, args.gpus, args.batch, args.decisions, args.seed)
    r = results[0]
    print(f"{r.nodes} nodes, {r.gpus} GPUs, filled to {r.fill_pct:.1f} %")
    print(format_batch_stream(results))
    return 0


def cmd_stream_bench(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.bench.stream import MEMORY_EVERY, StreamResult, bench_stream, format_stream
    from gpudefrag.experiments.common.inputs import workload_inputs
    from gpudefrag.k8s.stream_bench import bench_k8s_stream

    policies = args.policy or ["fgd", "bestfit"]
    print(
        f"{args.workload} nodes repeated to {args.gpus} GPUs, filled to 85 % by each policy (seed {args.seed}); "
        f"then {args.decisions} further arrivals of its pods one by one, each bound: with the incremental "
        "index attached afresh (every pod shape cold when it first comes) and with a full scan of every node"
    )
    if args.k8s:
        print(
            "through the Kubernetes scheduler's decision path: node and pod objects read by its cache (1 % of "
            "nodes cordoned), the policy told the running pods' requests (a shape none has is cold), each "
            "arrival timed from its watch event to its assumption (view sync, cycle, policy); no API server"
        )
    results = []
    for name in policies:
        if args.k8s:
            inputs = workload_inputs(args.workload)
            runs = bench_k8s_stream(
                inputs.nodes,
                inputs.pods,
                inputs.typical,
                args.gpus,
                name,
                args.decisions,
                args.seed,
                memory_every=MEMORY_EVERY,
            )
            results += [StreamResult(**vars(run)) for run in runs]
        else:
            results += bench_stream(args.workload, args.gpus, name, args.decisions, args.seed)
        r = results[-1]
        print(f"{name}: {r.nodes} nodes, {r.gpus} GPUs, filled to {r.fill_pct:.1f} % in {r.fill_s:.1f} s")
    print(format_stream(results))
    return 0


def cmd_scale_sweep(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gpudefrag.experiments.bench import scale_sweep
    from gpudefrag.experiments.common.inputs import workload_inputs
    from gpudefrag.workloads.itp import load_itp

    _check_scale_options(args)
    inputs = workload_inputs(args.workload)
    policies = args.policy or ["fgd", "bestfit"]
    modes = ["index", "scan"]
    print(
        f"decision latency against cluster size: {args.topology}, sizes {args.sweep} GPUs, 60 % filled "
        f"(ITP cluster04 + {args.workload}, seed {args.seed}); {args.decisions} decisions per pod shape"
    )
    gang_sizes = (64, 512, 1024, 8192) if args.gang_decisions else ()
    steps = len(args.sweep) * (len(policies) * len(modes) + (1 if gang_sizes else 0))
    with tqdm(total=steps, unit="run", disable=True if args.no_progress else None) as bar:
        rows = scale_sweep.sweep(
            args.sweep,
            args.topology,
            inputs.pods,
            inputs.typical,
            policies,
            modes,
            args.decisions,
            args.seed,
            load_itp("itp_cluster04"),
            on_step=lambda _: bar.update(1),
            gang_sizes=gang_sizes,
            gang_decisions=args.gang_decisions,
            leaf_nodes=args.leaf_nodes,
        )
    print(f"{'GPUs':>9} {'nodes':>8} {'policy':<8} {'mode':<6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    pooled: dict[tuple[int, str, str], list[scale_sweep.SweepRow]] = {}
    for r in rows:
        pooled.setdefault((r.gpus, r.policy, r.mode), []).append(r)
    import numpy as np

    for (gpus, policy, mode), group in pooled.items():
        if mode == scale_sweep.GANG_MODE:
            continue
        ms = np.concatenate([r.latency_ms for r in group])
        print(
            f"{gpus:>9} {group[0].nodes:>8} {policy:<8} {mode:<6} {np.percentile(ms, 50):>8.3f} "
            f"{np.percentile(ms, 99):>8.3f} {ms.max():>8.3f}"
        )
    gang_rows = [r for r in rows if r.mode == scale_sweep.GANG_MODE]
    if gang_rows:
        print(f"\ngangs (ours, required at the lowest level that holds them): {args.gang_decisions} per size")
        print(f"{'GPUs':>9} {'nodes':>8} {'gang':<10} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for r in gang_rows:
            print(
                f"{r.gpus:>9} {r.nodes:>8} {r.shape:<10} {r.percentile(50):>8.3f} {r.percentile(99):>8.3f} "
                f"{r.latency_ms.max():>8.3f}"
            )
    for policy in policies:
        for mode in modes:
            g = scale_sweep.growth_ratio(rows, policy, mode)
            if g is not None:
                print(f"growth {policy} {mode}: p99 at {g[1]} GPUs = {g[2]:.2f} x p99 at {g[0]} GPUs")
    out = args.out or DEFAULT_OUT / "bench"
    paths = [
        scale_sweep.write_csv(rows, out / "scale_latency.csv"),
        scale_sweep.write_chart(rows, out / "scale_latency.png"),
    ]
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gpudefrag.experiments.bench.latency import bench_policy
    from gpudefrag.policies.registry import POLICY_NAMES

    scale_only = {
        "decisions": "--decisions",
        "leaf_nodes": "--leaf-nodes",
        "gang_decisions": "--gang-decisions",
    }
    scale_only["topology"] = "--topology"
    if args.sweep is not None:
        refuse(
            args,
            {"gpus": "--gpus", "scan": "--scan", "stream": "--stream", "k8s": "--k8s", "batch": "--batch"},
            "not with --sweep (it times every size, index and scan)",
        )
        return cmd_scale_sweep(_scale_defaults(args))
    refuse(args, {"out": "--out"}, "only with --sweep (the other benches write nothing)")
    if args.stream is not None:
        if args.gpus is None:
            raise ConfigError("--stream: needs --gpus N (the cluster's size)")
        refuse(
            args,
            {
                "scan": "--scan",
                "topology": "--topology",
                "leaf_nodes": "--leaf-nodes",
                "gang_decisions": "--gang-decisions",
            },
            "not with --stream (it runs index and scan on the workload's own nodes)",
        )
        if args.decisions is None:
            args.decisions = 2000
        if args.batch is not None:
            return cmd_batch_stream_bench(args)
        return cmd_stream_bench(args)
    refuse(args, {"k8s": "--k8s", "batch": "--batch"}, "only with --stream")
    if args.gpus is not None:
        return cmd_scale_bench(_scale_defaults(args))
    refuse(args, {**scale_only, "scan": "--scan", "stream": "--stream"}, "only with --gpus or --sweep")

    policies = args.policy or list(POLICY_NAMES)
    print(f"workload {args.workload}, seed {args.seed}: one decision = filter + score all nodes + pick")
    print(
        f"{'policy':<14} {'pods':>6} {'nodes':>6} {'p50 µs':>8} {'p99 µs':>8} {'max µs':>9} {'pods/s':>9} {'run s':>6}"
    )
    for name in policies:
        r = bench_policy(name, args.workload, args.seed)
        print(
            f"{name:<14} {r.pods:>6} {r.nodes:>6} {r.p50_us:>8.1f} {r.p99_us:>8.1f} "
            f"{r.decision_us.max():>9.1f} {r.pods_per_s:>9.0f} {r.run_wall_s:>6.2f}"
        )
    return 0


def add_bench_command(sub: Any) -> None:
    bench = sub.add_parser("bench", help="placement-decision latency (p50/p99 µs) and pods per second")
    bench.add_argument(
        "--policy",
        action="append",
        choices=POLICY_NAMES_CLI,
        metavar="NAME",
        help="policy (repeatable; default all six, with --gpus or --sweep fgd and bestfit)",
    )
    bench.add_argument("--workload", type=workload_name, default="openb_pod_list_default")
    bench.add_argument("--seed", type=SEED, default=42, help="seed (default 42)")
    bench.add_argument(
        "--gpus", type=GPUS, default=None, help="instead: a fragmented cluster of N GPUs (e.g. 1000000)"
    )
    bench.add_argument(
        "--topology",
        choices=("superpod", "nvl72"),
        default=None,
        help="with --gpus or --sweep (default superpod)",
    )
    bench.add_argument(
        "--decisions",
        type=value(Annotated[int, Interval(ge=1, le=1_000_000)]),
        default=None,
        help="with --gpus or --sweep: decisions per pod shape (default 200); with --stream: arrivals (default 2000)",
    )
    bench.add_argument(
        "--leaf-nodes",
        type=value(Annotated[int, Interval(ge=1, le=100_000)]),
        default=None,
        help="with --gpus or --sweep and superpod: nodes per leaf group of the gang bench (default 32)",
    )
    bench.add_argument(
        "--gang-decisions",
        type=value(Annotated[int, Interval(ge=0, le=100_000)]),
        default=None,
        help="with --gpus or --sweep: gang placements per gang size (64, 512, 1024, 8192 GPUs; 0 = none; default 50)",
    )
    bench.add_argument(
        "--scan", action="store_true", help="with --gpus: scan every node per decision instead of the index"
    )
    bench.add_argument(
        "--stream",
        choices=("openb",),
        default=None,
        help="with --gpus: the --workload's own nodes and pods (openb) as a stream (node list repeated to "
        "N GPUs, filled to 85 %%, then --decisions arrivals, index and scan); docs/scale.md",
    )
    bench.add_argument(
        "--k8s",
        action="store_true",
        help="with --stream: decide through the Kubernetes scheduler's decision path (its cache fed node "
        "and pod objects, no API server) instead of the policy alone",
    )
    bench.add_argument(
        "--batch",
        type=value(Annotated[int, Interval(ge=1, le=256)]),
        default=None,
        metavar="B",
        help="with --stream: decide the arrivals in batches of B by the solver's scheduler (FGD's index "
        "attached, and scanning)",
    )
    bench.add_argument(
        "--sweep",
        type=number_list(GPUS, "1000,10000,100000,1000000"),
        default=None,
        metavar="GPUS,GPUS,...",
        help="latency against cluster size (index and full scan) at these sizes, e.g. "
        "1000,10000,100000,1000000; writes OUT/scale_latency.csv and .png",
    )
    bench.add_argument(
        "--out", type=Path, default=None, help="with --sweep: output folder (default runs/bench)"
    )
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(func=cmd_bench)
