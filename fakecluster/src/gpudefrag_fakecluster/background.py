"""The background loop thread of a fake cluster component (kubelet, job controller)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Loop:
    """One daemon thread running ``target`` (a loop that returns once :attr:`stopping` is set
    and waits on :attr:`wake`, which writers set to get it going).  :meth:`start` does nothing
    while the thread runs; :meth:`stop` asks it to end, wakes it and joins it."""

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        self.name, self._target = name, target
        self.stopping, self.wake = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Started and not stopped since."""
        return self._thread is not None

    def start(self) -> None:
        """Clear :attr:`stopping` and start the thread (unless it runs)."""
        if self._thread is None:
            self.stopping.clear()
            self._thread = threading.Thread(target=self._target, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Set :attr:`stopping` and :attr:`wake`, then wait up to ``timeout_s`` for the thread."""
        self.stopping.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
            self._thread = None
