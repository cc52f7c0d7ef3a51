"""The kinds of the compiled score kernels, named without importing them (no numba here).

Kinds 0-3 are the baselines of :mod:`~gpudefrag.policies.baseline_kernel`, kind
:data:`FGD_KIND` is FGD; :data:`LEAF_INFEASIBLE` is the score-index leaf of a node the pod does
not fit (below every real score).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "BESTFIT",
    "BOUNDED_KINDS",
    "DOTPROD",
    "FGD_BOUND_SLACK_MILLI",
    "FGD_KIND",
    "GPUCLUSTERING",
    "GPUPACKING",
    "KEY_SCALE",
    "LEAF_INFEASIBLE",
]

BESTFIT, GPUPACKING, GPUCLUSTERING, DOTPROD = 0, 1, 2, 3
FGD_KIND = 4
LEAF_INFEASIBLE = np.iinfo(np.int64).min

BOUNDED_KINDS = (FGD_KIND, BESTFIT)
"""Kinds whose score index keeps one tree per GPU request and bounds the pod's CPU and memory
(:mod:`gpudefrag.policies.bound_kernel`)."""

FGD_BOUND_SLACK_MILLI = 1e-6
"""Milli-GPU added to FGD's fragmentation change for an upper bound: far above the float
rounding of ``F`` (below 1e-9 milli on a node) and far below a score step."""

KEY_SCALE = float(1 << 20)
"""BestFit's bound key is ``floor(value at the tree's CPU floor x KEY_SCALE)`` (an int64 that
orders like the value)."""
