"""Cluster and workload as arrays; the only place cluster state changes (bind / unbind)."""

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodBatch, PodSpec

__all__ = ["ClusterState", "Placement", "PodBatch", "PodSpec"]
