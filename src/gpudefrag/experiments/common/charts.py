"""Charts of the reports: a figure is written to its PNG through a temporary sibling (never a
half-written file), its folder made, the figure closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["save_png"]


def save_png(fig: Any, path: Path, dpi: int = 110) -> Path:
    """Lay ``fig`` out, write it to ``path`` atomically and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.png")
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(path)
    return path
