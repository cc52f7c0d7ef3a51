"""Suite 2's trace windows: which weeks of the ITP and Philly traces it replays, how they split
into tuning, report and confirmation sets, and one run of a window at a load.

* :data:`WINDOWS` is the fixed window list of suite 2 (recomputed by :func:`suite_windows`), split
  into :data:`TUNING`, :data:`REPORT` and the confirmation sets; ``docs/suite2-windows.md`` has
  the table (``python -m gpudefrag.workloads.window_table`` prints it).
* :func:`suite_run` is the input of one run: the window's jobs at a load (the mechanics:
  :mod:`gpudefrag.workloads.windows`) on a cluster sized for load 1.0.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import NamedTuple

from gpudefrag.errors import ConfigError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.itp import ITP_CLUSTERS, load_itp
from gpudefrag.workloads.openb import PodTable
from gpudefrag.workloads.philly import PHILLY_DATASET, load_philly
from gpudefrag.workloads.windows import (
    DAY_S,
    ScaledJobs,
    Window,
    busiest_windows,
    mixed_workload,
    scaled_jobs,
    size_cluster,
)

__all__ = [
    "CONFIRMATION",
    "CONFIRMATION_2",
    "CONFIRMATION_3",
    "CONFIRMATION_4",
    "REPORT",
    "SUITE_COOLDOWN_S",
    "SUITE_GPUS_PER_NODE",
    "SUITE_MAX_SCALE",
    "SUITE_PLAN",
    "SUITE_SCALES",
    "SUITE_WARMUP_S",
    "SUITE_WINDOW_S",
    "TUNING",
    "UNUSED",
    "WINDOWS",
    "SuiteRun",
    "load_trace",
    "run_nodes",
    "suite_run",
    "suite_windows",
    "window",
]

# ---------------------------------------------------------------------------------------------
# The suite-2 windows


def load_trace(trace: str) -> list[Job]:
    """The jobs of a registered trace: an ITP cluster (``itp_cluster04``) or ``philly``.  Each
    trace is read and checked once per process (a suite runs many windows and variants of it)."""
    return list(_parsed_trace(trace))


@functools.cache
def _parsed_trace(trace: str) -> tuple[Job, ...]:
    if trace == PHILLY_DATASET:
        return tuple(load_philly(trace))
    if trace in ITP_CLUSTERS:
        return tuple(load_itp(trace))
    raise ConfigError(f"unknown job trace {trace!r}; known: {', '.join((*ITP_CLUSTERS, PHILLY_DATASET))}")


@functools.cache
def _mix_pods() -> PodTable:
    """The openb pod list the mixed windows draw from, read once per process (never mutated)."""
    from gpudefrag.workloads.openb import load_workload

    return load_workload(MIX_POD_LIST)


#: Window length, warm-up and the loads every suite window must support (see :func:`suite_windows`).
SUITE_WINDOW_S = 7 * DAY_S
SUITE_WARMUP_S = 2 * DAY_S
SUITE_MAX_SCALE = 1.5
SUITE_COOLDOWN_S = 2 * DAY_S
SUITE_GPUS_PER_NODE = 8
SUITE_SCALES = (1.0, 1.25, 1.5)

#: (name prefix, trace, number of windows): the busiest non-overlapping windows of each trace,
#: named ``<prefix>-w1`` (busiest), ``-w2``, … ITP cluster04 has the most multi-node gangs,
#: Philly is the second trace, clusters 01/02/03/06 are the other ITP clusters with gangs;
#: cluster07 (the busiest of the other ITP traces, with only two multi-node jobs) was added
#: for suite 3's confirmation-3 set, the later weeks of Philly and clusters 02, 06, 07 and
#: cluster08 for its confirmation-4 set.  Raising a count appends windows and leaves the earlier ones as they are.
SUITE_PLAN: tuple[tuple[str, str, int], ...] = (
    ("itp04", "itp_cluster04", 6),
    ("philly", "philly", 11),
    ("itp01", "itp_cluster01", 1),
    ("itp02", "itp_cluster02", 5),
    ("itp03", "itp_cluster03", 3),
    ("itp06", "itp_cluster06", 5),
    ("itp07", "itp_cluster07", 5),
    ("itp08", "itp_cluster08", 3),
)


def suite_windows(loader: Callable[[str], list[Job]] = load_trace) -> tuple[Window, ...]:
    """The suite-2 windows, computed from the data: for each entry of :data:`SUITE_PLAN`,
    :func:`busiest_windows` of 7 days after a 2-day warm-up, with room for loads up to 1.5
    (``max_scale``) and 2 days kept free before the trace's last submission (``cooldown_s``: the
    traces lack the jobs that ended after collection stopped, so their last days are thin)."""
    out: list[Window] = []
    for prefix, trace, count in SUITE_PLAN:
        found = busiest_windows(
            loader(trace),
            SUITE_WINDOW_S,
            SUITE_WARMUP_S,
            count,
            trace=trace,
            max_scale=SUITE_MAX_SCALE,
            cooldown_s=SUITE_COOLDOWN_S,
        )
        if len(found) < count:
            raise ConfigError(f"suite_windows: {trace} has {len(found)} windows, the plan wants {count}")
        out += [
            Window(w.trace, w.start_s, w.end_s, w.gpu_hours, f"{prefix}-w{i}") for i, w in enumerate(found, 1)
        ]
    return tuple(out)


#: The suite-2 windows as computed by :func:`suite_windows` (a test checks that they still agree).
#: Fields: trace, start_s, end_s, GPU-hours submitted, name.
WINDOWS: tuple[Window, ...] = (
    Window("itp_cluster04", 1555200.0, 2160000.0, 110564.86305555556, "itp04-w1"),
    Window("itp_cluster04", 2505600.0, 3110400.0, 110384.7, "itp04-w2"),
    Window("itp_cluster04", 345600.0, 950400.0, 103127.23333333334, "itp04-w3"),
    Window("itp_cluster04", 3974400.0, 4579200.0, 89282.13138888888, "itp04-w4"),
    Window("itp_cluster04", 950400.0, 1555200.0, 84104.44583333333, "itp04-w5"),
    Window("itp_cluster04", 3369600.0, 3974400.0, 59317.925833333335, "itp04-w6"),
    Window("philly", 4147200.0, 4752000.0, 133518.62416666668, "philly-w1"),
    Window("philly", 1555200.0, 2160000.0, 120796.90472222223, "philly-w2"),
    Window("philly", 2332800.0, 2937600.0, 102357.87, "philly-w3"),
    Window("philly", 3456000.0, 4060800.0, 102072.24083333333, "philly-w4"),
    Window("philly", 4924800.0, 5529600.0, 78897.54083333333, "philly-w5"),
    Window("philly", 7430400.0, 8035200.0, 72856.83833333333, "philly-w6"),
    Window("philly", 5529600.0, 6134400.0, 67377.47416666667, "philly-w7"),
    Window("philly", 6220800.0, 6825600.0, 51232.20361111111, "philly-w8"),
    Window("philly", 6825600.0, 7430400.0, 42125.811111111114, "philly-w9"),
    Window("philly", 950400.0, 1555200.0, 40555.72083333333, "philly-w10"),
    Window("philly", 8035200.0, 8640000.0, 24884.961666666666, "philly-w11"),
    Window("itp_cluster01", 2246400.0, 2851200.0, 8147.4275, "itp01-w1"),
    Window("itp_cluster02", 2160000.0, 2764800.0, 27117.378333333334, "itp02-w1"),
    Window("itp_cluster02", 3974400.0, 4579200.0, 21715.059166666666, "itp02-w2"),
    Window("itp_cluster02", 3196800.0, 3801600.0, 14360.493611111111, "itp02-w3"),
    Window("itp_cluster02", 345600.0, 950400.0, 14086.376666666667, "itp02-w4"),
    Window("itp_cluster02", 1036800.0, 1641600.0, 10125.544444444444, "itp02-w5"),
    Window("itp_cluster03", 3801600.0, 4406400.0, 40687.991944444446, "itp03-w1"),
    Window("itp_cluster03", 2764800.0, 3369600.0, 29634.434444444443, "itp03-w2"),
    Window("itp_cluster03", 1987200.0, 2592000.0, 18842.84527777778, "itp03-w3"),
    Window("itp_cluster06", 2160000.0, 2764800.0, 32944.44055555556, "itp06-w1"),
    Window("itp_cluster06", 4060800.0, 4665600.0, 17784.923055555555, "itp06-w2"),
    Window("itp_cluster06", 1555200.0, 2160000.0, 15450.180555555555, "itp06-w3"),
    Window("itp_cluster06", 604800.0, 1209600.0, 14349.143333333333, "itp06-w4"),
    Window("itp_cluster06", 2764800.0, 3369600.0, 11480.784166666666, "itp06-w5"),
    Window("itp_cluster07", 1296000.0, 1900800.0, 63303.13138888889, "itp07-w1"),
    Window("itp_cluster07", 2764800.0, 3369600.0, 52107.755, "itp07-w2"),
    Window("itp_cluster07", 3715200.0, 4320000.0, 51455.942777777775, "itp07-w3"),
    Window("itp_cluster07", 2160000.0, 2764800.0, 39770.51944444444, "itp07-w4"),
    Window("itp_cluster07", 345600.0, 950400.0, 38639.345555555556, "itp07-w5"),
    Window("itp_cluster08", 1382400.0, 1987200.0, 16316.183333333332, "itp08-w1"),
    Window("itp_cluster08", 2073600.0, 2678400.0, 13677.996944444445, "itp08-w2"),
    Window("itp_cluster08", 432000.0, 1036800.0, 12104.06, "itp08-w3"),
)

#: Fixed split (do not move windows between the sets once results exist): TUNING windows may be
#: used to choose parameters, REPORT windows only to report results. Tuning gets the
#: second-busiest window of ITP cluster04 and of Philly plus the two small clusters 01 and 06;
#: the report keeps the busiest and third-busiest windows of both main traces plus clusters 02
#: and 03.  Each set also has one mixed workload (``-mix``, :func:`suite_run`): cluster04's
#: window of that set with openb pods filling about 20 % of the GPU load.
TUNING: tuple[str, ...] = ("itp04-w2", "philly-w2", "itp01-w1", "itp06-w1", "itp04-w2-mix")
REPORT: tuple[str, ...] = (
    "itp04-w1",
    "itp04-w3",
    "philly-w1",
    "philly-w3",
    "itp02-w1",
    "itp03-w1",
    "itp04-w1-mix",
)
SPLITS: dict[str, tuple[str, ...]] = {}  # filled below: set name -> window names

#: Picked on 2026-12-01 after the report windows were run (and spent); run once the same day
#: after the simulator fixes, and spent too.
CONFIRMATION: tuple[str, ...] = (
    "itp04-w4",
    "itp04-w5",
    "philly-w4",
    "philly-w5",
    "itp02-w2",
    "itp03-w2",
    "itp04-w4-mix",
)
#: Picked on 2026-12-02, after every other set was spent, from the next-busiest weeks of the same
#: traces (less busy than the others); run once by suite 3 (spent there), never by suite 2.
CONFIRMATION_2: tuple[str, ...] = (
    "itp04-w6",
    "philly-w6",
    "philly-w7",
    "itp02-w3",
    "itp03-w3",
    "itp06-w2",
    "itp04-w6-mix",
)
#: Picked on 2026-12-02 after suite 3 had spent every other set, by a rule fixed before any run:
#: every unused Philly week with at least 40,000 GPU-hours, the next week of the ITP clusters
#: that still have one of at least 10,000 GPU-hours (02, 06; 01, 03 and 04 have none), the two
#: busiest weeks of ITP cluster07 (never used by a suite), and philly-w8 with openb pods mixed
#: in; amended once after reading the window table (sizes only, before any run): weeks of
#: fewer than 100 jobs are left out, which drops Philly's third such week (day 11: 28 jobs on
#: 5 nodes).  Never run by any suite.
CONFIRMATION_3: tuple[str, ...] = (
    "philly-w8",
    "philly-w9",
    "itp02-w4",
    "itp06-w3",
    "itp07-w1",
    "itp07-w2",
    "philly-w8-mix",
)
#: Picked on 2026-12-02 (evening) after suite 3 had spent every other set, by a rule fixed before
#: any run and before any tuning of the change it is to judge: every week of the ITP and Philly
#: traces that no set holds, with at least 10,000 GPU-hours and at least 100 jobs (the
#: :func:`busiest_windows` weeks of every trace, as the plan computes them), and the busiest of
#: them with openb pods mixed in (itp07-w3-mix).  Lighter than every set before, and only
#: philly-w11, itp02-w5 and the cluster06 weeks hold multi-node jobs.  Never run by any suite.
CONFIRMATION_4: tuple[str, ...] = (
    "philly-w11",
    "itp02-w5",
    "itp06-w4",
    "itp06-w5",
    "itp07-w3",
    "itp07-w4",
    "itp07-w5",
    "itp08-w1",
    "itp08-w2",
    "itp08-w3",
    "itp07-w3-mix",
)
#: Weeks of the plan that no set holds: Philly's day-11 week has 28 jobs on 5 nodes (left out
#: of confirmation-3 and -4 by their rules' job count).
UNUSED: tuple[str, ...] = ("philly-w10",)
SPLITS.update(
    tuning=TUNING,
    report=REPORT,
    confirmation=CONFIRMATION,
    **{"confirmation-2": CONFIRMATION_2, "confirmation-3": CONFIRMATION_3, "confirmation-4": CONFIRMATION_4},
)


MIX_SUFFIX = "-mix"
MIX_SHARE = 0.2
MIX_SEED = 2023
MIX_SUITE_MEAN_DURATION_S = 3_600.0
MIX_POD_LIST = "openb_pod_list_default"


def window(name: str) -> Window:
    """A suite window by name (``itp04-w1``; ``itp04-w1-mix`` is the same window with openb
    pods mixed in, see :func:`suite_run`); :class:`ConfigError` listing the names if unknown."""
    base = name[: -len(MIX_SUFFIX)] if name.endswith(MIX_SUFFIX) else name
    for w in WINDOWS:
        if w.name == base:
            return w
    raise ConfigError(
        f"unknown window {name!r}; known: {', '.join(w.name for w in WINDOWS)} (each also with '{MIX_SUFFIX}')"
    )


def run_nodes(
    jobs: Sequence[Job],
    w: Window,
    gpus_per_node: int = SUITE_GPUS_PER_NODE,
    warmup_s: float = SUITE_WARMUP_S,
) -> int:
    """The suite's cluster size for a window: :func:`size_cluster` of the jobs of its run at load
    1.0 (``scaled_jobs(jobs, w, 1.0, warmup_s)``) over that run's measurement interval.

    This is the load the simulation sees: jobs submitted before the run starts (``start -
    warmup_s``) are not simulated, so sizing from the whole trace (``size_cluster(jobs, w, …)``)
    would count long jobs that the run never offers.
    """
    run = scaled_jobs(jobs, w, 1.0, warmup_s)
    return size_cluster(run.jobs, Window(w.trace, *run.measure, 0.0), gpus_per_node)


class SuiteRun(NamedTuple):
    """The input of one suite run: jobs (times from the run's start), measurement interval and
    the cluster's node count (fixed per window, sized at load 1.0)."""

    jobs: list[Job]
    measure: tuple[float, float]
    nodes: int


def suite_run(
    name: str,
    scale: float,
    gpus_per_node: int = SUITE_GPUS_PER_NODE,
    loader: Callable[[str], list[Job]] = load_trace,
) -> SuiteRun:
    """Jobs, measurement interval and node count of suite window ``name`` at load ``scale``.

    ``<window>-mix`` is the mixed workload: the window's jobs plus openb pods (most of them a
    share of one GPU, inference-like) carrying :data:`MIX_SHARE` of the GPU-seconds of the run
    (:func:`mixed_workload`, seed :data:`MIX_SEED`, exponential run times of mean
    :data:`MIX_SUITE_MEAN_DURATION_S`); the cluster is sized for the mixed run at load 1.0.
    """
    w = window(name)
    jobs = loader(w.trace)
    run = scaled_jobs(jobs, w, scale, SUITE_WARMUP_S)
    if not name.endswith(MIX_SUFFIX):
        return SuiteRun(run.jobs, run.measure, run_nodes(jobs, w, gpus_per_node))
    pods = _mix_pods()

    def mixed(r: ScaledJobs) -> list[Job]:
        whole_run = Window(w.trace, 0.0, r.measure[1], 0.0)
        return mixed_workload(
            r.jobs, pods, whole_run, MIX_SHARE, seed=MIX_SEED, mean_duration_s=MIX_SUITE_MEAN_DURATION_S
        )

    base = scaled_jobs(jobs, w, 1.0, SUITE_WARMUP_S)
    nodes = size_cluster(mixed(base), Window(w.trace, *base.measure, 0.0), gpus_per_node)
    return SuiteRun(mixed(run), run.measure, nodes)
