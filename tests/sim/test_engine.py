"""The one event loop: steps at event times and wake times, events in key order (those pushed
while handling included), the end exclusive unless asked, time accounted before each step."""

from __future__ import annotations

from typing import Any

from gpudefrag.sim.engine import EventQueue, run_events


def _trace(
    q: EventQueue, end_s: float, wake: list[float] | None = None, at_end: bool = False
) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []

    def on_event(t: float, cls: int, payload: Any) -> None:
        seen.append(("event", t, cls, payload))
        if payload == "spawn":  # an event pushed at the same time, of a lower class
            q.push(t, 0, "child")

    def after(t: float) -> None:
        seen.append(("after", t))
        if wake and t == wake[0]:
            wake.pop(0)

    def wake_s() -> float:
        return wake[0] if wake else float("inf")

    run_events(q, end_s, on_event, lambda t: seen.append(("advance", t)), after, wake_s, at_end)
    return seen


def test_events_in_key_order_those_pushed_at_the_same_time_included() -> None:
    q = EventQueue()
    q.push(5.0, 2, "b")
    q.push(5.0, 1, "spawn")
    q.push(3.0, 9, "a")
    assert _trace(q, 10.0) == [
        ("advance", 3.0),
        ("event", 3.0, 9, "a"),
        ("after", 3.0),
        ("advance", 5.0),
        ("event", 5.0, 1, "spawn"),
        ("event", 5.0, 0, "child"),
        ("event", 5.0, 2, "b"),
        ("after", 5.0),
        ("advance", 10.0),
    ]


def test_wake_times_make_steps_without_events() -> None:
    q = EventQueue()
    q.push(4.0, 0, "x")
    out = _trace(q, 6.0, wake=[2.0, 4.0])
    assert out == [
        ("advance", 2.0),
        ("after", 2.0),
        ("advance", 4.0),
        ("event", 4.0, 0, "x"),
        ("after", 4.0),
        ("advance", 6.0),
    ]


def test_the_end_is_exclusive_unless_events_at_the_end_are_asked_for() -> None:
    def queue() -> EventQueue:
        q = EventQueue()
        q.push(10.0, 0, "last")
        q.push(11.0, 0, "after the end")
        return q

    assert _trace(queue(), 10.0) == [("advance", 10.0)]
    assert _trace(queue(), 10.0, at_end=True) == [
        ("advance", 10.0),
        ("event", 10.0, 0, "last"),
        ("after", 10.0),
        ("advance", 10.0),
    ]
