"""Watches on the fake store: one event per write, seen through a watcher's namespace and
selectors (an update into its selectors is ADDED, out of them DELETED), queued per watcher."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import msgspec

from gpudefrag_fakecluster.api import KINDS, ApiError, clone, with_meta
from gpudefrag_fakecluster.selectors import (
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)


class Event:
    """One write as watchers see it: ``obj`` the new state (the last one for DELETED), ``prev``
    the one before (for selector transitions); the JSON line is encoded once and shared."""

    __slots__ = ("_line", "kind", "obj", "prev", "rv", "type")

    def __init__(
        self, rv: int, type_: str, kind: str, obj: dict[str, Any], prev: dict[str, Any] | None
    ) -> None:
        self.rv, self.type, self.kind, self.obj, self.prev = rv, type_, kind, obj, prev
        self._line: bytes | None = None

    def line(self) -> bytes:
        """``{"type": ..., "object": ...}`` as JSON bytes plus a newline."""
        if self._line is None:
            self._line = msgspec.json.encode({"type": self.type, "object": self.obj}) + b"\n"
        return self._line


def matcher(label_selector: str | None, field_selector: str | None) -> Callable[[dict[str, Any]], bool]:
    """A predicate for objects from selector strings; 400 BadRequest when malformed."""
    try:
        labels, fields = parse_label_selector(label_selector), parse_field_selector(field_selector)
    except ValueError as e:
        raise ApiError(400, "BadRequest", str(e)) from e
    return lambda o: labels_match(labels, o["metadata"].get("labels")) and fields_match(fields, o)


class WatchOwner(Protocol):
    """What feeds a watch (the store): it is told when the watch ends."""

    def forget_watch(self, w: Watch) -> None: ...


class Watch:
    """A stream of ``(event_type, obj)``; iterate, or poll with :meth:`next`.  Ends after an
    ERROR event, :meth:`end` (once drained) or :meth:`close`."""

    def __init__(
        self, store: WatchOwner, kind: str, namespace: str | None, labels: str | None, fields: str | None
    ) -> None:
        self.kind, self._store = kind, store
        self._namespace = namespace if KINDS[kind].namespaced else None
        self._plain = not labels and not fields
        self._match = matcher(labels, fields)
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Event] = deque()
        self._closed = False
        self._final = False  # nothing will follow the queued events

    @property
    def finished(self) -> bool:
        """Closed, or ended and drained."""
        return self._closed or (self._final and not self._queue)

    def offer(self, ev: Event) -> None:
        """Queue ``ev`` as this watcher sees it: an update into (out of) its selectors is ADDED
        (DELETED, with the previous content at the new version)."""
        if self._namespace is not None and ev.obj["metadata"].get("namespace") != self._namespace:
            return
        if not self._plain:
            now = ev.type != "DELETED" and self._match(ev.obj)
            before = ev.prev is not None and self._match(ev.prev)
            if not now and not before:
                return
            if now and not before and ev.type != "ADDED":
                ev = Event(ev.rv, "ADDED", ev.kind, ev.obj, None)
            elif before and not now and ev.type != "DELETED" and ev.prev is not None:
                ev = Event(ev.rv, "DELETED", ev.kind, with_meta(ev.prev, resourceVersion=str(ev.rv)), None)
        self.push(ev)

    def push(self, ev: Event, final: bool = False) -> None:
        with self._cond:
            if not self._closed:
                self._queue.append(ev)
                self._final = self._final or final
                self._cond.notify()

    def next_event(self, timeout_s: float | None = None) -> Event | None:
        """The next event (shared: never modify it), or ``None`` on timeout or at the end."""
        with self._cond:
            if not self._queue and not self.finished:
                self._cond.wait(timeout_s)
            return self._queue.popleft() if self._queue and not self._closed else None

    def next(self, timeout_s: float | None = None) -> tuple[str, dict[str, Any]] | None:
        """The next ``(event_type, private copy of the object)``, or ``None`` (timeout, end)."""
        ev = self.next_event(timeout_s)
        return None if ev is None else (ev.type, clone(ev.obj))

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        while not self.finished:
            item = self.next(None)
            if item is not None:
                yield item

    def end(self) -> None:
        """End the watch after the events already queued (a server stopping)."""
        self._store.forget_watch(self)
        with self._cond:
            self._final = True
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the watch now and free it."""
        self._store.forget_watch(self)
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
