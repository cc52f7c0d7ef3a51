"""The time-driven simulator's event kinds, in the order equal-time events are handled.

Whatever frees resources happens before a decision lands, arrivals come after, and a session
starts only once every other event of its instant has been handled: COMPLETION, EVICT_DONE,
RESTART_DONE, RESERVATION_EXPIRY, DECISION_DONE, ARRIVAL, SESSION_START.  The integer value
of a kind is its class in the engine's ``(time_s, class, seq)`` key and in the event log.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

Payload = tuple[Any, ...]
"""An event's payload, or what its handler logs: ints, strings and tuples of them."""
PlacementLog = tuple[int, int, int]
"""A bind or a move as logged: ``(pod, node, GPU mask)`` (bit ``g`` set for GPU ``g``)."""


class Event(IntEnum):
    COMPLETION = 0
    EVICT_DONE = 1
    RESTART_DONE = 2
    RESERVATION_EXPIRY = 3
    DECISION_DONE = 4
    ARRIVAL = 5
    SESSION_START = 6


# The classes as plain ints for the hot paths (looking up an IntEnum member on its class goes
# through ``EnumType.__getattr__`` on Python 3.11, several times slower than a module global).
COMPLETION, EVICT_DONE, RESTART_DONE, RESERVATION_EXPIRY, DECISION_DONE, ARRIVAL, SESSION_START = (
    int(e) for e in Event
)


class InvariantError(AssertionError):
    """A simulator invariant failed; the message names the event and the rule."""


class Touched:
    """The nodes and pods the current event touched (what the invariant checks look at)."""

    __slots__ = ("nodes", "pods")

    def __init__(self) -> None:
        self.nodes: set[int] = set()
        self.pods: set[int] = set()

    def clear(self) -> None:
        self.nodes.clear()
        self.pods.clear()
