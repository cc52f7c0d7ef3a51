"""Plans of the job world as :class:`~gpudefrag.model.statement.Statement` s: every
defragmentation, consolidation, preemption and batch plan is checked and applied by the one
statement, with :func:`~gpudefrag.gangs.invariants.check_job` on every job it binds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpudefrag.gangs.invariants import check_job
from gpudefrag.gangs.moves import GangMove
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job
from gpudefrag.model.statement import JobLedger, Ledger, Statement

__all__ = ["GangStatement", "checked_job", "job_statement", "plan_statement"]

GangStatement = Statement[Job, Sequence[int]]


def checked_job(ledger: Ledger[Job, Sequence[int]], job: Job) -> None:
    """The statement's check in the job world: :func:`check_job` on the ledger's state."""
    assert isinstance(ledger, JobLedger)
    check_job(ledger.state, job)


def job_statement(state: ClusterState) -> GangStatement:
    """An empty statement on ``state`` that checks every job it binds with :func:`check_job`."""
    return Statement(JobLedger(state), checked_job)


def plan_statement(
    state: ClusterState,
    job: Job,
    nodes: Sequence[int],
    moves: Iterable[GangMove] = (),
    evict: Iterable[int] = (),
) -> GangStatement:
    """Evict ``evict``, move ``moves``, then start ``job`` on ``nodes``: the statement of a
    defragmentation, consolidation or preemption plan on ``state``."""
    stmt = job_statement(state)
    for j in evict:
        stmt.evict(j)
    for m in moves:
        stmt.move(m.job_id, m.to_nodes)
    return stmt.bind(job.job_id, job, nodes)
