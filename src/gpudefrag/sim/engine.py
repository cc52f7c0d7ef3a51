"""A tiny discrete-event engine: a heap of events, the one event loop every simulator runs
(:func:`run_events`), and a hash of everything processed.

Events are ordered by the key ``(time_s, event_class, seq)``: earlier times first; at equal
times the lower event class first (the simulator fixes the class order, e.g. completions
before decisions before arrivals); within a class, first pushed first out (``seq`` is a
counter).  The order is therefore total and independent of the payloads, so a run is
deterministic given its inputs.

:class:`EventLog` hashes every processed event (sha256 of a canonical text: ``repr`` of the
float time, the class, and a payload tuple of ints and strings), so two runs can be compared
bit for bit with one string.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable
from typing import Any


class EventQueue:
    """A min-heap of ``(time_s, event_class, seq, payload)`` entries."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0

    def push(self, time_s: float, event_class: int, payload: Any = ()) -> None:
        """Schedule an event; ``payload`` is opaque to the queue."""
        heapq.heappush(self._heap, (float(time_s), int(event_class), self._seq, payload))
        self._seq += 1

    def pop(self) -> tuple[float, int, Any]:
        """Remove and return the next event as ``(time_s, event_class, payload)``."""
        time_s, event_class, _, payload = heapq.heappop(self._heap)
        return time_s, event_class, payload

    def peek_time(self) -> float:
        """Time of the next event (``inf`` when empty)."""
        return self._heap[0][0] if self._heap else float("inf")

    def __len__(self) -> int:
        return len(self._heap)


def _no_wake() -> float:
    return float("inf")


def run_events(
    queue: EventQueue,
    end_s: float,
    on_event: Callable[[float, int, Any], None],
    advance: Callable[[float], None],
    after_events: Callable[[float], None] | None = None,
    wake_s: Callable[[], float] = _no_wake,
    events_at_end: bool = False,
) -> None:
    """The event loop of every simulator.

    Each step: the time ``t`` becomes the earliest of the next event, ``wake_s()`` (a time the
    driver wants a step at without an event, a periodic tick say) and ``end_s``;
    ``advance(t)`` is called (the driver accounts for the time that passed); the loop ends at
    ``end_s``; else every event at ``t`` is handed to ``on_event(t, class, payload)`` in key
    order, those pushed at ``t`` while handling them included, and then ``after_events(t)``
    runs (a scheduling pass, say).  ``events_at_end``: events at exactly ``end_s`` are handled
    (and ``after_events`` runs after them) before the loop ends.
    """
    while True:
        t = min(queue.peek_time(), wake_s(), end_s)
        advance(t)
        if t >= end_s and not (events_at_end and queue.peek_time() == t):
            return
        while queue.peek_time() == t:
            _, event_class, payload = queue.pop()
            on_event(t, event_class, payload)
        if after_events is not None:
            after_events(t)


def _canonical(value: Any) -> str:
    """Canonical text of a payload made of ints, strings and (nested) tuples of them."""
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is tuple:
        return "(" + ",".join([_canonical(v) for v in value]) + ")"
    if kind is str:
        return repr(value)
    if isinstance(value, bool):
        raise TypeError("booleans are not allowed in event payloads (use ints)")
    if isinstance(value, tuple):  # named tuples
        return _canonical(tuple(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, int) or hasattr(value, "__index__"):  # int subclasses, numpy integers
        return str(int(value))
    raise TypeError(f"event payloads hold ints, strings and tuples, not {kind.__name__}")


class EventLog:
    """A running sha256 over the processed events, plus their count."""

    __slots__ = ("_hash", "count")

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0

    def record(self, time_s: float, event_class: int, payload: tuple[Any, ...] = ()) -> None:
        text = f"{float(time_s)!r}|{int(event_class)}|{_canonical(tuple(payload))}\n"
        self._hash.update(text.encode())
        self.count += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()
