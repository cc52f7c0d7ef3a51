"""Explicit registry of placement policies: name -> factory.

Names follow the published directory labels (``01-Random`` ... ``06-FGD``).  An unknown name
raises :class:`~gpudefrag.errors.ConfigError` listing the known ones.
"""

from __future__ import annotations

from collections.abc import Callable

from gpudefrag.errors import ConfigError
from gpudefrag.frag.typical import TypicalPods
from gpudefrag.policies import kinds
from gpudefrag.policies.base import BaselinePolicy, Policy
from gpudefrag.policies.fgd import FgdPolicy
from gpudefrag.policies.random_policy import RandomPolicy

PolicyFactory = Callable[[TypicalPods, int], Policy]

_FACTORIES: dict[str, PolicyFactory] = {
    "random": lambda typical, seed: RandomPolicy(seed),
    "dotprod": lambda typical, seed: BaselinePolicy("dotprod", kinds.DOTPROD),
    "gpuclustering": lambda typical, seed: BaselinePolicy("gpuclustering", kinds.GPUCLUSTERING),
    "gpupacking": lambda typical, seed: BaselinePolicy("gpupacking", kinds.GPUPACKING),
    "bestfit": lambda typical, seed: BaselinePolicy("bestfit", kinds.BESTFIT, typical.requests()),
    "fgd": lambda typical, seed: FgdPolicy(typical),
}

POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)
"""In the published order: 01-Random, 02-DotProd, 03-GpuClustering, 04-GpuPacking, 05-BestFit, 06-FGD."""

PUBLISHED_LABEL: dict[str, str] = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "gpuclustering": "03-GpuClustering",
    "gpupacking": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}

DETERMINISTIC_POLICIES: tuple[str, ...] = ("dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd")


def make_policy(name: str, typical: TypicalPods, seed: int = 0) -> Policy:
    """A fresh policy instance; ``seed`` is used only by randomised policies."""
    try:
        factory = _FACTORIES[name.lower()]
    except KeyError:
        raise ConfigError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}") from None
    return factory(typical, seed)
