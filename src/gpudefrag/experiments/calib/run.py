"""One FGD-protocol experiment: prepare the seeded workload, replay it, discretise the curve."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudefrag.experiments.calib.discretize import discretize, discretize_frag
from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.inputs import DEFAULT_WORKLOAD, cluster_from_nodes, workload_inputs
from gpudefrag.frag.tracker import FragTracker
from gpudefrag.policies.registry import make_policy
from gpudefrag.sim.arrival import ArrivalResult, run_arrivals
from gpudefrag.workloads.fgd_protocol import DEFAULT_TUNE_RATIO, PreparedRun, prepare_run
from gpudefrag.workloads.replicate import replicate_nodes


@dataclass(frozen=True)
class RunOutput:
    """Curve (columns 0..130, allocated GPU % of capacity) and the raw per-pod result."""

    workload: str
    policy: str
    seed: int
    curve: np.ndarray
    frag_curve: np.ndarray | None
    result: ArrivalResult
    prepared: PreparedRun
    node_names: tuple[str, ...]


def run_experiment(
    workload: str = DEFAULT_WORKLOAD,
    policy: str = "fgd",
    seed: int = 42,
    tune_ratio: float = DEFAULT_TUNE_RATIO,
    with_frag: bool = False,
    on_progress: Callable[[int], None] | None = None,
    min_gpus: int | None = None,
) -> RunOutput:
    """Run one (workload, policy, seed) experiment of FGD's arrival-only protocol; with
    ``min_gpus``, on the node list repeated to at least that many GPUs
    (:func:`~gpudefrag.workloads.replicate.replicate_nodes`)."""
    inputs = workload_inputs(workload)
    nodes = inputs.nodes if min_gpus is None else replicate_nodes(inputs.nodes, min_gpus)
    prepared = prepare_run(inputs.pods, nodes.names, nodes.total_gpus * 1000, seed, tune_ratio)
    state = cluster_from_nodes(nodes, prepared.tie_rank)
    chooser = make_policy(policy, inputs.typical, seed)
    tracker = FragTracker(inputs.typical, state) if with_frag else None
    result = run_arrivals(state, prepared.arrivals, chooser, tracker, on_progress)
    total_gpus = nodes.total_gpus
    curve = discretize(result.used_gpu_milli, result.arrived_gpu_milli, total_gpus)
    frag_curve = None
    if result.frag_milli is not None:
        frag_curve = discretize_frag(result.frag_milli, result.arrived_gpu_milli, total_gpus)
    return RunOutput(inputs.name, policy, seed, curve, frag_curve, result, prepared, nodes.names)


def write_run(output: RunOutput, folder: Path) -> list[Path]:
    """Write ``curve.csv`` (column, alloc %, frag %) and ``decisions.csv`` (one row per pod)."""
    folder.mkdir(parents=True, exist_ok=True)
    curve_path = folder / "curve.csv"
    with atomic_write(curve_path) as fh:
        out = csv.writer(fh)
        out.writerow(["arrived_pct", "alloc_pct", "frag_pct"])
        for x, value in enumerate(output.curve):
            frag = output.frag_curve[x] if output.frag_curve is not None else np.nan
            out.writerow(
                [x, "" if np.isnan(value) else f"{value:.2f}", "" if np.isnan(frag) else f"{frag:.2f}"]
            )
    decisions_path = folder / "decisions.csv"
    arrivals, result = output.prepared.arrivals, output.result
    with atomic_write(decisions_path) as fh:
        out = csv.writer(fh)
        out.writerow(
            [
                "seq",
                "pod",
                "cpu_milli",
                "memory_mib",
                "num_gpu",
                "gpu_milli",
                "node",
                "gpus",
                "used_gpu_milli",
                "arrived_gpu_milli",
            ]
        )
        for i in range(len(arrivals)):
            node = int(result.node[i])
            mask = int(result.gpu_mask[i])
            gpus = "|".join(str(g) for g in range(8) if mask >> g & 1)
            out.writerow(
                [
                    i,
                    arrivals.names[i],
                    int(arrivals.cpu_milli[i]),
                    int(arrivals.memory_mib[i]),
                    int(arrivals.num_gpu[i]),
                    int(arrivals.gpu_milli[i]),
                    output.node_names[node] if node >= 0 else "",
                    gpus,
                    int(result.used_gpu_milli[i]),
                    int(result.arrived_gpu_milli[i]),
                ]
            )
    return [curve_path, decisions_path]
