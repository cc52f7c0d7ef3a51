"""``gpudefrag plan``: what the scheduler and the defragmentation controller would do on a cluster,
read-only, from a snapshot (``kubectl get nodes,pods -A -o json``) or a live cluster.

It prints (docs/kubernetes.md, "Try it on your cluster"): 1. the nodes and their free GPUs;
2. fragmentation now (FGD's measure against the cluster's GPU workload); 3. the pending pods,
each judged on the nodes it may use; 4. the controller's plan, the very plans
``gpudefrag defrag --dry-run`` makes with the same settings, each move's lost work and the
kubectl commands the controller would issue; 5. the scheduler's placement of the pending pods
now and after the plan, like with like.  ``--json`` prints one JSON object with the same content.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudefrag.cli_k8s_options import (
    add_controller_options,
    add_now_option,
    add_placement_options,
    add_profile_option,
    controller_settings,
    placement_core,
    read_snapshot,
    snapshot_now,
)
from gpudefrag.errors import ConfigError, InputError

if TYPE_CHECKING:
    from gpudefrag.k8s.snapshot import SnapshotObjects
    from gpudefrag.k8s.whatif import Layout, WhatIf

__all__ = [
    "add_plan_command",
    "cmd_plan",
    "format_text",
    "kubectl_commands",
    "list_cluster_objects",
    "report_json",
]

NODES_SHOWN = 40
"""Nodes listed without ``--all-nodes`` (those with the most free GPUs first)."""


def list_cluster_objects(kubeconfig: Path) -> list[dict[str, Any]]:
    """Every Node and Pod of the cluster ``kubeconfig`` names, as JSON objects (``kind`` set);
    any failure is an :class:`~gpudefrag.errors.InputError` naming the kubeconfig."""
    import httpx2
    from lightkube.core.exceptions import ApiError
    from lightkube.resources.core_v1 import Node, Pod

    from gpudefrag.k8s.client import client_factory

    client = client_factory(kubeconfig)()  # a missing or unusable kubeconfig: InputError
    try:
        nodes = [{**n.to_dict(), "kind": "Node", "apiVersion": "v1"} for n in client.list(Node)]
        pods = [{**p.to_dict(), "kind": "Pod", "apiVersion": "v1"} for p in client.list(Pod, namespace="*")]
    except ApiError as e:
        raise InputError(kubeconfig, f"the API server answered {e.status.code}: {e.status.message}") from None
    except (httpx2.HTTPError, OSError) as e:
        raise InputError(kubeconfig, f"cannot list nodes and pods: {e}") from None
    return nodes + pods


def read_source(args: argparse.Namespace) -> tuple[SnapshotObjects, float]:
    """The objects to plan on (files or a live cluster) and the time to evaluate them at."""
    import time

    from gpudefrag.k8s.snapshot import snapshot_objects

    if args.snapshot:
        snap = read_snapshot(args.snapshot)
        return snap, snapshot_now(snap, args.now)
    objects = list_cluster_objects(args.kubeconfig)
    snap = snapshot_objects([(o, str(args.kubeconfig)) for o in objects], str(args.kubeconfig))
    return snap, time.time() if args.now is None else snapshot_now(snap, args.now)


# ----------------------------------------------------------------------------- commands
def kubectl_commands(plans: list[dict[str, Any]], now_s: float, reservation_s: float) -> list[str]:
    """The API calls the controller makes for ``plans``, as kubectl commands: the node's
    reservation annotations (written before any eviction), then one eviction per moved pod
    through the Eviction API (PodDisruptionBudgets honoured)."""
    from gpudefrag.k8s import names
    from gpudefrag.k8s.timefmt import to_rfc3339

    out = []
    until = to_rfc3339(now_s + reservation_s)
    for plan in plans:
        annotation = json.dumps(plan, sort_keys=True, separators=(",", ":"))
        out.append(
            " ".join(
                [
                    "kubectl annotate node",
                    shlex.quote(plan["node"]),
                    "--overwrite",
                    shlex.quote(f"{names.RESERVED_FOR}={plan['pod']}"),
                    shlex.quote(f"{names.RESERVED_UNTIL}={until}"),
                    shlex.quote(f"{names.PLAN}={annotation}"),
                ]
            )
        )
        for move in plan["moves"]:
            ns, _, name = move["pod"].partition("/")
            body = json.dumps(
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}},
                separators=(",", ":"),
            )
            out.append(
                f"echo {shlex.quote(body)} | kubectl create --raw "
                f"{shlex.quote(f'/api/v1/namespaces/{ns}/pods/{name}/eviction')} -f -"
            )
    return out


# ----------------------------------------------------------------------------- output
def report_json(report: WhatIf, source: str) -> dict[str, Any]:
    """The report as one JSON-ready object (the same content as :func:`format_text`)."""
    from gpudefrag.k8s.timefmt import to_rfc3339

    c, d = report.config, report.settings
    return {
        "source": source,
        "now": to_rfc3339(report.now_s, micros=False),
        "settings": {
            "policy": report.policy,
            "max_moves": d.planner.max_moves,
            "headroom_fraction": d.headroom_fraction,
            "restart_s": c.restart_s,
            "grace_s": c.grace_s,
            "reservation_s": c.reservation_s,
        },
        "nodes": [n.to_json() for n in report.nodes],
        "running": report.running,
        "workload_pods": report.workload_pods,
        "fragmentation": report.current.to_json(),
        "pending_pods": [p.to_json() for p in report.pending],
        "plans": report.plans,
        "no_plan": report.no_plan,
        "moves": report.moves,
        "finished_runs": report.finished_runs,
        "total_cost_gpu_s": round(report.total_cost_gpu_s, 3),
        "kubectl": kubectl_commands(report.plans, report.now_s, c.reservation_s),
        "placement": {
            "now": report.current.to_json(),
            "pending_placed": report.pending_placed.to_json(),
            "after_plan": report.after_plan.to_json(),
        },
        "topology": report.domains,
        "skipped": report.skipped,
    }


def _table(rows: list[list[str]], right: set[int], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent
        + "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(r)
        ).rstrip()
        for r in rows
    ]


def _nodes_section(report: WhatIf, all_nodes: bool) -> list[str]:
    nodes = report.nodes
    shown = nodes
    if not all_nodes and len(nodes) > NODES_SHOWN:
        shown = sorted(nodes, key=lambda n: (-n.free_gpus, -n.shared_free_milli, n.name))[:NODES_SHOWN]
    rows = [["node", "model", "GPUs", "free", "shared free", "state", "taints; reserved for"]]
    for n in shown:
        notes = ", ".join(n.taints) + (f"; reserved for {n.reserved_for}" if n.reserved_for else "")
        rows.append(
            [
                n.name,
                n.model or "-",
                str(n.gpus),
                str(n.free_gpus),
                f"{n.shared_free_milli / 1000:.2f}" if n.shared_free_milli else "-",
                n.state,
                notes,
            ]
        )
    total = sum(n.free_gpus for n in nodes if n.state == "usable")
    lines = ["1. Nodes (free: wholly free GPUs; shared free: GPU left on GPUs shared by running pods)"]
    lines += _table(rows, {2, 3, 4})
    if len(shown) < len(nodes):
        lines.append(f"  ... {len(nodes) - len(shown)} more nodes (--all-nodes lists them)")
    lines.append(f"  {total} wholly free GPUs on usable nodes")
    return lines


def _pending_section(report: WhatIf) -> list[str]:
    lines = ["3. Pending pods, each alone on the nodes it may use (selectors, affinity, taints, GPU model)"]
    if not report.pending:
        return [*lines, "  none"]
    rows = [["pod", "asks", "verdict", "why"]]
    rows += [[p.pod, p.request, p.verdict, p.reason] for p in report.pending]
    return lines + _table(rows, set())


def _minutes(s: float) -> str:
    return f"{s / 60:,.1f} min" if s < 5940 else f"{s / 3600:,.1f} h"


def _plan_section(report: WhatIf) -> list[str]:
    c = report.config
    lines = [
        "4. Plan: one pass of the controller (what `gpudefrag defrag --dry-run` prints on this snapshot)",
    ]
    for plan in report.plans:
        moves = plan["moves"]
        lines.append(
            f"  for {plan['pod']}: free node {plan['node']} by {len(moves)} move{'s' if len(moves) != 1 else ''}, "
            f"{plan['cost_gpu_s'] / 3600:,.3f} GPU-h ({plan['cost_gpu_s']:,.0f} GPU-s)"
        )
        rows = [
            ["move", "from -> to", "to GPUs", "work lost (since its checkpoint, + grace)", "with the restart"]
        ]
        for m in moves:
            span_s = m["lost_work_s"] + c.restart_s
            held = m["cost_gpu_s"] / span_s if span_s > 0 else 0.0  # GPUs held (a share for a shared GPU)
            lost_gpu_h = m["lost_work_s"] * held / 3600
            rows.append(
                [
                    m["pod"],
                    f"{m['from']} -> {m['to']}",
                    ",".join(map(str, m["gpus"])) or "-",
                    f"{_minutes(m['lost_work_s'])} x {held:g} GPUs = {lost_gpu_h:,.3f} GPU-h",
                    f"{m['cost_gpu_s'] / 3600:,.3f} GPU-h",
                ]
            )
        lines += _table(rows, {3, 4}, "    ")
    for pod, why in report.no_plan.items():
        lines.append(f"  no plan for {pod}: {why}")
    if not report.plans:
        if not report.no_plan:
            lines.append("  no plan: no pending pod the controller plans for is blocked by fragmentation")
        return lines
    lines += [
        f"  total: {report.moves} moves, {report.total_cost_gpu_s / 3600:,.3f} GPU-h "
        f"({report.total_cost_gpu_s:,.0f} GPU-s)",
        "  the controller would run (the plan on the node first, then one eviction per moved pod):",
    ]
    lines += [f"    {cmd}" for cmd in kubectl_commands(report.plans, report.now_s, c.reservation_s)]
    return lines


def _layout_rows(report: WhatIf) -> list[str]:
    def row(label: str, lay: Layout, placed: str, pending: str) -> list[str]:
        return [
            label,
            f"{lay.allocated_gpus:,.2f}",
            f"{lay.free_gpus:,.2f}",
            f"{lay.frag_gpus:,.2f}",
            f"{lay.frag_pct_of_capacity:.1f} %",
            placed,
            pending,
        ]

    now, a, b = report.current, report.pending_placed, report.after_plan
    rows = [
        ["", "allocated", "free", "fragmented", "fragmented", "pods", "pods still"],
        ["", "GPUs", "GPUs", "GPUs", "of all GPUs", "placed", "pending"],
        row("now", now, "-", str(a.placed + a.pending)),
        row("pending pods placed now", a, str(a.placed), str(a.pending)),
        row("the same after the plan", b, f"{b.placed} + {b.moved} moved", str(b.pending)),
        [
            "change made by the plan",
            f"{b.allocated_gpus - a.allocated_gpus:+,.2f}",
            f"{b.free_gpus - a.free_gpus:+,.2f}",
            f"{b.frag_gpus - a.frag_gpus:+,.2f}",
            f"{b.frag_pct_of_capacity - a.frag_pct_of_capacity:+.1f} pp",
            "",
            "",
        ],
    ]
    lines = [
        f"5. Before and after: the scheduler ({report.policy}) places the pending pods, now and once the "
        "plan's pods are evicted and recreated (same GPUs, same workload measure)"
    ]
    return lines + _table(rows, {1, 2, 3, 4, 5, 6})


def _runtimes(report: WhatIf) -> str:
    from gpudefrag.k8s.defrag import RUNTIME_HISTORY_MIN

    n, prior = report.finished_runs, report.config.default_runtime_s
    if n >= RUNTIME_HISTORY_MIN:
        return f"learned from {n} finished pods (each running pod's expected remaining time at its age)"
    return (
        f"the prior of {prior:g} s a pod ({n} finished pods seen, {RUNTIME_HISTORY_MIN} needed): "
        "a pod older than that is expected to finish at once"
    )


def format_text(report: WhatIf, source: str, all_nodes: bool = False) -> str:
    """The report for a terminal (module docstring)."""
    from gpudefrag.k8s.timefmt import to_rfc3339

    cur, c, d = report.current, report.config, report.settings
    shapes = len(report.typical)
    workload = (
        f"{report.workload_pods} GPU pods in {shapes} typical shapes"
        if report.workload_pods
        else "no GPU pods yet: measured against one-GPU pods"
    )
    lines = [
        f"gpudefrag plan: {source}; {len(report.nodes)} nodes, {report.running} pods running, "
        f"{len(report.pending)} pending; at {to_rfc3339(report.now_s, micros=False)}",
        f"settings, as `gpudefrag scheduler` and `gpudefrag defrag` run with the same flags: placement "
        f"{report.policy}; plans of at most {d.planner.max_moves} moves,",
        f"  {100 * d.headroom_fraction:g} % of the GPUs kept free for 2+ GPU pods' plans; restart "
        f"{c.restart_s:g} s, grace {c.grace_s:g} s, reservation {c.reservation_s:g} s",
        f"  run times: {_runtimes(report)}",
        *(f"  skipped: {s}" for s in report.skipped),
        "",
        *_nodes_section(report, all_nodes),
        "",
        f"2. Fragmentation now (FGD's measure against the GPU workload: {workload}; CPU-only, DaemonSet "
        "and static pods left out)",
        f"  GPU allocation     {cur.allocated_gpus:,.2f} of {cur.capacity_gpu_milli / 1000:,.0f} GPUs "
        f"({cur.allocation_pct:.2f} %)",
        f"  FGD fragmentation  {cur.frag_gpus:,.2f} GPUs = {cur.frag_pct_of_unallocated:.1f} % of the "
        f"{cur.free_gpus:,.2f} unallocated GPUs",
        "",
        *_pending_section(report),
        "",
        *_plan_section(report),
        "",
        *_layout_rows(report),
    ]
    if report.domains is not None:
        lines += ["", "Topology domains (wholly free GPUs on usable nodes)"]
        lines += [
            f"  {d['level']} = {d['domain'] or '(none)'}: {d['nodes']} nodes, {d['gpus']} GPUs, {d['free_gpus']} free"
            for d in report.domains
        ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- command
def cmd_plan(args: argparse.Namespace) -> int:
    from gpudefrag.k8s.defrag_config import DefragConfig
    from gpudefrag.k8s.whatif import what_if

    core = placement_core(args)
    snap, now_s = read_source(args)
    config = DefragConfig(**controller_settings(args))
    try:
        report = what_if(snap.nodes, snap.pods, config, core, now_s, snap.pod_groups)
    except ConfigError as e:  # the topology the levels file describes does not fit the nodes
        raise InputError(args.topology_levels or snap.source, str(e)) from None
    report.skipped = snap.skipped + report.skipped
    if args.json:
        print(json.dumps(report_json(report, snap.source)))
    else:
        print(format_text(report, snap.source, args.all_nodes))
    return 0


def add_source_options(p: argparse.ArgumentParser) -> None:
    """``--snapshot FILE ...`` or ``--kubeconfig PATH`` (one of them), and ``--now``."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--snapshot",
        type=Path,
        action="append",
        metavar="FILE",
        help="`kubectl get nodes,pods -A -o json` output (repeatable: the files are one snapshot)",
    )
    src.add_argument("--kubeconfig", type=Path, metavar="PATH", help="list nodes and pods from this cluster")
    add_now_option(p)


def add_plan_command(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="read-only: what the scheduler and the defrag controller would do on your cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_source_options(p)
    add_profile_option(p)
    add_controller_options(p)
    add_placement_options(p)
    p.add_argument(
        "--all-nodes", action="store_true", help=f"list every node (default: {NODES_SHOWN} at most)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plan)
