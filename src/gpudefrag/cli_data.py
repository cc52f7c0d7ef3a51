"""``gpudefrag data list | fetch | verify``: registered dataset files.

:func:`add_data_commands` registers the ``data`` command on the main CLI's subparsers object.
Every handler is ``(args) -> int`` (the exit code) and is set with ``set_defaults(func=...)``.
Unknown dataset names raise :class:`~gpudefrag.errors.ConfigError` for the main CLI to print.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from gpudefrag.data import catalog, store
from gpudefrag.errors import EXIT_USAGE, ConfigError, DataError

__all__ = ["add_data_commands", "cmd_data_fetch", "cmd_data_list", "cmd_data_verify"]

_ParserT = TypeVar("_ParserT", bound=argparse.ArgumentParser)


def _table(rows: Sequence[tuple[str, ...]], right: frozenset[int] = frozenset()) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def cmd_data_list(args: argparse.Namespace) -> int:
    """Print name, group, bytes, status (in mirror / cached / missing) and licence."""
    rows = [("name", "group", "bytes", "status", "licence")]
    for item in catalog.list_datasets():
        e = item.entry
        status = (
            item.status
            if (e.url is not None or e.archive is not None or item.status != "missing")
            else "missing (mirror only)"
        )
        rows.append((e.name, e.group, str(e.size), status, e.licence))
    print(_table(rows, right=frozenset({2})))
    mirror = store.mirror_dir()
    print(f"\nmirror: {mirror if mirror is not None else f'(unset; set {store.MIRROR_ENV})'}")
    print(f"cache:  {store.cache_dir()}")
    return 0


def cmd_data_verify(args: argparse.Namespace) -> int:
    """Re-hash present files; 0 if every present file matches, 2 otherwise."""
    results = catalog.verify(args.names or None)
    for result in results:
        print(result.describe())
    bad = [r for r in results if r.status == "mismatch"]
    present = sum(1 for r in results if r.status != "missing")
    print(
        f"\n{present - len(bad)} of {present} present file(s) match; "
        f"{len(results) - present} missing; {len(bad)} mismatched."
    )
    return EXIT_USAGE if bad else 0


def cmd_data_fetch(args: argparse.Namespace) -> int:
    """Fetch the named files (or all with --all) into the cache, verifying each."""
    if args.all and args.names:
        raise ConfigError("data fetch: give dataset names or --all, not both")
    if not args.all and not args.names:
        raise ConfigError("data fetch: name the datasets to fetch (see `gpudefrag data list`) or pass --all")

    def report(result: catalog.FetchResult) -> None:
        where = f": {result.path}" if result.path is not None else ""
        line = f"{result.status:<10} {result.entry.name}{where}"
        if result.ok and result.message:
            line += f" ({result.message})"
        print(line, flush=True)
        if not result.ok:
            print(f"error: {result.entry.name}: {result.message}", file=sys.stderr)

    try:
        catalog.fetch(None if args.all else args.names, progress=not args.no_progress, on_result=report)
    except DataError:
        return EXIT_USAGE  # each failure was already printed
    return 0


def _help(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    return handler


def add_data_commands(subparsers: argparse._SubParsersAction[_ParserT]) -> _ParserT:
    """Register ``data list | fetch | verify`` on an argparse subparsers object; returns the
    ``data`` parser."""
    data = subparsers.add_parser(
        "data",
        help="list, fetch and verify the registered dataset files",
        description=f"Dataset files are looked up in ${store.MIRROR_ENV} (folders openb/, "
        f"fgd-published/, go-math-rand/), then in the cache (${store.CACHE_ENV}, "
        "default ~/.cache/gpudefrag), then downloaded from pinned upstream URLs.",
    )
    data.set_defaults(func=_help(data))
    sub = data.add_subparsers(dest="data_command", metavar="{list,fetch,verify}")

    p_list = sub.add_parser("list", help="show every registered file and where it is")
    p_list.set_defaults(func=cmd_data_list)

    p_fetch = sub.add_parser("fetch", help="download (and verify) files into the cache")
    p_fetch.add_argument(
        "names", nargs="*", metavar="NAME", help="dataset names or relative paths (see `data list`)"
    )
    p_fetch.add_argument("--all", action="store_true", help="fetch every file that has a URL")
    p_fetch.add_argument("--no-progress", action="store_true", help="no progress bar")
    p_fetch.set_defaults(func=cmd_data_fetch)

    p_verify = sub.add_parser("verify", help="re-check the SHA-256 of present files")
    p_verify.add_argument("names", nargs="*", metavar="NAME", help="dataset names (default: all)")
    p_verify.set_defaults(func=cmd_data_verify)
    return data
