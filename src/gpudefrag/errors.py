"""Errors that reach the user as one clear line and exit code 2 (never a traceback).

Every input problem names where it is: the file, and when known the line and the column.
The CLI catches :class:`GpudefragError` and prints ``str(error)``.
"""

from __future__ import annotations

from pathlib import Path

EXIT_USAGE = 2


class GpudefragError(Exception):
    """Base class of errors shown to the user without a traceback (exit code 2)."""

    exit_code = EXIT_USAGE


class InputError(GpudefragError):
    """Malformed input: names the file, the 1-based line and the column (field)."""

    def __init__(
        self, path: str | Path, message: str, line: int | None = None, column: str | None = None
    ) -> None:
        self.path = str(path)
        self.line = line
        self.column = column
        self.message = message
        where = self.path
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column '{column}'"
        super().__init__(f"{where}: {message}")


class DataError(GpudefragError):
    """A dataset is missing, cannot be downloaded, or fails its checksum."""


class ConfigError(GpudefragError):
    """An unknown name or an invalid option value (lists what exists where it helps)."""
