"""The generic job-trace CSV: a file of jobs a user can bring (format: ``docs/job-trace-format.md``).

One header line, then one job per line. Columns, in any order:

==============  ========  ==================================================================
column          required  value
==============  ========  ==================================================================
``submit_s``    yes       submission time in seconds from the trace's origin, a number >= 0
``duration_s``  yes       run time in seconds, a number > 0
``gpus``        yes       GPUs of the job, an integer >= 1 (a gang over nodes when larger
                          than a node)
``gpu_milli``   no        milli-GPU per GPU, an integer 1..1000 (default 1000); below 1000
                          only with ``gpus == 1`` (a pod that may share a GPU)
``priority``    no        an integer (default 0)
``topology``    no        ``none``, ``required:LEVEL`` or ``preferred:LEVEL`` (default none)
``name``        no        free text (default empty)
==============  ========  ==================================================================

An empty field of an optional column takes the default. Numbers are plain decimals (``12``,
``1.5``, ``2e3``; no ``nan``/``inf``, no spaces, no ``_``). The loader is strict: an unknown,
duplicate or missing header column, a short or long row, a blank line inside the data, or a bad
value raises :class:`~gpudefrag.errors.InputError` naming the file, the 1-based line (the header
is line 1) and the column; so do an empty file and a file without data rows.

:func:`load_job_trace` returns the jobs sorted by ``(submit_s, file order)``; a job's ``job_id``
is the 0-based index of its data row in the file. :func:`write_job_trace` writes jobs in this
format atomically (a temporary file next to the target, renamed over it), so a converted trace
can be saved and loaded back unchanged.
"""

from __future__ import annotations

import csv
import math
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Constraint, Job, parse_constraint
from gpudefrag.workloads.strict_csv import iter_rows, open_rows, read_header

__all__ = [
    "JOB_TRACE_COLUMNS",
    "JOB_TRACE_OPTIONAL_COLUMNS",
    "JOB_TRACE_REQUIRED_COLUMNS",
    "load_job_trace",
    "parse_float",
    "parse_int",
    "write_job_trace",
]

JOB_TRACE_REQUIRED_COLUMNS = ("submit_s", "duration_s", "gpus")
JOB_TRACE_OPTIONAL_COLUMNS = ("gpu_milli", "priority", "topology", "name")
JOB_TRACE_COLUMNS = JOB_TRACE_REQUIRED_COLUMNS + JOB_TRACE_OPTIONAL_COLUMNS

_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_RE = re.compile(r"[+-]?[0-9]+")


def parse_float(text: str, path: str, line: int, column: str, *, minimum: float, strict: bool) -> float:
    """A finite decimal ``> minimum`` (``strict``) or ``>= minimum``; InputError otherwise."""
    if text == "":
        raise InputError(path, "empty required field", line, column)
    if not _FLOAT_RE.fullmatch(text):
        raise InputError(path, f"not a number: {text!r}", line, column)
    value = float(text)
    if not math.isfinite(value):
        raise InputError(path, f"value {text} is out of range", line, column)
    if value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise InputError(path, f"value {text} must be {bound}", line, column)
    return value


