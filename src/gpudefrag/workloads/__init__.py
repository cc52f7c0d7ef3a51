"""Workload inputs: strict loaders for the Alibaba openb node and pod lists."""

from gpudefrag.workloads.gpu_models import KNOWN_GPU_MODELS
from gpudefrag.workloads.openb import (
    NODE_LIST,
    PUBLISHED_WORKLOADS,
    NodeTable,
    PodTable,
    load_node_list,
    load_nodes,
    load_pods,
    load_workload,
    workload_path,
)

__all__ = [
    "KNOWN_GPU_MODELS",
    "NODE_LIST",
    "PUBLISHED_WORKLOADS",
    "NodeTable",
    "PodTable",
    "load_node_list",
    "load_nodes",
    "load_pods",
    "load_workload",
    "workload_path",
]
