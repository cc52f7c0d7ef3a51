"""``KEY=VALUE`` overrides of a frozen experiment configuration (``gpudefrag suite 1b --set``).

A key names a scalar field of the configuration (``plans_per_tick``) or of one of its nested
configurations (``planner.harm_weight``, ``solver.deterministic_time``).  The value is parsed
as the field's current type (int, float, bool as ``true``/``false``, str); a field whose value
is ``None`` takes an int, then a float, then ``none``, and any field declared optional
(``int | None``) takes ``none``.  Unknown keys, tuple fields,
unparsable values and values outside the field's declared range (:mod:`gpudefrag.settings`)
raise :class:`ConfigError` naming the key and what is accepted.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, is_dataclass, replace
from typing import Any

from gpudefrag.errors import ConfigError
from gpudefrag.settings import check, flag


def _parse(key: str, text: str, current: Any, optional: bool = False) -> Any:
    if optional and text.lower() == "none":
        return None
    try:
        if isinstance(current, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
        if isinstance(current, str):
            return text
        if current is None:
            if text.lower() == "none":
                return None
            try:
                return int(text)
            except ValueError:
                return float(text)
    except ValueError:
        kind = "true or false" if isinstance(current, bool) else type(current).__name__
        raise ConfigError(f"--set {key}={text}: expected {kind}") from None
    raise ConfigError(f"--set {key}: {type(current).__name__} fields cannot be set this way")


def _scalar_keys(config: Any, prefix: str = "") -> list[str]:
    out = []
    for f in fields(config):
        value = getattr(config, f.name)
        if is_dataclass(value):
            out += _scalar_keys(value, f"{prefix}{f.name}.")
        elif not isinstance(value, (tuple, list, dict)):
            out.append(prefix + f.name)
    return out


def apply_overrides(config: Any, items: list[str]) -> Any:
    """``config`` with every ``KEY=VALUE`` of ``items`` applied (a new frozen instance), each
    value checked against its field's declared range and the whole against every range
    (:func:`gpudefrag.settings.check`)."""
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: use KEY=VALUE, e.g. planner.harm_weight=3")
        config = _set(config, key.strip(), key.strip().split("."), text.strip(), config)
    return check(config, "--set")


def _set(config: Any, key: str, path: list[str], text: str, root: Any) -> Any:
    types = {f.name: str(f.type) for f in fields(config)}  # annotations as written
    head = path[0]
    value = getattr(config, head, None) if head in types else None
    if head not in types or (len(path) > 1) != is_dataclass(value):
        known = ", ".join(_scalar_keys(root))
        raise ConfigError(f"--set {key}: unknown setting (known: {known})")
    if len(path) > 1:
        return replace(config, **{head: _set(value, key, path[1:], text, root)})
    parsed = _parse(key, text, value, "None" in types[head])
    if parsed is not None and not isinstance(parsed, str):
        try:
            flag(type(config), head)(text)  # the field's declared range
        except argparse.ArgumentTypeError as e:
            raise ConfigError(f"--set {key}={text}: {e}") from None
    try:
        return replace(config, **{head: parsed})
    except ValueError as e:  # a check of the configuration itself
        raise ConfigError(f"--set {key}={text}: {e}") from None
