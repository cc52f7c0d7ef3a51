"""Kubernetes resource quantities (``"500m"``, ``"4Gi"``, ``"1e3"``) read exactly.

A quantity is an optional sign, a decimal number (``"2"``, ``"1.5"``, ``".5"``, ``"5."``) and one
suffix: binary (``Ki Mi Gi Ti Pi Ei``: powers of 1024), decimal (``n u m k M G T P E``: powers of
1000; none = 1) or a decimal exponent (``e3``, ``E-2``).  ``"1E"`` is exa, ``"1E3"`` is 1000.
Values are read as exact fractions, so rounding happens once, in the unit wanted:

* :func:`cpu_milli` rounds *up* to whole millicores (as the API server does: ``"0.1m"`` -> 1);
* :func:`memory_mib` rounds *down* to whole MiB (``"1G"`` = 10^9 bytes -> 953).

Plain numbers (``int``/``float``, as YAML may give them) are read in the base unit (cores,
bytes).  Negative, non-finite or malformed values raise :class:`QuantityError`.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["QuantityError", "cpu_milli", "memory_mib", "parse_quantity"]

MIB_BYTES = 1 << 20

_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_PATTERN = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)")


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity (or not a usable one: negative, too large)."""


def parse_quantity(q: str | int | float) -> Fraction:
    """The exact value of a quantity in its base unit (module docstring)."""
    if isinstance(q, bool):
        raise QuantityError(f"{q!r} is not a quantity")
    if isinstance(q, int):
        return Fraction(q)
    if isinstance(q, float):
        if not math.isfinite(q):
            raise QuantityError(f"{q!r} is not a finite quantity")
        return Fraction(repr(q))  # the decimal the user wrote, not the binary float's expansion
    if not isinstance(q, str):
        raise QuantityError(f"{q!r} is not a quantity")
    m = _PATTERN.fullmatch(q.strip())
    if m is None:
        raise QuantityError(f"{q!r} is not a quantity")
    sign, number, suffix = m.groups()
    value = Fraction(number)
    if suffix in _BINARY:
        value *= _BINARY[suffix]
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        exponent = int(suffix[1:])
        if abs(exponent) > 30:
            raise QuantityError(f"{q!r}: exponent out of range")
        value *= Fraction(10) ** exponent
    else:
        value *= Fraction(10) ** _DECIMAL[suffix]
    return -value if sign == "-" else value


def _non_negative(q: str | int | float) -> Fraction:
    value = parse_quantity(q)
    if value < 0:
        raise QuantityError(f"{q!r} is negative")
    return value


def cpu_milli(q: str | int | float) -> int:
    """CPU in millicores, rounded up: ``"500m"`` -> 500, ``"2"`` -> 2000, ``"1.5"`` -> 1500."""
    return math.ceil(_non_negative(q) * 1000)


def memory_mib(q: str | int | float) -> int:
    """Memory in MiB, rounded down: ``"4Gi"`` -> 4096, ``"512Mi"`` -> 512, ``"1G"`` -> 953,
    ``1048576`` (bytes) -> 1."""
    return math.floor(_non_negative(q) / MIB_BYTES)
