"""A time-driven run's processed events as a JSON-lines file, written atomically.

One line per processed event, in processing order: ``{"t_s": <float>, "event": "<EVENT NAME>",
"payload": [...]}`` with the name from :class:`gpudefrag.sim.events.Event` and what the event
log recorded of it (the text the event hash covers) as a list (numpy scalars as plain
numbers), so the file reproduces the run's ``event_hash``.  The lines go to a temporary file in the
target's folder, renamed onto the target only when the run completes; a failed run leaves
nothing behind.  A target that cannot be written is a :class:`ConfigError` raised before the run.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import numpy as np

from gpudefrag.errors import ConfigError
from gpudefrag.sim.events import Event


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and tuples as lists (for JSON)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def event_record(t_s: float, event_class: int, payload: tuple) -> dict[str, Any]:
    """One event as the JSON object written on its line."""
    return {"t_s": float(t_s), "event": Event(event_class).name, "payload": _plain(payload)}


def check_output_file(path: Path, option: str) -> None:
    """A :class:`ConfigError` naming ``option`` unless ``path`` can be a new file (checked
    before the run, so a long run never fails at its end for a bad path)."""
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder, not a file")
    if not path.parent.is_dir():
        raise ConfigError(f"{option} {path}: folder {path.parent} does not exist")


class EventLogFile:
    """Context manager; inside it, the object is a simulator event hook writing one line per event.

    ``count`` is the number of lines written.  The file appears at ``path`` only if the block
    completes without an exception.
    """

    def __init__(self, path: Path, option: str = "--events") -> None:
        self.path = Path(path)
        self.option = option
        self.count = 0
        self._tmp: str | None = None
        self._fh: TextIO | None = None

    def _fail(self, exc: OSError) -> ConfigError:
        return ConfigError(f"{self.option} {self.path}: cannot write ({exc.strerror or exc})")

    def __enter__(self) -> EventLogFile:
        check_output_file(self.path, self.option)
        folder = self.path.parent
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=folder)
        except OSError as exc:
            raise self._fail(exc) from None
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def __call__(self, sim: Any, t: float, cls: int, payload: tuple) -> None:
        """The event hook, ``hook(sim, t, cls, payload)``: ``sim`` is ignored; the event is one line."""
        assert self._fh is not None  # opened by __enter__; the hook is only called inside the block
        try:
            self._fh.write(json.dumps(event_record(t, cls, payload)) + "\n")
        except OSError as exc:  # e.g. the disk filled up mid-run
            raise self._fail(exc) from None
        self.count += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._fh is not None and self._tmp is not None
        try:
            self._fh.close()
            if exc_type is None:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self._tmp, 0o666 & ~umask)  # mkstemp creates 0600; an ordinary file
                os.replace(self._tmp, self.path)
                self._tmp = None
        except OSError as error:
            if exc_type is None:
                raise self._fail(error) from None
        finally:
            if self._tmp is not None:
                Path(self._tmp).unlink(missing_ok=True)
