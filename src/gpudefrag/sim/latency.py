"""How long a scheduling decision takes in simulated time.

``latency = base_s + per_pod_s * pods + scale * measured``, where ``measured`` is 0 for
``constant`` and the scheduler's machine-independent work (``SchedulingDecision.deterministic_s``,
e.g. CP-SAT's deterministic time) for ``deterministic``.  Wall-clock time is never used, so a
run is reproducible bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("constant", "deterministic")


@dataclass(frozen=True)
class LatencyModel:
    kind: str = "constant"
    base_s: float = 0.05
    per_pod_s: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown latency kind {self.kind!r}; known: {', '.join(KINDS)}")
        if min(self.base_s, self.per_pod_s, self.scale) < 0:
            raise ValueError("latency parameters must be >= 0")

    @classmethod
    def constant(cls, seconds: float = 0.05) -> LatencyModel:
        return cls("constant", seconds)

    @classmethod
    def deterministic(cls, scale: float = 1.0, base_s: float = 0.0, per_pod_s: float = 0.0) -> LatencyModel:
        return cls("deterministic", base_s, per_pod_s, scale)

    def latency(self, n_pods: int, deterministic_s: float) -> float:
        measured = deterministic_s if self.kind == "deterministic" else 0.0
        return self.base_s + self.per_pod_s * n_pods + self.scale * measured
