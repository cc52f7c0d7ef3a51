"""Every suite's acceptance checks, one type and one table.

A check states what it asks (its thresholds read from the suite's configuration, never written
in the check's code), whether the runs meet it (``None``: the variants or loads it needs did not
run) and the figures it measured.  Reports render them with :func:`checks_table`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

from annotated_types import Interval

__all__ = ["VERDICT", "Check", "PercentPoints", "checks_table"]

PercentPoints = Annotated[float, Interval(ge=-100, le=100)]
"""A threshold on a difference of percentages."""


@dataclass(frozen=True)
class Check:
    """One acceptance check: what it asks, whether the runs meet it (``None``: not run), and
    the figures measured."""

    check: str
    met: bool | None
    measured: str


VERDICT = {True: "met", False: "**missed**", None: "not run"}
"""How a report writes a check's verdict."""


def checks_table(
    checks: Iterable[Check], heading: str = "## Acceptance checks", measured: str = "measured"
) -> list[str]:
    """``checks`` as a Markdown section: ``heading``, then one row per check (what it asks, its
    verdict, the figures under the column name ``measured``)."""
    lines = [heading, "", f"| check | verdict | {measured} |", "|---|---|---|"]
    lines += [f"| {c.check} | {VERDICT[c.met]} | {c.measured} |" for c in checks]
    return lines + [""]
