"""What a report states about how it was made: machine, versions, data checksums, executor.

The executor is the one the last sweep in this process ran on: a sweep records it with
:func:`record_executor` before it starts, and :func:`environment_lines` states it (when one was
recorded) so that a report written after the sweep names where its runs executed.
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import version

from gpudefrag import __version__

_executor: list[str] = []  # the description of the last recorded executor, if any


def record_executor(description: str) -> None:
    """Remember where this process's current sweep runs (``RunExecutor.describe()``)."""
    _executor[:] = [description]


def recorded_executor() -> str | None:
    """The description :func:`record_executor` last received, or ``None``."""
    return _executor[0] if _executor else None


def environment_lines(datasets: list[str]) -> list[str]:
    """Markdown bullet lines: gpudefrag / Python / OR-Tools / numpy versions, machine, the
    recorded executor (if any), data sha256."""
    import numpy

    from gpudefrag.data import registry

    lines = [
        f"- gpudefrag {__version__}, Python {platform.python_version()}, OR-Tools {version('ortools')}, "
        f"numpy {numpy.__version__}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
    ]
    executor = recorded_executor()
    if executor is not None:
        lines.append(f"- executor: {executor}")
    for name in datasets:
        entry = registry.get(name)
        lines.append(f"- data `{entry.relpath}` sha256 `{entry.sha256}`")
    return lines
