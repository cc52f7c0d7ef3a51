"""GPU models that appear in the Alibaba openb traces (re-exported from the model layer).

These are the values of the node ``model`` column and the parts of the pod ``gpu_spec`` column.
The loaders reject any other name so that a typo cannot silently make a pod unschedulable.
"""

from __future__ import annotations

from gpudefrag.model.gpu_models import KNOWN_GPU_MODELS

__all__ = ["KNOWN_GPU_MODELS"]
