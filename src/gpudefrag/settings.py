"""One schema for every setting: each range is declared once, on the field of the configuration
dataclass that holds the setting (``Annotated[int, Interval(ge=1, le=64)]``, the constraint types
of ``annotated_types``; a float's range is always closed on both sides, so it is finite), and
checked by pydantic at the edges of the program:

* ``--set KEY=VALUE`` overrides (:func:`check`, after :mod:`gpudefrag.experiments.common.overrides`
  applied them) name the key and the range;
* command-line flags that set such a field take :func:`flag` as their argparse ``type``, so a bad
  value is a one-line usage error naming the flag and the range;
* flags without a configuration field declare their range the same way (:func:`value`).

(A flag's plain numeral, ``42`` or ``0.5`` inside its range, is read without loading pydantic, so
that start-up stays fast; a test holds that reading to pydantic's answer on every numeric flag.)

Inside the program configurations are plain frozen dataclasses: building one in code checks
nothing (decisions stay as fast as before); values from users are checked here.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import re
import types
import typing
from functools import cache
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.errors import ConfigError

if typing.TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "Bounds",
    "Flag",
    "Fraction",
    "NonNegInt",
    "PosInt",
    "Seconds",
    "bounds_of",
    "check",
    "flag",
    "value",
]

Seconds = Annotated[float, Interval(ge=0, le=366 * 86_400)]
"""A duration of at most a year."""
PosInt = Annotated[int, Interval(ge=1)]
NonNegInt = Annotated[int, Interval(ge=0)]
Fraction = Annotated[float, Interval(ge=0, lt=1)]
"""A share in [0, 1)."""


@dataclasses.dataclass(frozen=True)
class Bounds:
    """A field's range: the base type and the bounds pydantic checks (``None``: no bound)."""

    kind: type
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    optional: bool = False

    def rule(self) -> str:
        """``an integer in 1..64``, ``a finite number > 0``, ``true or false``..."""
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return "a string"
        name = "an integer" if self.kind is int else "a finite number"
        if self.kind is int and self.ge is not None and self.le is not None:
            text = f"{name} in {_num(self.ge)}..{_num(self.le)}"
        else:
            parts = [
                f"{op} {_num(v)}"
                for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
                if v is not None
            ]
            text = f"{name} {' and '.join(parts)}" if parts else name
        return text + (" or none" if self.optional else "")


def _num(v: float) -> str:
    return f"{int(v):,}".replace(",", "_") if float(v).is_integer() and abs(v) >= 10_000 else f"{v:g}"


def bounds_of(annotation: Any) -> Bounds:
    """The :class:`Bounds` of an ``Annotated`` field type (``int | None`` counts as optional)."""
    base = annotation
    metadata: list[Any] = []
    if typing.get_origin(base) is Annotated:
        base, *extras = typing.get_args(base)
        for extra in extras:
            metadata += list(getattr(extra, "metadata", [extra]))
    optional = False
    args = typing.get_args(base)
    if args and type(None) in args:
        optional = True
        base = next(a for a in args if a is not type(None))
        if typing.get_origin(base) is Annotated:
            inner, *extras = typing.get_args(base)
            base = inner
            for extra in extras:
                metadata += list(getattr(extra, "metadata", [extra]))
    found: dict[str, float] = {}
    for m in metadata:
        for name in ("ge", "gt", "le", "lt"):
            if getattr(m, name, None) is not None:
                found[name] = float(getattr(m, name))
    kind = base if base in (int, float, bool, str) else str
    return Bounds(kind, optional=optional, **found)


@cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter  # imported when a value is checked, not at start-up

    return TypeAdapter(annotation)


