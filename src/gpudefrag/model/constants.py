"""Units and limits shared by every layer (the reference simulator's constants)."""

GPU_MILLI_PER_GPU = 1000
"""One whole GPU in ``gpu_milli`` units."""

MAX_GPUS_PER_NODE = 8
"""Width of the per-node GPU array; the openb nodes have 1, 2, 4 or 8 GPUs."""

MAX_SPEC_CPU_MILLI = 128000
"""CPU normaliser of the BestFit and DotProd scores (the largest openb node)."""

MAX_SPEC_GPU_MILLI = 8000
"""GPU normaliser of the BestFit, DotProd and GpuClustering scores (8 GPUs)."""

MAX_PODS_PER_NODE = 1001
"""Kubernetes pod-count limit that the simulator sets on every node."""

ANY_GPU_MODEL = -1
"""Pod GPU-model mask meaning "no constraint": every bit set."""
