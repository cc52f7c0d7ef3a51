"""Argument types every command shares, each with its range declared once (:mod:`gpudefrag.settings`):
a bad value is a one-line usage error naming the flag and what it accepts (exit 2).

* single values: :data:`SEED`, :data:`JOBS`, :data:`LOAD`, ... (argparse ``type``s);
* comma lists: :func:`seed_list` (``42-51`` or ``42,43``), :func:`number_list` (each item in a
  range), :func:`name_list` (each item a known name).

A list type carries what it checks its items with (``item`` or ``known``), so a test can drive
every flag with values outside its range.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.errors import ConfigError
from gpudefrag.settings import Flag, value

__all__ = [
    "GPUS",
    "JOBS",
    "LOAD",
    "POLICY_NAMES_CLI",
    "SEED",
    "NameList",
    "NumberList",
    "SeedList",
    "name_list",
    "number_list",
    "refuse",
    "seed_list",
    "workload_name",
]

MAX_SEED = 2**32 - 1
SEED = value(Annotated[int, Interval(ge=0, le=MAX_SEED)])
"""A seed of the explicit generators (numpy's and Go's take it)."""
JOBS = value(Annotated[int, Interval(ge=1, le=1024)])
"""Worker processes."""
LOAD = value(Annotated[float, Interval(gt=0, le=100)])
"""An offered load (a multiple of the cluster's capacity)."""
GPUS = value(Annotated[int, Interval(ge=8, le=100_000_000)])
"""A cluster size in GPUs."""
MAX_ITEMS = 10_000
"""Items a list flag takes at most."""
POLICY_NAMES_CLI = ("fgd", "bestfit", "gpupacking", "gpuclustering", "dotprod", "random")
"""The per-pod policies (:data:`gpudefrag.policies.registry.POLICY_NAMES`, which a test keeps
equal), named here so that the parser does not load them."""


def refuse(args: argparse.Namespace, flags: dict[str, str], why: str) -> None:
    """A :class:`ConfigError` when any of ``flags`` (dest -> flag) was given: it does not apply."""
    given = [f for dest, f in flags.items() if getattr(args, dest, None) not in (None, False)]
    if given:
        raise ConfigError(f"{', '.join(given)}: {why}")


def workload_name(text: str) -> str:
    """A registered openb pod list (:func:`gpudefrag.workloads.openb.workload_stem`), as given."""
    from gpudefrag.workloads.openb import workload_stem

    try:
        workload_stem(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _items(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


class NumberList:
    """A comma list of numbers, each checked by ``item`` (a :class:`~gpudefrag.settings.Flag`)."""

    def __init__(self, item: Flag, example: str) -> None:
        self.item = item
        self.example = example
        self.__name__ = f"a list of {item.bounds.rule()}s"

    def __call__(self, text: str) -> list[Any]:
        parts = _items(text)
        if not parts or len(parts) > MAX_ITEMS:
            raise argparse.ArgumentTypeError(
                f"need 1 to {MAX_ITEMS:,} items (e.g. {self.example}), got {text!r}"
            )
        out = []
        for part in parts:
            try:
                out.append(self.item(part))
            except argparse.ArgumentTypeError:
                raise argparse.ArgumentTypeError(
                    f"each item must be {self.item.bounds.rule()} (e.g. {self.example}), got {part!r}"
                ) from None
        return out


def number_list(item: Flag, example: str) -> NumberList:
    return NumberList(item, example)


class SeedList(NumberList):
    """Seeds as ``42-51``, ``42,43,50`` or a mix (each a :data:`SEED`)."""

    def __init__(self) -> None:
        super().__init__(SEED, "42-51 or 42,43")

    def __call__(self, text: str) -> list[int]:
        seeds: list[int] = []
        for part in _items(text):
            lo, dash, hi = part.partition("-") if not part.startswith("-") else (part, "", "")
            if not dash:
                seeds += NumberList.__call__(self, part)
                continue
            a, b = NumberList.__call__(self, f"{lo},{hi}")
            if b < a or b - a >= MAX_ITEMS:
                raise argparse.ArgumentTypeError(f"invalid seed range {part!r} (use e.g. 42-51)")
            seeds += range(a, b + 1)
        if not seeds or len(seeds) > MAX_ITEMS:
            raise argparse.ArgumentTypeError(
                f"need 1 to {MAX_ITEMS:,} seeds (e.g. 42-51 or 42,43), got {text!r}"
            )
        return seeds


def seed_list() -> SeedList:
    return SeedList()


class NameList:
    """A comma list of names, each one of ``known`` (in the order given, no repeats)."""

    def __init__(self, known: Sequence[str] | Callable[[], Sequence[str]], what: str) -> None:
        self._known = known
        self.what = what
        self.__name__ = f"a list of {what}"

    @property
    def known(self) -> tuple[str, ...]:
        return tuple(self._known() if callable(self._known) else self._known)

    def __call__(self, text: str) -> list[str]:
        names = list(dict.fromkeys(_items(text)))
        if not names:
            raise argparse.ArgumentTypeError(f"need at least one of {', '.join(self.known)}")
        unknown = [n for n in names if n not in self.known]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {self.what} {', '.join(unknown)} (known: {', '.join(self.known)})"
            )
        return names


def name_list(known: Sequence[str] | Callable[[], Sequence[str]], what: str) -> NameList:
    return NameList(known, what)
