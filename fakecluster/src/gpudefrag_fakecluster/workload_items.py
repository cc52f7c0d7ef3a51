"""Workloads for the fake cluster, as :class:`~gpudefrag_fakecluster.workloads.WorkItem` lists.

* :func:`suite1b_items`: one scenario of suite 1b (openb nodes and resampled openb pods with
  run times and checkpoints), the same pods, arrival times and nodes the simulator replays.
* :func:`mixed_items`: a seeded synthetic mix for the end-to-end checks: fractional pods,
  whole-GPU pods (some under a PodDisruptionBudget), and gangs of full-node pods with a
  preferred topology level.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudefrag.model.gpu_models import KNOWN_GPU_MODELS
from gpudefrag_fakecluster.workloads import WorkItem, node_manifest

LEAF_LABEL = "gpudefrag.io/leaf"


@dataclass(frozen=True)
class ReplayWorkload:
    nodes: list[dict[str, Any]]
    items: list[WorkItem]
    warmup_s: float
    horizon_s: float


def suite1b_items(load: float, seed: int, hours: float, n_nodes: int) -> ReplayWorkload:
    """Suite 1b's scenario of (``load``, ``seed``) with ``hours`` and ``n_nodes`` as nodes and
    work items (pods with their run times and checkpoint intervals)."""
    from dataclasses import replace

    from gpudefrag.experiments.suite1b.config import Suite1bConfig
    from gpudefrag.experiments.suite1b.scenario import scenario

    config = replace(Suite1bConfig(), horizon_h=hours, n_nodes=n_nodes)
    _, cluster, w = scenario(config, load, seed)
    nodes = [
        node_manifest(
            cluster.names[i].lower().replace("_", "-"),
            int(cluster.gpu_count[i]),
            KNOWN_GPU_MODELS[int(cluster.model_id[i])] if cluster.gpu_count[i] else "",
            int(cluster.cpu_capacity_milli[i]),
            int(cluster.memory_capacity_mib[i]),
            {},
        )
        for i in range(cluster.num_nodes)
    ]
    pods = w.pods
    items = []
    for i in range(len(w)):
        whole = int(pods.gpu_milli[i]) >= 1000
        items.append(
            WorkItem(
                submit_s=float(w.arrival_s[i]),
                name=f"p{i:05d}",
                cpu_milli=int(pods.cpu_milli[i]),
                memory_mib=int(pods.memory_mib[i]),
                gpus=int(pods.num_gpu[i]) if whole else (1 if pods.gpu_milli[i] > 0 else 0),
                gpu_milli=0 if whole else int(pods.gpu_milli[i]),
                gpu_model=pods.gpu_spec[i],
                run_s=float(w.duration_s[i]),
                checkpoint_interval_s=float(w.checkpoint_interval_s[i]),
                priority=int(w.priority[i]),
            )
        )
    return ReplayWorkload(nodes, items, float(w.warmup_s), float(w.horizon_s))


def mixed_nodes(count: int, leaf_nodes: int = 25) -> list[dict[str, Any]]:
    """``count`` 8-GPU V100 nodes in leaf groups of ``leaf_nodes`` (label ``gpudefrag.io/leaf``)."""
    return [
        node_manifest(f"node-{i:04d}", 8, "V100M16", 96_000, 786_432, {LEAF_LABEL: f"leaf-{i // leaf_nodes}"})
        for i in range(count)
    ]


def mixed_items(count: int, seed: int, mean_gap_s: float = 3.0) -> list[WorkItem]:
    """A seeded mix: 30 % fractional pods (checkpoint every 300 s), 60 % whole-GPU pods of 1-8
    GPUs (half of them checkpointing every 600 s; a third under a PodDisruptionBudget with
    minAvailable 1, which forbids evicting them), 10 % gangs of 2 or 4 full-node pods
    preferring one leaf group.  Arrivals are Poisson with mean gap ``mean_gap_s``."""
    rng = random.Random(seed)
    t = 0.0
    items = []
    for i in range(count):
        t += rng.expovariate(1.0 / mean_gap_s)
        u = rng.random()
        if u < 0.3:
            items.append(
                WorkItem(
                    t,
                    f"f{i:05d}",
                    gpus=1,
                    gpu_milli=rng.choice((250, 500, 750)),
                    run_s=rng.uniform(300, 3000),
                    checkpoint_interval_s=300,
                )
            )
        elif u < 0.9:
            items.append(
                WorkItem(
                    t,
                    f"w{i:05d}",
                    gpus=rng.choice((1, 1, 2, 4, 8)),
                    run_s=rng.uniform(300, 3000),
                    checkpoint_interval_s=rng.choice((0.0, 600.0)),
                    pdb_min_available=1 if rng.random() < 0.33 else 0,
                )
            )
        else:
            items.append(
                WorkItem(
                    t,
                    f"g{i:05d}",
                    pods=rng.choice((2, 4)),
                    gpus=8,
                    run_s=rng.uniform(600, 3000),
                    constraint=f"preferred:{LEAF_LABEL}",
                )
            )
    return items


def wait_percentiles_s(waits: list[float]) -> tuple[float, float]:
    """(p50, p95) of waits; NaN when there are none."""
    if not waits:
        return float("nan"), float("nan")
    a = np.asarray(waits)
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))
