"""gpudefrag: GPU-cluster placement and defragmentation, with an exact FGD reproduction."""

__version__ = "0.1.0"
