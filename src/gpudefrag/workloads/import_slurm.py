"""Slurm accounting (``sacct --parsable2``) -> the jobs of a job-trace CSV.

Input: what, for example,

    sacct --allusers --parsable2 --starttime 2026-11-01 --endtime 2026-12-01 \\
          --format JobID,JobName,Partition,QOS,Priority,Submit,Start,End,State,AllocTRES,NNodes,Timelimit

prints: a header line of field names separated by ``|``, then one line per job or job step.
Rules (each documented in ``docs/import.md``):

* Columns are found by their header names, in any order; ``JobID``, ``Submit``, ``Start``,
  ``End``, ``State`` and ``AllocTRES`` are required, ``JobName`` and ``Priority`` are used when
  present, other columns are read past.
* Step lines (a ``JobID`` with a dot: ``123.batch``, ``123.0``, ``123.extern``) are skipped: the
  allocation line holds the job.  Array tasks (``123_7``) and heterogeneous components
  (``123+0``) are jobs of their own.
* GPUs come from ``AllocTRES``: ``gres/gpu=N``, or the sum of ``gres/gpu:TYPE=N`` when the
  untyped entry is absent; ``gres/mps=P`` (P in 1..100, MPS's default of 100 per GPU) is one GPU
  of ``10 x P`` milli.  A job without GPUs is skipped (counted).
* Times are ``YYYY-MM-DDTHH:MM:SS`` in the cluster's local time, read as they are (only their
  differences matter); ``Unknown``, ``None`` or empty is no time.  A job without a start never
  ran (pending, or cancelled before it started) and is skipped (counted); a job without an end
  (``RUNNING``, ``REQUEUED``...) ends at ``now_s`` (default: the latest time in the file) and
  the rules of :func:`~gpudefrag.workloads.import_common.finish` apply.
* ``priority`` is the ``Priority`` column (an integer) when present, else 0; ``name`` is
  ``JobName``, else the ``JobID``.

Every malformed line raises :class:`~gpudefrag.errors.InputError` naming the file, the 1-based
line and the column.  Time limits (``Timelimit``) are not carried: the job-trace format has no
column for them yet.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from gpudefrag.errors import InputError
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.workloads.import_common import Imported, RawJob, finish
from gpudefrag.workloads.strict_csv import open_rows, utf8_error

__all__ = ["REQUIRED", "import_sacct", "parse_alloc_tres", "parse_sacct_time"]

REQUIRED = ("JobID", "Submit", "Start", "End", "State", "AllocTRES")
_NO_TIME = ("", "unknown", "none")
_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+|_\[[0-9,\-%]+\])?(?:\+[0-9]+)?(?:\.[A-Za-z0-9_]+)?")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")
_INT = re.compile(r"[+-]?[0-9]+")
_MPS_PER_GPU = 100


def parse_sacct_time(text: str) -> float | None:
    """Seconds of a ``YYYY-MM-DDTHH:MM:SS`` time (read as UTC: only differences matter), or
    None for no time; raises ValueError for anything else."""
    if text.strip().lower() in _NO_TIME:
        return None
    if not _TIME.fullmatch(text):
        raise ValueError(f"{text!r} is not a time YYYY-MM-DDTHH:MM:SS (or Unknown)")
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def parse_alloc_tres(text: str) -> tuple[int, int]:
    """``(gpus, gpu_milli)`` of an ``AllocTRES`` value (module docstring; ``(0, 1000)``: none);
    raises ValueError for a malformed entry."""
    untyped: int | None = None
    typed = 0
    mps: int | None = None
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"entry {item!r} is not KEY=VALUE")
        if key == "gres/gpu" or key.startswith("gres/gpu:") or key == "gres/mps":
            if not re.fullmatch(r"[0-9]+", value):
                raise ValueError(f"{key}={value!r}: not a whole number")
            n = int(value)
            if key == "gres/gpu":
                untyped = n
            elif key == "gres/mps":
                mps = n
            else:
                typed += n
    gpus = untyped if untyped is not None else typed
    if gpus > 0:
        return gpus, GPU_MILLI_PER_GPU
    if mps:
        if mps > _MPS_PER_GPU:
            raise ValueError(f"gres/mps={mps}: more than one GPU's {_MPS_PER_GPU} (ask whole GPUs)")
        return 1, mps * GPU_MILLI_PER_GPU // _MPS_PER_GPU
    return 0, GPU_MILLI_PER_GPU


def _header(path: Path, line: str) -> dict[str, int]:
    names = line.rstrip("\r\n").split("|")
    positions: dict[str, int] = {}
    for i, name in enumerate(names):
        if not name:
            raise InputError(path, "empty column name in the header (is this sacct --parsable2 output?)", 1)
        if name in positions:
            raise InputError(path, "duplicate column in the header", 1, name)
        positions[name] = i
    for name in REQUIRED:
        if name not in positions:
            raise InputError(
                path,
                f"missing column (run sacct with --parsable2 --format {','.join(REQUIRED)},...)",
                1,
                name,
            )
    return positions


def import_sacct(path: str | Path, now_s: float | None = None) -> Imported:
    """The jobs of one ``sacct --parsable2`` file (module docstring); ``now_s`` (epoch seconds,
    in the file's clock) ends the jobs still running."""
    p = Path(path)
    notes: Counter[str] = Counter()
    raw: list[RawJob] = []
    latest = 0.0
    with open_rows(p) as fh:
        try:
            lines = fh.read().split("\n")
        except UnicodeDecodeError:
            raise utf8_error(str(p)) from None
    if not lines or not lines[0].strip():
        raise InputError(p, "empty file; expected sacct --parsable2 output with a header line", 1)
    col = _header(p, lines[0])
    for number, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line.strip():
            if any(rest.strip() for rest in lines[number:]):
                raise InputError(p, "blank line inside the data", number)
            break
        fields = line.split("|")
        if len(fields) < len(col):
            missing = next(n for n, i in col.items() if i >= len(fields))
            raise InputError(p, f"{len(fields)} fields, the header has {len(col)}", number, missing)
        if len(fields) > len(col):
            raise InputError(p, f"{len(fields)} fields, the header has {len(col)} (a '|' in a name?)", number)

        def get(name: str, fields: list[str] = fields) -> str:
            return fields[col[name]]

        job_id = get("JobID").strip()
        if not _JOB_ID.fullmatch(job_id):
            raise InputError(p, f"{job_id!r} is not a Slurm job id", number, "JobID")
        if "." in job_id:
            notes["job steps (the allocation line holds the job)"] += 1
            continue
        times: dict[str, float | None] = {}
        for name in ("Submit", "Start", "End"):
            try:
                times[name] = parse_sacct_time(get(name))
            except ValueError as e:
                raise InputError(p, str(e), number, name) from None
            latest = max(latest, times[name] or 0.0)
        try:
            gpus, milli = parse_alloc_tres(get("AllocTRES"))
        except ValueError as e:
            raise InputError(p, str(e), number, "AllocTRES") from None
        priority = 0
        if "Priority" in col and get("Priority").strip():
            if not _INT.fullmatch(get("Priority").strip()):
                raise InputError(p, f"{get('Priority')!r} is not an integer", number, "Priority")
            priority = int(get("Priority"))
        submit, start, end = times["Submit"], times["Start"], times["End"]
        if submit is None:
            raise InputError(p, "a job needs a submit time", number, "Submit")
        if start is None:
            notes[f"never started ({get('State').split()[0] if get('State').strip() else 'no state'})"] += 1
            continue
        if gpus == 0:
            empty = not get("AllocTRES").strip()
            notes[
                "no allocation (AllocTRES empty: never ran)"
                if empty
                else "CPU-only jobs (no GPU in AllocTRES)"
            ] += 1
            continue
        name = (get("JobName").strip() if "JobName" in col else "") or job_id
        raw.append(RawJob(submit, start, end, gpus, milli, priority, name))
    if not raw and not notes:
        raise InputError(p, "no jobs: only a header line", 2)
    return finish(raw, latest if now_s is None else now_s, notes)
