"""A suite's ``runs.csv``: one row per run, the columns that name it, then every metric any run
reports (sorted by name; a metric a run lacks is left empty), written atomically."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpudefrag.experiments.common.atomic import atomic_write

__all__ = ["write_runs_csv"]


def write_runs_csv(
    path: Path, id_columns: Sequence[str], rows: Sequence[tuple[Sequence[object], Mapping[str, object]]]
) -> Path:
    """Write ``rows`` (each: its values of ``id_columns``, its metrics) to ``path``."""
    keys = sorted({k for _, metrics in rows for k in metrics})
    with atomic_write(path) as f:
        w = csv.writer(f)
        w.writerow([*id_columns, *keys])
        for ids, metrics in rows:
            w.writerow([*ids, *(metrics.get(k, "") for k in keys)])
    return path
