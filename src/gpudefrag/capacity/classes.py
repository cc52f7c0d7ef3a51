"""Priority classes of suite 3 and how a trace's jobs are given one.

Three classes, as the issue names them: ``production`` training (priority 2, never preempted by
KAI's rule), ``research`` (priority 1, preemptible) and ``best-effort`` (priority 0,
preemptible; the only class that may run on a pooled spare reserve).  The traces carry no
priorities we can trust, so :func:`assign_classes` draws each job's class independently from
``shares`` (production, research, best-effort) with a generator seeded by ``seed``, in job
order; the same jobs and seed always get the same classes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpudefrag.model.jobs import Job

__all__ = ["BEST_EFFORT", "CLASS_NAMES", "PREEMPTIBLE", "PRODUCTION", "RESEARCH", "assign_classes"]

BEST_EFFORT, RESEARCH, PRODUCTION = 0, 1, 2
CLASS_NAMES = {PRODUCTION: "production", RESEARCH: "research", BEST_EFFORT: "best-effort"}
PREEMPTIBLE = frozenset({RESEARCH, BEST_EFFORT})
"""Classes KAI may preempt (its non-preemptible class is production training)."""


def assign_classes(jobs: list[Job], shares: tuple[float, float, float], seed: int) -> list[Job]:
    """Each job with ``priority`` set to a class drawn from ``shares`` (module docstring)."""
    p = np.asarray(shares, dtype=np.float64)
    if p.shape != (3,) or (p < 0).any() or not np.isclose(p.sum(), 1.0):
        raise ValueError(f"class shares must be three non-negative numbers summing to 1, got {shares}")
    rng = np.random.default_rng(seed)
    drawn = rng.choice(np.array([PRODUCTION, RESEARCH, BEST_EFFORT]), size=len(jobs), p=p)
    return [replace(j, priority=int(c)) for j, c in zip(jobs, drawn)]
