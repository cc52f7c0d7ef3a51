"""From registered trace files to simulation inputs: pods as a ``PodBatch``, nodes as a cluster.

Inputs are cached per process (a calibration worker loads each workload once).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpudefrag.errors import InputError
from gpudefrag.frag.typical import TypicalPods, typical_pods
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.gpu_models import gpu_model_mask, model_id
from gpudefrag.model.pods import PodBatch, check_pod_shape
from gpudefrag.workloads.openb import NodeTable, PodTable, load_node_list, load_workload

DEFAULT_WORKLOAD = "openb_pod_list_default"


def pod_batch_from_table(table: PodTable) -> PodBatch:
    """Pods in file order; a shape the placement code does not support is an input error."""
    for i in range(len(table)):
        problem = check_pod_shape(
            int(table.cpu_milli[i]), int(table.memory_mib[i]), int(table.num_gpu[i]), int(table.gpu_milli[i])
        )
        if problem is not None:
            column, why = problem
            raise InputError(table.source_path or "pod list", why, line=i + 2, column=column)
    return PodBatch(
        names=table.names,
        cpu_milli=np.array(table.cpu_milli, dtype=np.int64),
        memory_mib=np.array(table.memory_mib, dtype=np.int64),
        num_gpu=np.array(table.num_gpu, dtype=np.int64),
        gpu_milli=np.array(table.gpu_milli, dtype=np.int64),
        gpu_model_mask=np.array([gpu_model_mask(s) for s in table.gpu_spec], dtype=np.int64),
        gpu_spec=table.gpu_spec,
    )


def cluster_from_nodes(nodes: NodeTable, tie_rank: np.ndarray | None = None) -> ClusterState:
    """An empty cluster with the listed nodes (GPU-less nodes get model id 0, never matched)."""
    models = np.array([model_id(m) if m else 0 for m in nodes.models], dtype=np.int64)
    return ClusterState(nodes.names, models, nodes.gpu_count, nodes.cpu_milli, nodes.memory_mib, tie_rank)


@dataclass(frozen=True)
class WorkloadInputs:
    """A workload's original pods, their typical pods, and the node list."""

    name: str
    pods: PodBatch
    typical: TypicalPods
    nodes: NodeTable

    @property
    def gpu_capacity_milli(self) -> int:
        return int(self.nodes.gpu_count.sum()) * 1000


@lru_cache(maxsize=32)
def workload_inputs(name: str = DEFAULT_WORKLOAD) -> WorkloadInputs:
    """Load (once per process) a registered openb workload with the GPU-node list."""
    table = load_workload(name)
    pods = pod_batch_from_table(table)
    stem = table.source_path.stem if table.source_path is not None else name
    return WorkloadInputs(stem, pods, typical_pods(pods), load_node_list())
