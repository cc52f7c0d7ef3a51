"""Strict loader for the Philly trace as processed by Pollux (``philly-pollux/philly.csv``).

The file (registered as ``philly``; the Philly data is CC-BY-4.0, attribute Microsoft / the
ATC '19 paper) has the columns

* ``timestamp``: submission time ``YYYY-MM-DD HH:MM:SS`` (no time zone); rows are **not** sorted;
* ``duration``: run time in seconds, a number > 0;
* ``num_gpus``: the job's GPUs, an integer >= 1;
* ``gpu_time``: ``duration * num_gpus`` (checked, to a relative 1e-9);
* ``cluster``: the hashed Philly virtual cluster (VC) id, non-empty.

:func:`load_philly_csv` turns it into :class:`~gpudefrag.model.jobs.Job` s sorted by
``(submit_s, file order)``. ``submit_s`` counts seconds from the earliest timestamp **of the whole
file**, also when ``vc`` keeps only one virtual cluster, so that a per-VC replay shares the time
axis (and the windows) of the full trace. ``job_id`` is the 0-based data row in the file and
``name`` is ``"<cluster>-<row>"``. Problems raise :class:`~gpudefrag.errors.InputError` naming
the file, the 1-based line (the header is line 1) and the column.
"""

from __future__ import annotations

import csv
import os
import re
from datetime import datetime
from pathlib import Path

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.jobtrace import parse_float, parse_int
from gpudefrag.workloads.strict_csv import iter_rows, open_rows, read_header

__all__ = ["PHILLY_COLUMNS", "PHILLY_DATASET", "load_philly", "load_philly_csv", "philly_path"]

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
PHILLY_DATASET = "philly"

_TIMESTAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}")


def _timestamp(text: str, path: str, line: int) -> datetime:
    if not text:
        raise InputError(path, "empty required field", line, "timestamp")
    bad = f"bad timestamp {text!r}; expected YYYY-MM-DD HH:MM:SS"
    if not _TIMESTAMP_RE.fullmatch(text):
        raise InputError(path, bad, line, "timestamp")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InputError(path, bad + " (not a valid date or time)", line, "timestamp") from None


def load_philly_csv(path: str | os.PathLike[str], vc: str | None = None) -> list[Job]:
    """Load the Pollux ``philly.csv`` (see the module docstring); ``vc`` keeps one virtual cluster
    (:class:`ConfigError` listing the VCs if it has no job)."""
    src = Path(path)
    spath = str(src)
    rows: list[tuple[datetime, float, int, str]] = []
    with open_rows(src) as fh:
        reader = csv.reader(fh, strict=True)
        pos = read_header(reader, spath, PHILLY_COLUMNS, ())
        header = sorted(pos, key=pos.__getitem__)
        i_time, i_duration, i_gpus, i_gpu_time, i_cluster = (pos[c] for c in PHILLY_COLUMNS)
        for line, row in iter_rows(reader, spath, len(header), header):
            when = _timestamp(row[i_time], spath, line)
            duration = parse_float(row[i_duration], spath, line, "duration", minimum=0.0, strict=True)
            gpus = parse_int(row[i_gpus], spath, line, "num_gpus", minimum=1)
            gpu_time = parse_float(row[i_gpu_time], spath, line, "gpu_time", minimum=0.0, strict=True)
            if abs(gpu_time - duration * gpus) > 1e-9 * gpu_time:
                raise InputError(
                    spath,
                    f"gpu_time {row[i_gpu_time]} is not duration x num_gpus = {duration * gpus:g}",
                    line,
                    "gpu_time",
                )
            cluster = row[i_cluster]
            if not cluster:
                raise InputError(spath, "empty required field", line, "cluster")
            rows.append((when, duration, gpus, cluster))
    if not rows:
        raise InputError(spath, "no data rows after the header", 1)
    origin = min(r[0] for r in rows)
    jobs = [
        Job(i, (when - origin).total_seconds(), duration, gpus, name=f"{cluster}-{i}")
        for i, (when, duration, gpus, cluster) in enumerate(rows)
        if vc is None or cluster == vc
    ]
    if not jobs:
        vcs = sorted({r[3] for r in rows})
        raise ConfigError(f"{spath}: no job of virtual cluster {vc!r}; the VCs are: {', '.join(vcs)}")
    jobs.sort(key=lambda j: j.submit_s)
    return jobs


def philly_path(name: str = PHILLY_DATASET) -> Path:
    """Verified local path of the registered Philly trace."""
    from gpudefrag.data import store

    return store.resolve(name)


def load_philly(name: str = PHILLY_DATASET, vc: str | None = None) -> list[Job]:
    """:func:`load_philly_csv` of the registered trace (``"philly"``), optionally one VC."""
    return load_philly_csv(philly_path(name), vc)
