"""``gpudefrag import``: your cluster's own history as a job-trace CSV (docs/import.md).

``import slurm FILE`` reads ``sacct --parsable2`` output; ``import pods DUMP [DUMP ...]`` reads
``kubectl get pods -A -o json`` dumps.  Both write the jobs found to ``--out`` (atomically, in
the format of docs/job-trace-format.md) and print what they left out or changed, by reason; the
trace then runs with ``gpudefrag gang-sim --trace FILE``.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpudefrag.errors import ConfigError

__all__ = ["add_import_command"]


def _time(text: str) -> datetime:
    """``--now``: an ISO time (``2026-12-01T00:00:00``, an offset allowed)."""
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time like 2026-12-01T00:00:00") from None


def _now_s(now: datetime | None, source: str) -> float | None:
    """``--now`` in the clock of the input: Slurm prints local times without an offset (read as
    they are), so an offset there is refused; for pods a time without one is UTC."""
    if now is None:
        return None
    if source == "slurm":
        if now.tzinfo is not None:
            raise ConfigError(
                "--now: sacct prints the cluster's local time without an offset; give --now the same way"
            )
        return now.replace(tzinfo=UTC).timestamp()
    return (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).timestamp()


_time.__name__ = "time"  # argparse names the type in its message


def cmd_import(args: argparse.Namespace) -> int:
    from gpudefrag.errors import InputError
    from gpudefrag.workloads.jobtrace import write_job_trace

    if args.source == "slurm":
        from gpudefrag.workloads.import_slurm import import_sacct

        got = import_sacct(args.file, _now_s(args.now, "slurm"))
        source = str(args.file)
    else:
        from gpudefrag.k8s.history import import_pod_dumps

        got = import_pod_dumps(args.dumps, _now_s(args.now, "pods"))
        source = ", ".join(str(p) for p in args.dumps)
    if not got.jobs:
        left_out = "; ".join(f"{reason}: {n}" for reason, n in sorted(got.notes.items()))
        raise InputError(source, f"no job with GPUs that started (left out: {left_out})")
    write_job_trace(args.out, got.jobs)
    gpu_h = sum(j.gpu_share * j.duration_s for j in got.jobs) / 3600.0
    span_d = max(j.submit_s for j in got.jobs) / 86_400.0
    origin = datetime.fromtimestamp(got.origin_s, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    print(
        f"wrote {len(got.jobs):,} jobs ({gpu_h:,.1f} GPU-hours, submitted over {span_d:.2f} days from "
        f"{origin}) to {args.out}"
    )
    if got.notes:
        print("left out or changed:\n" + got.summary())
    biggest = max(j.gpus for j in got.jobs)
    print(f"next: gpudefrag gang-sim --trace {args.out} --nodes N   (the largest job asks {biggest} GPUs)")
    return 0


def add_import_command(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="your cluster's history (Slurm sacct, Kubernetes pod dumps) as a job-trace CSV",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = p.add_subparsers(dest="source", metavar="SOURCE", required=True)
    slurm = which.add_parser("slurm", help="sacct --parsable2 output (docs/import.md for the command)")
    slurm.add_argument("file", type=Path, metavar="FILE", help="sacct --parsable2 output")
    pods = which.add_parser("pods", help="kubectl get pods -A -o json dumps, taken over time")
    pods.add_argument("dumps", type=Path, nargs="+", metavar="DUMP", help="one or more JSON dumps")
    for q in (slurm, pods):
        q.add_argument("--out", type=Path, required=True, help="the job-trace CSV to write")
        q.add_argument(
            "--now",
            type=_time,
            default=None,
            help="when the history was taken: jobs still running end then (default: the latest time in it)",
        )
        q.set_defaults(func=cmd_import)
