"""The time-driven simulator's counters, as typed fields (event counts and GPU-hours).

Counts of migrations and GPU-hours are for moves started inside the metrics window.  How
reservations ended is not counted here: it is in the reservations' plan log
(:attr:`gpudefrag.sim.reservations.Reservations.log`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Counters:
    sessions: int = 0
    bind_conflicts: int = 0
    reservation_filtered: int = 0
    migrations_executed: int = 0
    migrations_aborted: int = 0
    plans_aborted: int = 0
    migrations_overtaken: int = 0
    gpu_hours_lost_work: float = 0.0
    gpu_hours_lost_restart: float = 0.0
    gpu_hours_held_twice: float = 0.0
    abort_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def gpu_hours_wasted(self) -> float:
        """GPU time migrations waste: lost work, restarts, and sources held through the grace."""
        return self.gpu_hours_lost_work + self.gpu_hours_lost_restart + self.gpu_hours_held_twice

    def abort(self, reason: str, moves: int) -> None:
        """A plan aborted on ``reason`` with ``moves`` moves not executed."""
        self.migrations_aborted += moves
        self.plans_aborted += 1
        self.abort_reasons[reason] = self.abort_reasons.get(reason, 0) + 1
