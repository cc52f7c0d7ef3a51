"""``gpudefrag synth``: fresh job traces drawn from a workload model fitted to a trace.

``--like`` names what the model is fitted to: ``itp`` (ITP cluster04), ``philly``, an ITP
cluster (``itp_cluster01`` ... ``itp_cluster10``), a job-trace CSV, or a model saved with
``--save-model``.  ``synth --like T --days D --seed S --out F`` writes ``D`` days of jobs in the
job-trace format (``--growth`` G: arrivals G times as frequent; ``--bigger-jobs`` F: jobs of 8+
GPUs F times as likely).  ``synth --check --like T`` fits on the trace's first whole weeks and
compares fresh weeks with the real weeks held out (KS distances; docs/synth.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Interval

from gpudefrag.cli_args import LOAD, SEED, refuse
from gpudefrag.errors import ConfigError
from gpudefrag.settings import value

__all__ = ["add_synth_command"]

NAMED = {"itp": "itp_cluster04", "philly": "philly"}


def like_arg(text: str) -> str:
    """``--like``: a named trace, a ``.csv`` or a ``.json`` (files are read later)."""
    from gpudefrag.workloads.suite_windows import ITP_CLUSTERS

    name = NAMED.get(text.strip(), text.strip())
    if name == "philly" or name in ITP_CLUSTERS or name.endswith((".csv", ".json")):
        return text.strip()
    raise argparse.ArgumentTypeError(
        f"{text!r}: give itp, philly, itp_cluster01..10, a job-trace .csv or a model .json"
    )


def _source_jobs(like: str) -> tuple[list[Any], str]:
    """The jobs ``--like`` names, and a label for them."""
    from gpudefrag.workloads.jobtrace import load_job_trace
    from gpudefrag.workloads.suite_windows import ITP_CLUSTERS, load_trace

    name = NAMED.get(like, like)
    if name == "philly" or name in ITP_CLUSTERS:
        return load_trace(name), name
    path = Path(like)
    if path.suffix == ".csv":
        return load_job_trace(path), path.name
    raise ConfigError(
        f"--like {like!r}: give itp, philly, itp_cluster01..10, a job-trace .csv or a model .json"
    )


def cmd_synth(args: argparse.Namespace) -> int:
    from gpudefrag.workloads.jobtrace import write_job_trace
    from gpudefrag.workloads.synth import fit, generate, load_model, save_model

    if args.check:
        refuse(
            args,
            {
                "out": "--out",
                "days": "--days",
                "save_model": "--save-model",
                "growth": "--growth",
                "bigger_jobs": "--bigger-jobs",
            },
            "not with --check (it draws its own weeks)",
        )
        return _check(args)
    if args.out is None or args.days is None:
        raise ConfigError("--out and --days: both needed to write a trace (or give --check)")
    if args.like.endswith(".json"):
        refuse(args, {"save_model": "--save-model"}, "not with a saved model (it is one)")
        model = load_model(Path(args.like))
    else:
        jobs, label = _source_jobs(args.like)
        model = fit(jobs, label)
    out = generate(model, args.days, args.seed, args.growth or 1.0, args.bigger_jobs or 1.0)
    if not out:
        raise ConfigError(
            f"--days {args.days:g}: the model draws no job in so short a time; ask for more days"
        )
    write_job_trace(args.out, out)
    if args.save_model is not None and not args.like.endswith(".json"):
        save_model(model, args.save_model)
    gpu_h = sum(j.gpu_share * j.duration_s for j in out) / 3600.0
    print(
        f"wrote {len(out):,} jobs ({gpu_h:,.0f} GPU-hours over {args.days:g} days, seed {args.seed}) to {args.out}"
    )
    return 0


def _check(args: argparse.Namespace) -> int:
    from gpudefrag.workloads.synth_check import FEATURES, check_model

    jobs, label = _source_jobs(args.like)
    rows = check_model(jobs, args.fit_weeks, args.seed)
    print(
        f"{label}: fitted on weeks 1-{args.fit_weeks}, {len(rows)} weeks held out; KS distance of a fresh "
        "synthetic week to the real week, against the median KS distance between two real weeks"
    )
    print(f"{'week':>4} {'jobs':>6} {'synth':>6}  " + "  ".join(f"{f:>22}" for f in FEATURES))
    for r in rows:
        cells = "  ".join(
            f"{r.ks[f]:>8.3f} / {r.median_real[f]:.3f} {'ok' if r.passed(f) else 'NO':>3}" for f in FEATURES
        )
        print(f"{r.week + 1:>4} {r.jobs_real:>6} {r.jobs_synthetic:>6}  {cells}")
    passed = {f: sum(r.passed(f) for r in rows) for f in FEATURES}
    print("passed: " + ", ".join(f"{f} {n} of {len(rows)}" for f, n in passed.items()))
    return 0 if all(n == len(rows) for n in passed.values()) else 1


def add_synth_command(sub: Any) -> None:
    p = sub.add_parser(
        "synth",
        help="fresh job traces from a workload model fitted to a trace; --check compares with held-out weeks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--like",
        type=like_arg,
        required=True,
        help="itp, philly, itp_cluster01..10, a job-trace .csv or a model .json",
    )
    p.add_argument(
        "--days", type=value(Annotated[float, Interval(gt=0, le=3660)]), default=None, help="days to draw"
    )
    p.add_argument("--seed", type=SEED, default=42, help="seed (default 42)")
    p.add_argument(
        "--growth", type=LOAD, default=None, help="arrivals this many times as frequent (default 1)"
    )
    p.add_argument(
        "--bigger-jobs",
        type=value(Annotated[float, Interval(gt=0, le=100)]),
        default=None,
        help="jobs of 8+ GPUs this many times as likely (default 1)",
    )
    p.add_argument("--out", type=Path, default=None, help="the job-trace CSV to write")
    p.add_argument("--save-model", type=Path, default=None, help="also write the fitted model as JSON")
    p.add_argument("--check", action="store_true", help="compare fresh weeks with the trace's held-out weeks")
    p.add_argument(
        "--fit-weeks",
        type=value(Annotated[int, Interval(ge=1, le=52)]),
        default=4,
        help="with --check: whole weeks the model is fitted on (default 4; the rest are held out)",
    )
    p.set_defaults(func=cmd_synth)
