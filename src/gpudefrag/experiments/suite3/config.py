"""Suite 3's settings and variants: three studies on the same windows, jobs and failures.

* **Preemption** (failures at the Llama 3 rate, no spares): ``no-preemption``; the victim rules
  ``kube`` (kube-scheduler's default), ``kai`` (KAI's preempt action) and ``ours`` (checkpoint-
  aware, moving instead of killing when it can, the lowest priority class first).  Reference:
  ``kube``.
* **Spares** (failures at ``stress_scale`` times the Llama 3 rate, victims ``ours``):
  ``spare-none``, ``dedicated`` (``spare_fraction`` of the nodes idle for failed jobs),
  ``pooled-leaf`` and ``pooled-cluster`` (the same nodes, best-effort work on them, evicted for
  failed jobs).  Reference: ``dedicated``.
* **Elastic** (failures at the Llama 3 rate, victims ``ours``): ``fixed-peak`` (a fixed cluster
  sized for the window's peak hour, always on) and ``elastic`` (the same node pool plus
  ``burst_fraction`` of it as standby nodes, powered on and off,
  :class:`~gpudefrag.capacity.elastic_config.ElasticConfig`).  Reference: ``fixed-peak``.

The preemption and spare studies run on the window's cluster sized for load 1.0 (suite 2's
sizing); every variant of a (window, seed) sees the same jobs, classes and failure times, so
differences are paired by (window, seed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from annotated_types import Interval

from gpudefrag.capacity.elastic_config import ElasticConfig
from gpudefrag.capacity.failures import FailureConfig
from gpudefrag.errors import ConfigError
from gpudefrag.experiments.common.checks import PercentPoints
from gpudefrag.profiles.schema import shipped

__all__ = ["STUDIES", "VARIANTS", "Acceptance3", "Suite3Config", "Variant3", "variant"]

_PROFILE = shipped("suite3")
"""The suite's tuned settings of its actions (preempt, elastic): the shipped ``suite3`` profile."""


@dataclass(frozen=True)
class Variant3:
    """What a variant changes: victim rule (or None), spare policy, failure-rate multiplier
    (1 or the suite's stress scale), elastic mode, and whether the cluster is the peak size."""

    name: str
    study: str
    victims: str | None
    spare: str
    stressed: bool
    elastic: bool
    peak_sized: bool


_ALL = (
    Variant3("no-preemption", "preemption", None, "none", False, False, False),
    Variant3("kube", "preemption", "kube", "none", False, False, False),
    Variant3("kai", "preemption", "kai", "none", False, False, False),
    Variant3("ours", "preemption", "ours", "none", False, False, False),
    Variant3("spare-none", "spares", "ours", "none", True, False, False),
    Variant3("dedicated", "spares", "ours", "dedicated", True, False, False),
    Variant3("pooled-leaf", "spares", "ours", "pooled-leaf", True, False, False),
    Variant3("pooled-cluster", "spares", "ours", "pooled-cluster", True, False, False),
    Variant3("fixed-peak", "elastic", "ours", "none", False, False, True),
    Variant3("elastic", "elastic", "ours", "none", False, True, True),
)
VARIANTS = tuple(v.name for v in _ALL)
STUDIES = {"preemption": "kube", "spares": "dedicated", "elastic": "fixed-peak"}
"""Study -> its reference variant."""


def variant(name: str) -> Variant3:
    for v in _ALL:
        if v.name == name:
            return v
    raise ConfigError(f"unknown suite 3 variant {name!r}; known: {', '.join(VARIANTS)}")


@dataclass(frozen=True)
class Acceptance3:
    """The thresholds suite 3's runs are checked against (docs/suite3.md's bars)."""

    # ours loses at least this share fewer GPU-hours to preemption than kube (totals over runs)
    preemption_min_cut: Annotated[float, Interval(ge=0, le=1)] = 0.30
    # ... while the production class's p95 wait is at most this multiple of kube's
    production_wait_max_ratio: Annotated[float, Interval(ge=1, le=10)] = 1.05
    # the pooled reserve's least mean goodput gain over the dedicated reserve (CI above 0)
    spares_min_gain_pp: PercentPoints = 5.0
    # the whole suite's wall time on 2 cores
    wall_max_s: Annotated[float, Interval(gt=0, le=7 * 86_400)] = 45 * 60.0


@dataclass(frozen=True)
class Suite3Config:
    """The suite's settings; ``seeds`` seed the failure times and the priority classes."""

    windows: tuple[str, ...]
    set_name: str
    seeds: tuple[int, ...] = (1, 2)
    load: float = 1.0
    placer: Literal["volcano", "kueue", "kai", "slurm", "fgd", "ours", "ours-batch"] = (
        _PROFILE.allocate.gangs or "ours"
    )
    """Every variant's placer: the shipped ``suite3`` profile's ``allocate.gangs``."""
    variants: tuple[str, ...] = VARIANTS
    class_shares: tuple[float, float, float] = (0.2, 0.5, 0.3)
    leaf_nodes: int = 32
    gang_constraint: str = "preferred:leaf"
    checkpoint_interval_s: float = 1800.0
    restart_s: float = 300.0
    spare_fraction: float = 0.11
    pooled_variant: str = "pooled-cluster"
    """The pooled reserve the spare bar is judged on, named before a report run (chosen on the
    tuning windows: docs/suite3.md)."""
    stress_scale: float = 10.0
    failures: FailureConfig = field(default_factory=FailureConfig)
    elastic: ElasticConfig = field(default_factory=lambda: _PROFILE.elastic)
    burst_fraction: float = 0.25
    """Standby nodes of the elastic variant beyond its peak-sized pool, as a share of it (chosen
    on the tuning windows: docs/suite3.md, "burst_fraction")."""
    acceptance: Acceptance3 = field(default_factory=Acceptance3)

    checkpoint_wait_s: float = _PROFILE.preempt.checkpoint_wait_s
    """How long a blocked research job may wait for its preemption victims' next checkpoints
    (:class:`~gpudefrag.sim.capacity_model.Sim3Config`; only ``ours`` ever waits; chosen on the
    tuning windows: docs/suite3.md, "checkpoint_wait_s")."""
    wait_price: float = _PROFILE.preempt.wait_price
    """What ``ours`` charges per GPU-second of such a wait
    (:class:`~gpudefrag.capacity.victims_ours.CheckpointAwareVictims`; docs/suite3.md)."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.checkpoint_wait_s < self.checkpoint_interval_s):
            raise ConfigError(
                f"checkpoint_wait_s={self.checkpoint_wait_s}: must be >= 0 and below the checkpoint interval"
            )
        if self.wait_price < 0:
            raise ConfigError(f"wait_price={self.wait_price}: must be >= 0")
        if not (0.0 <= self.burst_fraction <= 10.0):
            raise ConfigError(f"burst_fraction={self.burst_fraction}: must be in [0, 10]")

    @property
    def serve_grace_s(self) -> float:
        """How close to the window's end a job may be submitted and still not count as unserved
        when it never started: one elastic tick plus the provisioning delay, for every variant
        (docs/suite3.md)."""
        return self.elastic.tick_s + self.elastic.provision_s
