"""One statement: the evictions, moves and binds one decision makes, checked together on a
scratch copy of the cluster state, then committed to the state or discarded.

What Volcano's ``pkg/scheduler/framework/statement.go`` is to its session (operations recorded
by an action, then ``Commit`` or ``Discard``), this is to every action here: a defragmentation
plan, a preemption plan, a consolidation, a batch of placements.  The state is reached through
a :class:`Ledger` over the one :class:`~gpudefrag.model.cluster.ClusterState`, whose unit is a
job (:class:`JobLedger`: a job or gang bound whole, its GPUs chosen by the state's rule) or a
pod (:class:`PodLedger`: a pod bound at a placement).

Rules (:meth:`Statement.replay_on` and :meth:`Statement.commit` apply them alike):

1. every evicted unit and every moved unit is unbound, in the order they were recorded (a
   move that holds its source, as a pod migration does through its grace period, is not);
2. every moved unit is bound at its target, in the order recorded;
3. every new unit is bound where the statement puts it, in the order recorded;

and the ``check`` given to the statement runs on every unit right after it is bound.  A unit
named twice, a unit to evict or move that is not running, a bind that does not fit or a check
that fails makes the statement invalid: :meth:`Statement.why_not` says why, and
:meth:`Statement.commit` refuses it with :class:`StatementError` and leaves the state as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from gpudefrag.model.cluster import ClusterState, Placement, PlacementError
from gpudefrag.model.jobs import Job

__all__ = ["JobLedger", "Ledger", "PodLedger", "Statement", "StatementError"]

U = TypeVar("U")
"""A unit of work: a job (a gang of pods) or a pod."""
W = TypeVar("W")
"""Where a unit is bound: a job's nodes, a pod's placement."""


class StatementError(ValueError):
    """A statement that cannot be applied to the state it was made for."""


class Ledger(Protocol[U, W]):
    """The state a statement works on, by unit id; ``noun`` names its units in messages."""

    noun: str

    def copy(self) -> Ledger[U, W]:
        """An independent copy (the statement's scratch)."""
        ...

    def unit(self, unit_id: int) -> U | None:
        """The running unit ``unit_id`` (None if it is not running)."""
        ...

    def bind(self, unit_id: int, unit: U, where: W) -> None:
        """Bind ``unit`` at ``where``; raises a ``ValueError`` (state unchanged) if it does not fit."""
        ...

    def unbind(self, unit_id: int) -> None:
        """Unbind the running unit ``unit_id``."""
        ...


class JobLedger:
    """A :class:`~gpudefrag.model.cluster.ClusterState` as a ledger of jobs: a unit is a job,
    bound on one node per pod (the state's GPU-choice rule picks the GPUs)."""

    noun = "job"

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def copy(self) -> JobLedger:
        return JobLedger(self.state.copy())

    def unit(self, unit_id: int) -> Job | None:
        return self.state.jobs.get(unit_id)

    def bind(self, unit_id: int, unit: Job, where: Sequence[int]) -> None:
        if unit.job_id != unit_id:
            raise PlacementError(f"job {unit.job_id} recorded as unit {unit_id}")
        self.state.bind_job(unit, list(where))

    def unbind(self, unit_id: int) -> None:
        self.state.unbind_job(unit_id)


class PodLedger:
    """A :class:`~gpudefrag.model.cluster.ClusterState` and the placements of its running pods
    by pod id, as a ledger of pods: a unit is a pod's placement, bound at a placement."""

    noun = "pod"

    def __init__(self, state: ClusterState, placements: dict[int, Placement]) -> None:
        self.state = state
        self.placements = placements

    def copy(self) -> PodLedger:
        return PodLedger(self.state.copy(), dict(self.placements))

    def unit(self, unit_id: int) -> Placement | None:
        return self.placements.get(unit_id)

    def bind(self, unit_id: int, unit: Placement, where: Placement) -> None:
        if where.pod != unit.pod:
            raise PlacementError(f"pod {unit_id} bound with another pod's spec")
        self.state.bind(where)
        self.placements[unit_id] = where

    def unbind(self, unit_id: int) -> None:
        self.state.unbind(self.placements.pop(unit_id))


@dataclass
class _Move(Generic[W]):
    unit_id: int
    to: W
    hold_source: bool


@dataclass
class Statement(Generic[U, W]):
    """Operations recorded against ``ledger`` (module docstring).  ``check(ledger, unit)``
    raises a ``ValueError`` or an ``AssertionError`` when a unit just bound breaks a rule the
    caller keeps (a required topology constraint, say)."""

    ledger: Ledger[U, W]
    check: Callable[[Ledger[U, W], U], None] | None = None
    evictions: list[int] = field(default_factory=list)
    moves: list[_Move[W]] = field(default_factory=list)
    binds: list[tuple[int, U, W]] = field(default_factory=list)

    # ---- recording --------------------------------------------------------------------------
    def evict(self, unit_id: int) -> Statement[U, W]:
        """Stop a running unit (a preemption victim); it gives its room back."""
        self.evictions.append(unit_id)
        return self

    def move(self, unit_id: int, to: W, *, hold_source: bool = False) -> Statement[U, W]:
        """Restart a running unit at ``to``; ``hold_source``: it keeps its old place too (until
        the caller unbinds it, as a pod migration's grace period does)."""
        self.moves.append(_Move(unit_id, to, hold_source))
        return self

    def bind(self, unit_id: int, unit: U, where: W) -> Statement[U, W]:
        """Start a new (pending) unit at ``where``."""
        self.binds.append((unit_id, unit, where))
        return self

    # ---- checking and applying ----------------------------------------------------------------
    def why_not(self) -> str | None:
        """Why the statement cannot be applied to its ledger now (None when it can); the
        ledger is not changed."""
        try:
            self.replay_on(self.ledger.copy())
        except StatementError as e:
            return str(e)
        return None

    def replay(self) -> Ledger[U, W] | None:
        """A copy of the ledger with the statement applied, or None if it is invalid."""
        scratch = self.ledger.copy()
        try:
            self.replay_on(scratch)
        except StatementError:
            return None
        return scratch

    def commit(self) -> None:
        """Apply the statement to its ledger, after checking it on a copy (the ledger is left
        unchanged when it is invalid: :class:`StatementError`)."""
        why = self.why_not()
        if why is not None:
            raise StatementError(why)
        self.replay_on(self.ledger)

    def discard(self) -> None:
        """Forget every recorded operation."""
        self.evictions.clear()
        self.moves.clear()
        self.binds.clear()

    def replay_on(self, ledger: Ledger[U, W]) -> None:
        """Apply the operations to ``ledger`` in the rule order; raises :class:`StatementError`
        at the first that fails (``ledger`` is then part-changed: pass a copy)."""
        stopped = self.evictions + [m.unit_id for m in self.moves if not m.hold_source]
        named = self.evictions + [m.unit_id for m in self.moves] + [b[0] for b in self.binds]
        if len(set(named)) != len(named):
            raise StatementError(f"a {ledger.noun} is named twice")
        moved: list[tuple[_Move[W], U]] = []
        for m in self.moves:
            unit = ledger.unit(m.unit_id)
            if unit is None:
                raise StatementError(f"{ledger.noun} {m.unit_id} to move is not running")
            moved.append((m, unit))
        for b in self.binds:
            if ledger.unit(b[0]) is not None:
                raise StatementError(f"{ledger.noun} {b[0]} to start is already running")
        for unit_id in stopped:
            if ledger.unit(unit_id) is None:
                raise StatementError(f"{ledger.noun} {unit_id} to stop is not running")
            ledger.unbind(unit_id)
        for m, unit in moved:
            self._bind(ledger, m.unit_id, unit, m.to, "moved")
        for unit_id, unit, where in self.binds:
            self._bind(ledger, unit_id, unit, where, "started")

    def _bind(self, ledger: Ledger[U, W], unit_id: int, unit: U, where: W, what: str) -> None:
        try:
            ledger.bind(unit_id, unit, where)
            if self.check is not None:
                self.check(ledger, unit)
        except (ValueError, AssertionError) as e:
            raise StatementError(f"{what} {ledger.noun} {unit_id} to {where}: {e}") from e
