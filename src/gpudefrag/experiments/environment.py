"""What a report states about how it was made: machine, versions, data checksums."""

from __future__ import annotations

import os
import platform
from importlib.metadata import version

from gpudefrag import __version__


def environment_lines(datasets: list[str]) -> list[str]:
    """Markdown bullet lines: gpudefrag / Python / OR-Tools / numpy versions, machine, data sha256."""
    import numpy

    from gpudefrag.data import registry

    lines = [
        f"- gpudefrag {__version__}, Python {platform.python_version()}, OR-Tools {version('ortools')}, "
        f"numpy {numpy.__version__}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
    ]
    for name in datasets:
        entry = registry.get(name)
        lines.append(f"- data `{entry.relpath}` sha256 `{entry.sha256}`")
    return lines
