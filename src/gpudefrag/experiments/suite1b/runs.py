"""One suite-1b run as a record (:class:`Run1b`), and the selection of runs by their cell.

A cell is (variant, offered load, restart time); its runs differ only in the seed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Run1b:
    """The metrics of one (variant, load, seed, restart time), with its event-log hash."""

    variant: str
    load: float
    seed: int
    restart_s: float
    metrics: dict[str, float]
    event_hash: str
    wall_s: float


def select_runs(runs: list[Run1b], variant: str, load: float, restart_s: float) -> list[Run1b]:
    """The runs of one (variant, load, restart time), by seed."""
    return sorted(
        (r for r in runs if r.variant == variant and r.load == load and r.restart_s == restart_s),
        key=lambda r: r.seed,
    )
