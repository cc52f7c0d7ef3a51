"""``gpudefrag plan``: a read-only what-if on a cluster snapshot or a live cluster.

It prints (docs/kubernetes-objects.md): 1. fragmentation now (FGD's measure and the GPU
allocation); 2. the pending pods fragmentation blocks and those short of capacity; 3. the
defragmentation plan for the blocked pods (moves and their cost in GPU-seconds); 4. the
allocation our placement would reach: the pending pods placed now, the same after the plan's
moves, and every pod re-placed from an empty cluster, against the current layout.
``--json`` prints one JSON object with the same content.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.k8s.timefmt import to_rfc3339

if TYPE_CHECKING:
    from gpudefrag.k8s.snapshot import Snapshot
    from gpudefrag.k8s.whatif import Layout, WhatIf

__all__ = ["add_plan_command", "cmd_plan", "format_text", "list_cluster_objects", "report_json"]


def _now(text: str) -> float:
    """``--now``: epoch seconds or an RFC 3339 time."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an RFC 3339 time or epoch seconds: {text!r}") from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def _restart_s(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


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


# ----------------------------------------------------------------------------- output
def report_json(report: WhatIf, snapshot: Snapshot, domains: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The report as one JSON-ready object (the same content as :func:`format_text`)."""
    return {
        "source": snapshot.source,
        "now": to_rfc3339(report.now_s, micros=False),
        "policy": report.policy,
        "restart_s": report.restart_s,
        "nodes": len(snapshot.nodes),
        "unusable_nodes": report.unusable_nodes,
        "running": len(snapshot.running),
        "pending": len(snapshot.pending),
        "skipped": report.skipped,
        "fragmentation": report.current.to_json(),
        "pending_pods": {
            "fits_now": report.fits_now,
            "blocked_by_fragmentation": report.blocked,
            "no_capacity": report.no_capacity,
        },
        "plan": {
            "plans": [
                {
                    "pod": p.pod,
                    "target_node": p.target_node,
                    "cost_gpu_s": round(p.cost_gpu_s, 3),
                    "moves": [
                        {
                            "pod": m.pod,
                            "from_node": m.from_node,
                            "to_node": m.to_node,
                            "gpus": list(m.gpus),
                            "cost_gpu_s": round(m.cost_gpu_s, 3),
                        }
                        for m in p.moves
                    ],
                }
                for p in report.plans
            ],
            "moves": sum(len(p.moves) for p in report.plans),
            "total_cost_gpu_s": round(report.total_cost_gpu_s, 3),
            "unplanned": report.unplanned,
        },
        "placement": {
            "current": report.current.to_json(),
            "pending_placed": report.pending_placed.to_json(),
            "after_plan": report.after_plan.to_json(),
            "repacked": report.repacked.to_json(),
        },
        "topology": domains,
    }


def _names(keys: Sequence[str]) -> str:
    return ", ".join(keys) if keys else "–"


def _layout_line(label: str, layout: Layout, note: str) -> str:
    return (
        f"  {label:<30} {layout.allocation_pct:6.2f} %  "
        f"frag {layout.frag_gpus:7.2f} GPUs ({layout.frag_pct_of_unallocated:5.1f} % of free)  {note}"
    )


def format_text(report: WhatIf, snapshot: Snapshot, domains: list[dict[str, Any]] | None) -> str:
    """The report for a terminal (module docstring)."""
    cur = report.current
    unusable = f", not usable: {', '.join(report.unusable_nodes)}" if report.unusable_nodes else ""
    lines = [
        f"snapshot {snapshot.source}: {len(snapshot.nodes)} nodes{unusable}; {len(snapshot.running)} running "
        f"pods, {len(snapshot.pending)} pending; policy {report.policy}; at {to_rfc3339(report.now_s, micros=False)}",
        *(f"  skipped: {s}" for s in report.skipped),
        "",
        "1. Fragmentation now",
        f"  GPU allocation     {cur.allocated_gpu_milli / 1000:.2f} of {cur.capacity_gpu_milli / 1000:.0f} GPUs "
        f"({cur.allocation_pct:.2f} %)",
        f"  FGD fragmentation  {cur.frag_gpus:.2f} GPUs = {cur.frag_pct_of_unallocated:.1f} % of the "
        f"{(cur.capacity_gpu_milli - cur.allocated_gpu_milli) / 1000:.2f} unallocated GPUs",
        "",
        "2. Pending pods (each alone on the current state)",
        f"  fit now ({len(report.fits_now)}): {_names(report.fits_now)}",
        f"  blocked by fragmentation ({len(report.blocked)}): {_names(report.blocked)}",
        f"  not enough free capacity ({len(report.no_capacity)}): {_names(report.no_capacity)}",
        "",
        f"3. Defragmentation plan (restart {report.restart_s:g} s per move)",
    ]
    for p in report.plans:
        lines.append(f"  for {p.pod}: free node {p.target_node}")
        lines += [
            f"    move {m.pod}  {m.from_node} -> {m.to_node}  GPUs {','.join(map(str, m.gpus)) or '-'}  "
            f"cost {m.cost_gpu_s:,.1f} GPU-s"
            for m in p.moves
        ]
    moves = sum(len(p.moves) for p in report.plans)
    lines.append(f"  total: {moves} move(s), cost {report.total_cost_gpu_s:,.1f} GPU-s")
    if report.unplanned:
        lines.append(f"  no plan for: {_names(report.unplanned)}")
    lines += [
        "",
        f"4. What placement by {report.policy} would reach (GPU allocation, FGD fragmentation)",
        _layout_line("current layout", cur, f"{cur.placed} pods running"),
    ]
    for label, layout in (
        ("(a) pending pods placed now", report.pending_placed),
        ("(b) the same after the plan", report.after_plan),
        ("(c) every pod re-placed", report.repacked),
    ):
        note = f"{layout.placed} placed; not placed: {_names(layout.unplaced)}"
        lines.append(_layout_line(label, layout, note))
    if domains is not None:
        lines += ["", "Topology domains (free whole GPUs on usable nodes)"]
        lines += [
            f"  {d['level']} = {d['domain'] or '(none)'}: {d['nodes']} nodes, {d['gpus']} GPUs, "
            f"{d['free_gpus']} free"
            for d in domains
        ]
    return "\n".join(lines)


def domain_rows(snapshot: Snapshot, levels: list[str]) -> list[dict[str, Any]]:
    """Per level (top first) and domain of the GPU nodes: nodes, GPUs, wholly free GPUs on
    usable nodes.  A domain is named by its label values from the top level down."""
    from gpudefrag.k8s.topology_config import topology_from_nodes
    from gpudefrag.model.constants import GPU_MILLI_PER_GPU

    nodes = [n for n in snapshot.nodes if n.gpu_count > 0]
    state = snapshot.cluster_state()
    index = snapshot.node_index()
    topo = topology_from_nodes(nodes, levels)
    top_down = list(topo.levels[::-1])
    rows: list[dict[str, Any]] = []
    for depth, level in enumerate(top_down):
        doms = topo.domains(topo.levels.index(level))
        for d in range(int(doms.max()) + 1):
            members = [nodes[i] for i in range(len(nodes)) if doms[i] == d]
            path = "/".join(members[0].labels.get(lv, "") for lv in top_down[: depth + 1])
            free = sum(
                int((state.gpu_milli_left[index[n.name], : n.gpu_count] >= GPU_MILLI_PER_GPU).sum())
                for n in members
                if n.usable
            )
            rows.append(
                {
                    "level": level,
                    "domain": path,
                    "nodes": len(members),
                    "gpus": sum(n.gpu_count for n in members),
                    "free_gpus": free,
                }
            )
    return rows


# ----------------------------------------------------------------------------- command
def cmd_plan(args: argparse.Namespace) -> int:
    from gpudefrag.k8s.snapshot import load_snapshot, snapshot_from_objects
    from gpudefrag.k8s.topology_config import load_topology_levels
    from gpudefrag.k8s.whatif import what_if

    levels = load_topology_levels(args.topology_levels) if args.topology_levels else None
    if args.snapshot:
        snapshot = load_snapshot(*args.snapshot)
    else:
        objects = list_cluster_objects(args.kubeconfig)
        snapshot = snapshot_from_objects(objects, source=str(args.kubeconfig))
    now_s = time.time() if args.now is None else args.now
    report = what_if(snapshot, args.policy, args.restart_s, now_s)
    domains = None
    if levels is not None:
        try:
            domains = domain_rows(snapshot, levels)
        except ConfigError as e:
            raise InputError(args.topology_levels, str(e)) from None
    if args.json:
        print(json.dumps(report_json(report, snapshot, domains)))
    else:
        print(format_text(report, snapshot, domains))
    return 0


def add_plan_command(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="read-only what-if on a cluster snapshot: fragmentation, blocked pods, a defrag plan",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--snapshot",
        type=Path,
        action="append",
        metavar="FILE",
        help="`kubectl get nodes,pods -A -o json` output (repeatable: the files are one snapshot)",
    )
    src.add_argument("--kubeconfig", type=Path, metavar="PATH", help="list nodes and pods from this cluster")
    p.add_argument("--policy", default="fgd", help="placement policy for the what-ifs (default fgd)")
    p.add_argument(
        "--restart-s", type=_restart_s, default=60.0, help="seconds a moved pod takes to restart (default 60)"
    )
    p.add_argument(
        "--topology-levels",
        type=Path,
        metavar="FILE",
        help="Kueue Topology (YAML/TOML): also print free GPUs per topology domain",
    )
    p.add_argument(
        "--now",
        type=_now,
        default=None,
        help="evaluate at this time (RFC 3339 or epoch s; default: the clock)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plan)
