"""Strict CSV reading for every trace loader: a file opened as UTF-8 text (a BOM allowed), a
header with the required columns, and rows with as many fields as the header; any problem is an
:class:`~gpudefrag.errors.InputError` naming the file, the 1-based line and the column."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpudefrag.errors import InputError

if TYPE_CHECKING:
    from _csv import Reader

__all__ = ["iter_rows", "open_rows", "read_header", "uint_field", "utf8_error"]

INT64_MAX = (1 << 63) - 1
NEGATIVE_RE = re.compile(r"-[0-9]+")


def open_rows(path: Path) -> TextIO:
    try:
        fh = open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115 (closed by the caller)
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, not a CSV file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    return fh


def utf8_error(path: str) -> InputError:
    """The decoder works on blocks, so find the first undecodable line again, in binary."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return InputError(
                    path,
                    f"not valid UTF-8 text (byte 0x{raw[exc.start]:02x} at character {exc.start + 1})",
                    number,
                )
    return InputError(path, "not valid UTF-8 text")


def read_header(
    reader: Reader, path: str, required: tuple[str, ...], optional: tuple[str, ...]
) -> dict[str, int]:
    expected = ",".join(required + optional) if optional else ",".join(required)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError(path, f"empty file; expected a header line '{expected}'", 1, required[0]) from None
    except UnicodeDecodeError:
        raise utf8_error(path) from None
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV header: {exc}", 1) from None
    if not header or header == [""]:
        raise InputError(path, f"missing header; expected '{expected}'", 1, required[0])
    known = set(required) | set(optional)
    positions: dict[str, int] = {}
    for i, name in enumerate(header):
        if name not in known:
            hint = f" (did you mean {name.strip()!r}?)" if name.strip() in known else ""
            raise InputError(path, f"unknown column {name!r}{hint}; expected columns: {expected}", 1, name)
        if name in positions:
            raise InputError(path, "duplicate column in the header", 1, name)
        positions[name] = i
    for name in required:
        if name not in positions:
            raise InputError(
                path, f"missing required column; the header must include: {', '.join(required)}", 1, name
            )
    return positions


def iter_rows(
    reader: Reader, path: str, header_len: int, header: list[str]
) -> Iterator[tuple[int, list[str]]]:
    """Yield (line, row) for data rows; blank lines are errors unless trailing."""
    blank_line = None
    try:
        for row in reader:
            line = reader.line_num
            if len(row) == header_len:
                if blank_line is not None:
                    raise InputError(path, "blank line inside the data", blank_line)
                yield line, row
                continue
            if not row:
                if blank_line is None:
                    blank_line = line
                continue
            if blank_line is not None:
                raise InputError(path, "blank line inside the data", blank_line)
            if len(row) < header_len:
                missing = header[len(row)]
                raise InputError(
                    path,
                    f"truncated row: {len(row)} fields, the header has "
                    f"{header_len} (column '{missing}' onwards missing)",
                    line,
                    missing,
                )
            raise InputError(
                path,
                f"too many fields: {len(row)}, the header has {header_len}",
                line,
                f"#{header_len + 1} (after '{header[-1]}')",
            )
    except UnicodeDecodeError:
        raise utf8_error(path) from None
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV: {exc}", reader.line_num) from None


def _bad_uint(text: str, path: str, line: int, column: str) -> int:
    """Slow path of :func:`uint_field`: return a large valid value or raise a precise error."""
    if text == "":
        raise InputError(path, "empty required field", line, column)
    if text.isascii() and text.isdigit():
        value = int(text)
        if value <= INT64_MAX:
            return value
        raise InputError(path, f"value {text} is too large", line, column)
    if NEGATIVE_RE.fullmatch(text):
        raise InputError(path, f"negative value {text}; expected an integer >= 0", line, column)
    raise InputError(path, f"non-numeric value {text!r}; expected an integer >= 0", line, column)


def uint_field(text: str, path: str, line: int, column: str) -> int:
    """A field that must be an integer >= 0 (an error naming the file, line and column)."""
    if len(text) < 19 and text.isascii() and text.isdigit():
        return int(text)
    return _bad_uint(text, path, line, column)