def parse_int(
    text: str, path: str, line: int, column: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """A decimal integer within ``[minimum, maximum]`` (either bound optional); InputError otherwise."""
    if text == "":
        raise InputError(path, "empty required field", line, column)
    if not _INT_RE.fullmatch(text):
        raise InputError(path, f"not an integer: {text!r}", line, column)
    value = int(text)
    if minimum is not None and value < minimum:
        raise InputError(path, f"value {text} must be >= {minimum}", line, column)
    if maximum is not None and value > maximum:
        raise InputError(path, f"value {text} must be <= {maximum}", line, column)
    return value


def _parse_topology(text: str, path: str, line: int) -> Constraint | None:
    try:
        return parse_constraint(text)
    except ConfigError:
        raise InputError(
            path, f"bad topology {text!r}; expected none, required:LEVEL or preferred:LEVEL", line, "topology"
        ) from None


def job_trace_columns(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The columns a job-trace CSV names in its header (checked as :func:`load_job_trace` does)."""
    src = Path(path)
    with open_rows(src) as fh:
        pos = read_header(
            csv.reader(fh, strict=True), str(src), JOB_TRACE_REQUIRED_COLUMNS, JOB_TRACE_OPTIONAL_COLUMNS
        )
    return tuple(sorted(pos, key=pos.__getitem__))


def load_job_trace(path: str | os.PathLike[str]) -> list[Job]:
    """Load a job-trace CSV (see the module docstring) into jobs sorted by (submit_s, file order)."""
    src = Path(path)
    spath = str(src)
    jobs: list[Job] = []
    with open_rows(src) as fh:
        reader = csv.reader(fh, strict=True)
        pos = read_header(reader, spath, JOB_TRACE_REQUIRED_COLUMNS, JOB_TRACE_OPTIONAL_COLUMNS)
        header = sorted(pos, key=pos.__getitem__)
        i_submit, i_duration, i_gpus = (pos[c] for c in JOB_TRACE_REQUIRED_COLUMNS)
        i_milli, i_prio, i_topo, i_name = (pos.get(c) for c in JOB_TRACE_OPTIONAL_COLUMNS)
        for line, row in iter_rows(reader, spath, len(header), header):
            submit = parse_float(row[i_submit], spath, line, "submit_s", minimum=0.0, strict=False)
            duration = parse_float(row[i_duration], spath, line, "duration_s", minimum=0.0, strict=True)
            gpus = parse_int(row[i_gpus], spath, line, "gpus", minimum=1)
            milli = GPU_MILLI_PER_GPU
            if i_milli is not None and row[i_milli] != "":
                milli = parse_int(
                    row[i_milli], spath, line, "gpu_milli", minimum=1, maximum=GPU_MILLI_PER_GPU
                )
                if milli < GPU_MILLI_PER_GPU and gpus != 1:
                    raise InputError(
                        spath,
                        f"gpu_milli {milli} (a share of one GPU) needs gpus == 1, got gpus {gpus}",
                        line,
                        "gpu_milli",
                    )
            priority = 0
            if i_prio is not None and row[i_prio] != "":
                priority = parse_int(row[i_prio], spath, line, "priority")
            constraint = None if i_topo is None else _parse_topology(row[i_topo], spath, line)
            name = "" if i_name is None else row[i_name]
            jobs.append(Job(len(jobs), submit, duration, gpus, milli, priority, constraint, name))
    if not jobs:
        raise InputError(spath, "no data rows after the header", 1)
    jobs.sort(key=lambda j: j.submit_s)  # stable: file order among equal submit times
    return jobs


def _number(value: float) -> str:
    """Shortest text that reads back as the same float (integral values without ``.0``)."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _check_job(job: Job) -> None:
    where = f"job {job.job_id}" + (f" ({job.name!r})" if job.name else "")
    if not (math.isfinite(job.submit_s) and job.submit_s >= 0):
        raise ConfigError(f"{where}: submit_s {job.submit_s} must be a finite number >= 0")
    if not (math.isfinite(job.duration_s) and job.duration_s > 0):
        raise ConfigError(f"{where}: duration_s {job.duration_s} must be a finite number > 0")
    if job.gpus < 1:
        raise ConfigError(f"{where}: gpus {job.gpus} must be >= 1")
    if not 1 <= job.gpu_milli <= GPU_MILLI_PER_GPU:
        raise ConfigError(f"{where}: gpu_milli {job.gpu_milli} must be in 1..{GPU_MILLI_PER_GPU}")
    if job.gpu_milli < GPU_MILLI_PER_GPU and job.gpus != 1:
        raise ConfigError(f"{where}: gpu_milli {job.gpu_milli} needs gpus == 1, got {job.gpus}")


def write_job_trace(path: str | os.PathLike[str], jobs: Iterable[Job]) -> Path:
    """Write ``jobs`` (in the given order) as a job-trace CSV with every column; returns the path.

    The file appears complete or not at all: the rows go to a temporary file in the target's
    folder, which is renamed over the target at the end. Raises :class:`ConfigError` for a job
    the format cannot hold (or for no jobs) before anything is written. ``job_id`` is not
    written: reading the file back numbers the jobs by row.
    """
    dest = Path(path)
    rows: list[list[str]] = []
    for job in jobs:
        _check_job(job)
        rows.append(
            [
                _number(job.submit_s),
                _number(job.duration_s),
                str(job.gpus),
                str(job.gpu_milli),
                str(job.priority),
                "none" if job.constraint is None else str(job.constraint),
                job.name,
            ]
        )
    if not rows:
        raise ConfigError(f"{dest}: no jobs to write (a job trace needs at least one job)")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as exc:
        raise InputError(dest, f"cannot write the job trace: {exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(JOB_TRACE_COLUMNS)
            writer.writerows(rows)
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(dest, f"cannot write the job trace: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest
