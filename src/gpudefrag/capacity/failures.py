"""Node failures for suite 3: independent per-node Poisson processes, optional correlated
failures of a whole leaf group, and repair times.

Rules (all times in seconds, every draw from one seeded ``numpy`` generator, in this order):

* every node fails as a Poisson process of rate ``node_rate_per_h`` per node-hour while it is
  up: the first failure after ``t`` comes after an exponential time of mean
  ``3600 / node_rate_per_h``; a failed node is down for a repair time, then up again, and its
  next failure is drawn from its repair time on;
* the default rate comes from Meta's Llama 3 405B run: 419 unexpected interruptions in 54 days
  on 16,384 GPUs (2,048 nodes of 8 GPUs), i.e. ``419 / (54 * 24 * 2048)`` = 1.58e-4 per
  node-hour (one failure per node every 264 days);
* repair times are lognormal with the given median and ``sigma`` (of the underlying normal);
* correlated failures (``leaf_rate_per_h`` > 0): every domain of the level ``leaf_level`` fails
  as a Poisson process of that rate per domain-hour, taking every node of the domain down at
  once, each node with its own repair time;
* a node already down when a failure (its own or its domain's) hits it is not failed again.

:func:`failure_events` returns every outage as ``(fail_s, repair_s, node, correlated)`` sorted
by failure time then node, for failures before ``horizon_s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpudefrag.model.topology import Topology

__all__ = ["LLAMA3_NODE_RATE_PER_H", "FailureConfig", "Outage", "failure_events"]

LLAMA3_NODE_RATE_PER_H = 419 / (54 * 24 * 2048)
"""Interruptions per node-hour in Meta's Llama 3 405B pre-training (8-GPU nodes)."""


@dataclass(frozen=True)
class FailureConfig:
    """The module docstring's parameters; ``scale`` multiplies both failure rates."""

    node_rate_per_h: float = LLAMA3_NODE_RATE_PER_H
    scale: float = 1.0
    repair_median_s: float = 4 * 3600.0
    repair_sigma: float = 1.0
    leaf_rate_per_h: float = 0.0
    leaf_level: str = "leaf"

    def __post_init__(self) -> None:
        for name in ("node_rate_per_h", "scale", "repair_median_s", "repair_sigma", "leaf_rate_per_h"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"failures.{name} must be a finite number >= 0, got {value}")
        if self.repair_median_s <= 0:
            raise ValueError("failures.repair_median_s must be > 0")


@dataclass(frozen=True, slots=True, order=True)
class Outage:
    """Node ``node`` is down over ``[fail_s, repair_s)``; ``correlated``: its domain failed."""

    fail_s: float
    node: int
    repair_s: float
    correlated: bool


def _repair(rng: np.random.Generator, cfg: FailureConfig) -> float:
    return float(cfg.repair_median_s * math.exp(cfg.repair_sigma * rng.standard_normal()))


def failure_events(topology: Topology, cfg: FailureConfig, horizon_s: float, seed: int) -> list[Outage]:
    """Every outage starting before ``horizon_s`` (module docstring), sorted."""
    rng = np.random.default_rng(seed)
    n = topology.num_nodes
    node_rate = cfg.node_rate_per_h * cfg.scale / 3600.0
    leaf_rate = cfg.leaf_rate_per_h * cfg.scale / 3600.0
    # (time, node or -1 - domain, repair duration for a node's own failure; -1 for a domain's)
    candidates: list[tuple[float, int, float]] = []
    if node_rate > 0:
        for node in range(n):
            t = 0.0
            while True:
                t += float(rng.exponential(1.0 / node_rate))
                if t >= horizon_s:
                    break
                repair = _repair(rng, cfg)
                candidates.append((t, node, repair))
                t += repair  # the node's next failure counts from its repair
    level = topology.level_index(cfg.leaf_level) if leaf_rate > 0 else -1
    if leaf_rate > 0:
        for dom in range(topology.num_domains(level)):
            t = 0.0
            while True:
                t += float(rng.exponential(1.0 / leaf_rate))
                if t >= horizon_s:
                    break
                candidates.append((t, -1 - dom, -1.0))
    candidates.sort()
    down_until = np.zeros(n, dtype=np.float64)
    out: list[Outage] = []
    for t, who, repair in candidates:
        if who >= 0:
            hit = [(who, repair)]
        else:
            nodes = np.flatnonzero(topology.domains(level) == -1 - who)
            hit = [(int(x), _repair(rng, cfg)) for x in nodes]
        for node, duration in hit:
            if down_until[node] > t:
                continue
            down_until[node] = t + duration
            out.append(Outage(t, node, t + duration, who < 0))
    out.sort()
    return out
