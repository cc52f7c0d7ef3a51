"""The table of suite 2's windows in ``docs/suite2-windows.md``: per window its set, trace, start,
GPU-hours, the cluster it is replayed on, its offered loads and its jobs
(``python -m gpudefrag.workloads.window_table`` prints it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpudefrag.model.jobs import Job
from gpudefrag.workloads.suite_windows import (
    SPLITS,
    SUITE_GPUS_PER_NODE,
    SUITE_SCALES,
    SUITE_WARMUP_S,
    WINDOWS,
    load_trace,
    run_nodes,
)
from gpudefrag.workloads.windows import Window, offered_gpu_seconds, scaled_jobs, size_cluster

__all__ = ["WindowStats", "window_stats", "window_table"]


@dataclass(frozen=True)
class WindowStats:
    """One row of the window table."""

    window: Window
    nodes: int  # at load 1.0: run_nodes
    trace_nodes: int  # size_cluster over all the trace's jobs (also those submitted before the run)
    loads: tuple[float, ...]  # mean offered load of the runs at SUITE_SCALES on ``nodes`` nodes
    jobs: int  # submitted in the window
    multi_node_jobs: int  # of those, more GPUs than one node has


def window_stats(w: Window, jobs: Sequence[Job], gpus_per_node: int = SUITE_GPUS_PER_NODE) -> WindowStats:
    """Sizes, offered loads and job counts of a window (``jobs``: the whole trace)."""
    nodes = run_nodes(jobs, w, gpus_per_node)
    loads = []
    for scale in SUITE_SCALES:
        run = scaled_jobs(jobs, w, scale, SUITE_WARMUP_S)
        offered = offered_gpu_seconds(run.jobs, Window(w.trace, *run.measure, 0.0))
        loads.append(offered / (w.length_s * nodes * gpus_per_node))
    inside = [j for j in jobs if w.start_s <= j.submit_s < w.end_s]
    return WindowStats(
        w,
        nodes,
        size_cluster(jobs, w, gpus_per_node),
        tuple(loads),
        len(inside),
        sum(1 for j in inside if j.gpus > gpus_per_node),
    )


def window_table(
    windows: Sequence[Window] | None = None,
    gpus_per_node: int = SUITE_GPUS_PER_NODE,
    loader: Callable[[str], list[Job]] = load_trace,
) -> str:
    """A Markdown table of the windows (default :data:`WINDOWS`) with their split."""
    scales = " / ".join(str(s) for s in SUITE_SCALES)
    rows = [
        f"| window | split | trace | start day | GPU-hours | nodes at load 1.0 | offered load at scale {scales} "
        "| nodes from the whole trace | jobs | multi-node jobs |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cache: dict[str, list[Job]] = {}
    for w in WINDOWS if windows is None else windows:
        jobs = cache.get(w.trace)
        if jobs is None:
            jobs = cache[w.trace] = loader(w.trace)
        st = window_stats(w, jobs, gpus_per_node)
        split = next((n for n, part in SPLITS.items() if w.name in part), "")
        loads = " / ".join(f"{x:.2f}" for x in st.loads)
        rows.append(
            f"| {w.name} | {split} | {w.trace} | {w.start_day:g} | {w.gpu_hours:,.0f} | {st.nodes} | {loads} "
            f"| {st.trace_nodes} | {st.jobs:,} | {st.multi_node_jobs} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(window_table())
