"""A pod's lifecycle in the time-driven simulator: an enum state machine.

Every pod starts FUTURE; at its arrival it becomes PENDING, or REJECTED when it fits no node
of the cluster even when the cluster is empty; a PENDING pod becomes RUNNING when it binds
(a migrating pod stays RUNNING); a RUNNING pod becomes COMPLETED when its work is done.
No other transition is legal: :meth:`Lifecycle.move` raises :class:`InvariantError` on one.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
import numpy.typing as npt

from gpudefrag.sim.events import InvariantError, Touched


class PodPhase(IntEnum):
    FUTURE = 0
    PENDING = 1
    RUNNING = 2
    COMPLETED = 3
    REJECTED = 4


# The phases as plain ints for the hot paths (see gpudefrag.sim.events on enum lookups).
FUTURE, PENDING, RUNNING, COMPLETED, REJECTED = (int(p) for p in PodPhase)

LEGAL_TRANSITIONS: dict[PodPhase, frozenset[PodPhase]] = {
    PodPhase.FUTURE: frozenset({PodPhase.PENDING, PodPhase.REJECTED}),
    PodPhase.PENDING: frozenset({PodPhase.RUNNING}),
    PodPhase.RUNNING: frozenset({PodPhase.COMPLETED}),
    PodPhase.COMPLETED: frozenset(),
    PodPhase.REJECTED: frozenset(),
}
_LEGAL: tuple[frozenset[int], ...] = tuple(
    frozenset(int(p) for p in LEGAL_TRANSITIONS[phase]) for phase in PodPhase
)


class Lifecycle:
    """The phase of every pod (``phase[i]``, int8) and how many pods are in each phase."""

    def __init__(self, n_pods: int, touched: Touched) -> None:
        self.phase: npt.NDArray[np.int8] = np.zeros(n_pods, dtype=np.int8)
        self.count = [n_pods, 0, 0, 0, 0]
        self._touched = touched

    def move(self, pod: int, to: int) -> None:
        """Take ``pod`` to phase ``to``; an illegal transition raises :class:`InvariantError`."""
        old = int(self.phase[pod])
        if to not in _LEGAL[old]:
            raise InvariantError(
                f"invariant 'lifecycle' violated: pod {pod} cannot go from {PodPhase(old).name} "
                f"to {PodPhase(to).name}"
            )
        self.count[old] -= 1
        self.phase[pod] = to
        self.count[to] += 1
        self._touched.pods.add(pod)

    def is_pending(self, pod: int) -> bool:
        return bool(self.phase[pod] == PENDING)
