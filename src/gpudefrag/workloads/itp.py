"""Strict loader for the Microsoft ITP raw cluster traces (ElasticFlow, ASPLOS '23).

Each of ``microsoft-itp-elasticflow/raw-traces/cluster01.csv`` … ``cluster10.csv`` (registered as
``itp_cluster01`` … ``itp_cluster10``; MIT licence) has the columns

* ``job_id``: a UUID (lower-case hex ``8-4-4-4-12``), unique in the file;
* ``submission_time``: integer seconds since the start of collection (2021-03-04), >= 0;
* ``duration``: the job's run time in integer seconds, > 0;
* ``num_gpu``: the job's GPUs, an integer >= 1 (16, 32, 64 are gangs of whole 8-GPU nodes).

:func:`load_itp_csv` turns a file into :class:`~gpudefrag.model.jobs.Job` s sorted by
``(submit_s, file order)``: ``job_id`` is the 0-based data row, ``name`` the UUID, whole GPUs,
priority 0, no topology constraint. Every problem (header, short or long rows, bad values,
duplicate ids, no rows) raises :class:`~gpudefrag.errors.InputError` naming the file, the 1-based
line (the header is line 1) and the column. :func:`load_itp` does the same for a registered
cluster, found through the data store (mirror, cache, or extracted from the upstream archive).
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.jobtrace import parse_int
from gpudefrag.workloads.strict_csv import iter_rows, open_rows, read_header

__all__ = ["ITP_CLUSTERS", "ITP_COLUMNS", "itp_dataset", "itp_path", "load_itp", "load_itp_csv"]

ITP_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")

#: Registered dataset names of the ten ITP clusters.
ITP_CLUSTERS: tuple[str, ...] = tuple(f"itp_cluster{n:02d}" for n in range(1, 11))

_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NAME_RE = re.compile(r"(?:itp_?)?(?:cluster)?0*([0-9]+)(?:\.csv)?")


def load_itp_csv(path: str | os.PathLike[str]) -> list[Job]:
    """Load one ITP raw cluster CSV (see the module docstring)."""
    src = Path(path)
    spath = str(src)
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    with open_rows(src) as fh:
        reader = csv.reader(fh, strict=True)
        pos = read_header(reader, spath, ITP_COLUMNS, ())
        header = sorted(pos, key=pos.__getitem__)
        i_id, i_submit, i_duration, i_gpus = (pos[c] for c in ITP_COLUMNS)
        for line, row in iter_rows(reader, spath, len(header), header):
            uuid = row[i_id]
            if not _UUID_RE.fullmatch(uuid):
                what = "empty required field" if not uuid else f"not a UUID: {uuid!r}"
                raise InputError(spath, what, line, "job_id")
            if uuid in seen:
                raise InputError(
                    spath, f"duplicate job_id {uuid} (first on line {seen[uuid]})", line, "job_id"
                )
            seen[uuid] = line
            submit = parse_int(row[i_submit], spath, line, "submission_time", minimum=0)
            duration = parse_int(row[i_duration], spath, line, "duration", minimum=1)
            gpus = parse_int(row[i_gpus], spath, line, "num_gpu", minimum=1)
            jobs.append(Job(len(jobs), float(submit), float(duration), gpus, name=uuid))
    if not jobs:
        raise InputError(spath, "no data rows after the header", 1)
    jobs.sort(key=lambda j: j.submit_s)
    return jobs


def itp_dataset(name: str | int) -> str:
    """The registered name of an ITP cluster: ``4``, ``"04"``, ``"cluster04"``, ``"itp04"`` and
    ``"itp_cluster04"`` all give ``"itp_cluster04"``; :class:`ConfigError` if there is none."""
    match = _NAME_RE.fullmatch(str(name).strip().lower())
    number = int(match.group(1)) if match else 0
    if not 1 <= number <= len(ITP_CLUSTERS):
        raise ConfigError(f"unknown ITP cluster {name!r}; known: {', '.join(ITP_CLUSTERS)}")
    return ITP_CLUSTERS[number - 1]


def itp_path(name: str | int = "itp_cluster04") -> Path:
    """Verified local path of a registered ITP cluster CSV (names as for :func:`itp_dataset`)."""
    from gpudefrag.data import store

    return store.resolve(itp_dataset(name))


def load_itp(name: str | int = "itp_cluster04") -> list[Job]:
    """:func:`load_itp_csv` of a registered ITP cluster (``"itp_cluster04"``, ``4``, …)."""
    return load_itp_csv(itp_path(name))
