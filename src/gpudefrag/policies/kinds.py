"""The kinds of the compiled score kernels, named without importing them (no numba here).

Kinds 0-3 are the baselines of :mod:`~gpudefrag.policies.baseline_kernel`, kind
:data:`FGD_KIND` is FGD; :data:`LEAF_INFEASIBLE` is the score-index leaf of a node the pod does
not fit (below every real score).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BESTFIT", "DOTPROD", "FGD_KIND", "GPUCLUSTERING", "GPUPACKING", "LEAF_INFEASIBLE"]

BESTFIT, GPUPACKING, GPUCLUSTERING, DOTPROD = 0, 1, 2, 3
FGD_KIND = 4
LEAF_INFEASIBLE = np.iinfo(np.int64).min