class Flag:
    """An argparse ``type`` checking one value against a schema type (module docstring).  The
    type may be given as a function returning it, resolved at first use, so that declaring a
    flag does not load the module that declares its field."""

    def __init__(self, annotation: Any) -> None:
        self._annotation = annotation
        self._resolved = not isinstance(annotation, types.FunctionType)

    @property
    def annotation(self) -> Any:
        if not self._resolved:
            self._annotation = self._annotation()
            self._resolved = True
        return self._annotation

    @property
    def bounds(self) -> Bounds:
        return bounds_of(self.annotation)

    @property
    def __name__(self) -> str:  # argparse names the type in some messages
        return self.bounds.rule()

    def __call__(self, text: str) -> Any:
        text = text.strip()
        bounds = self.bounds
        if bounds.optional and text.lower() == "none":
            return None
        if bounds.kind is float and text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise argparse.ArgumentTypeError(f"must be {bounds.rule()}, got {text!r}")
        plain = _plain_number(bounds, text)
        if plain is not None:
            return plain
        from pydantic import ValidationError

        try:
            return _adapter(self.annotation).validate_python(text)
        except ValidationError:
            raise argparse.ArgumentTypeError(f"must be {bounds.rule()}, got {text!r}") from None


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _plain_number(bounds: Bounds, text: str) -> int | float | None:
    """The value of a plain numeral (``42``, ``-3``, ``0.5``, ``1e3``) inside ``bounds``, read
    without loading pydantic (a flag's check costs nothing at start-up); ``None`` for anything
    else (another kind, another spelling, out of range), which pydantic then decides."""
    number: int | float
    if len(text) > 32:  # Python refuses int() of very long strings; pydantic decides those
        return None
    if bounds.kind is int and _INTEGER.fullmatch(text):
        number = int(text)
    elif bounds.kind is float and _DECIMAL.fullmatch(text):
        number = float(text)
        if not math.isfinite(number):
            return None
    else:
        return None
    inside = (
        (bounds.ge is None or number >= bounds.ge)
        and (bounds.gt is None or number > bounds.gt)
        and (bounds.le is None or number <= bounds.le)
        and (bounds.lt is None or number < bounds.lt)
    )
    return number if inside else None


def flag(owner: type | str, name: str) -> Flag:
    """The argparse ``type`` of a flag that sets field ``name`` of dataclass ``owner`` (or
    ``"module:Class"``, imported when the flag is first used)."""
    if isinstance(owner, str):
        module, _, cls = owner.partition(":")

        def resolve() -> Any:
            return _hints(getattr(importlib.import_module(module), cls))[name]

        return Flag(resolve)
    return Flag(_hints(owner)[name])


def value(annotation: Any) -> Flag:
    """The argparse ``type`` of a flag with no configuration field: its range given here."""
    return Flag(annotation)


@cache
def _hints(owner: type) -> dict[str, Any]:
    """The field annotations of ``owner``, resolved; a field whose annotation names a type only
    the type checker imports (``if TYPE_CHECKING``) is left out."""
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except NameError:
        pass
    import sys

    namespace = dict(vars(sys.modules[owner.__module__]))
    out: dict[str, Any] = {}
    for name, text in getattr(owner, "__annotations__", {}).items():
        try:
            out[name] = typing.get_type_hints(
                type("_One", (), {"__annotations__": {name: text}}), namespace, include_extras=True
            )[name]
        except NameError:
            continue
    return out


def _as_dict(config: Any) -> dict[str, Any]:
    return {
        f.name: _as_dict(getattr(config, f.name))
        if dataclasses.is_dataclass(getattr(config, f.name))
        else getattr(config, f.name)
        for f in dataclasses.fields(config)
    }


def check(config: Any, label: str = "") -> Any:
    """``config`` (a dataclass instance) if every field is in its declared range, else a
    :class:`ConfigError` naming the first bad key (``planner.max_moves``, ``loads.1`` for an item
    of a tuple) and its range, after ``label`` (e.g. ``--set``)."""
    from pydantic import ValidationError

    try:
        _adapter(typing.cast(Any, type(config))).validate_python(_as_dict(config), strict=False)
    except ValidationError as e:
        loc = [p for p in e.errors()[0]["loc"] if isinstance(p, (int, str))]
        current: Any = config
        annotation: Any = None
        for part in loc:
            if isinstance(part, int):
                args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
                annotation = args[0] if args else None
                current = current[part]
            else:
                annotation = _hints(typing.cast(Any, type(current)))[part]
                current = getattr(current, part)
        rule = bounds_of(annotation).rule() if annotation is not None else e.errors()[0]["msg"]
        where = ".".join(str(p) for p in loc)
        raise ConfigError(
            f"{label + ' ' if label else ''}{where}={_shown(current)}: must be {rule}"
        ) from None
    return config


def _shown(v: Any) -> str:
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return str(int(v)) if abs(v) < 1e15 else f"{v:g}"
    return str(v).lower() if isinstance(v, bool) else str(v)
