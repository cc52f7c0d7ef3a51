"""What the trace importers share: the jobs they found and what they left out, and the rule that
turns start and end times into a job of the job-trace format.

An importer reads a cluster's own history (Slurm accounting, Kubernetes pod dumps) and returns
:class:`Imported`: jobs numbered and timed from the earliest submission (``origin_s``, epoch
seconds), plus a count per reason of what it left out or changed, so a user sees what the trace
holds before simulating it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from gpudefrag.model.jobs import Job

__all__ = ["MIN_DURATION_S", "Imported", "RawJob", "finish"]

MIN_DURATION_S = 1.0
"""The shortest duration a job gets: one whose end precedes its start (clocks that disagree)
runs this long."""


@dataclass(frozen=True)
class RawJob:
    """A job in epoch seconds as an importer read it; ``end_s`` None: still running."""

    submit_s: float
    start_s: float
    end_s: float | None
    gpus: int
    gpu_milli: int
    priority: int
    name: str


@dataclass
class Imported:
    """Jobs (numbered in submission order, times from ``origin_s``) and the counts of what was
    left out or changed, by reason."""

    jobs: list[Job]
    origin_s: float
    now_s: float
    notes: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        """One line per reason, e.g. ``skipped 3 CPU-only jobs``."""
        return "\n".join(f"  {reason}: {n}" for reason, n in sorted(self.notes.items()))


def finish(raw: list[RawJob], now_s: float, notes: Counter[str]) -> Imported:
    """Jobs from ``raw``: a running job ends at ``now_s`` (its duration a lower bound), a start
    before the submission is moved to it, a duration below :data:`MIN_DURATION_S` is raised to
    it (both counted); ``submit_s`` counts from the earliest submission; ids follow the jobs'
    contents (submit, start, name, size, duration), so the order of the input does not matter."""
    if not raw:
        return Imported([], 0.0, now_s, notes)
    origin = min(r.submit_s for r in raw)
    jobs: list[Job] = []
    for r in raw:
        start = r.start_s
        if start < r.submit_s:
            notes["start before submission (moved to the submission)"] += 1
            start = r.submit_s
        end = r.end_s
        if end is None:
            notes["still running (ended at the dump time: a lower bound)"] += 1
            end = max(now_s, start)
        duration = end - start
        if duration < MIN_DURATION_S:
            notes[
                "end before start (clock skew; ran 1 s)" if duration < 0 else "ran under 1 s (ran 1 s)"
            ] += 1
            duration = MIN_DURATION_S
        jobs.append(Job(0, r.submit_s - origin, duration, r.gpus, r.gpu_milli, r.priority, None, r.name))
    starts = [max(r.start_s, r.submit_s) for r in raw]
    order = sorted(
        range(len(jobs)),
        key=lambda i: (jobs[i].submit_s, starts[i], jobs[i].name, jobs[i].gpus, jobs[i].duration_s, i),
    )
    numbered = [replace(jobs[i], job_id=k) for k, i in enumerate(order)]
    return Imported(numbered, origin, now_s, notes)
