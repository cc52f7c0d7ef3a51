"""The figures suite 3 reports for one run (window, seed, variant), over the measurement window.

* ``goodput_pct``: useful GPU time (in use, less work thrown away and restarts) in % of the
  cluster's GPU capacity (every node, spares and down nodes included); ``alloc_pct``: GPUs in
  use in %;
* ``lost_<cause>_gpu_h`` for failure, preemption and migration: the work thrown away
  (``lost_work_<cause>_gpu_h``) plus the restarts that cause made (``restart_<cause>_gpu_h``);
  ``restart_gpu_h``, every restart;
* ``restart_gang_p50_s`` / ``restart_gang_p95_s``: from a failure inside the window to the
  moment a failed multi-node gang works again (``restart_all_*`` over every failed job); a job
  not working again by the end counts with the time from its failure to the end, a lower
  bound (``failed_not_restarted`` counts them);
* ``wait_p50_s_<class>`` / ``wait_p95_s_<class>``: submission to first start, by priority class;
  a job of the window that never started counts with the time from its submission to the end
  (a lower bound), so a variant that starves a class cannot show a shorter wait;
* ``preemptions`` (plans executed), ``preempted_jobs`` (killed), ``preemption_waits`` (plans
  a blocked job waited for, for its victims' checkpoints), ``moves``, ``spare_evictions``,
  ``failures``, ``jobs_killed_by_failure``, ``completed`` (each counted inside the window only),
  ``pending_at_end``, ``running_at_end``;
* ``unserved_at_end``: jobs of the window that never started although they were submitted at
  least ``serve_grace_s`` before its end (the elastic bar's test of "serves the same jobs": a
  job submitted closer to the end than a tick plus the provisioning delay cannot be served by
  capacity ordered for it, and counts in neither variant);
* ``node_hours``, ``nodes_powered_on`` / ``_off``, ``drains`` (elastic mode);
* ``victim_p99_ms``: victim-rule decision time.
"""

from __future__ import annotations

import numpy as np

from gpudefrag.capacity.classes import CLASS_NAMES
from gpudefrag.sim.capacity_model import CAUSES, Sim3Result

__all__ = ["summarise3"]


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def summarise3(result: Sim3Result, gpus_per_node: int, serve_grace_s: float = 0.0) -> dict[str, float]:
    """The module docstring's figures."""
    out: dict[str, float] = {
        "goodput_pct": 100.0 * result.goodput,
        "alloc_pct": 100.0 * result.allocation,
        "restart_gpu_h": result.restart_gpu_s / 3600.0,
    }
    for cause in CAUSES:
        work, restarts = result.lost_gpu_s[cause] / 3600.0, result.restart_gpu_s_by_cause[cause] / 3600.0
        out[f"lost_work_{cause}_gpu_h"] = work
        out[f"restart_{cause}_gpu_h"] = restarts
        out[f"lost_{cause}_gpu_h"] = work + restarts
    gang = [t for g, t in result.restart_times_s if g > gpus_per_node]
    every = [t for _, t in result.restart_times_s]
    out["restart_gang_p50_s"] = _pct(gang, 50)
    out["restart_gang_p95_s"] = _pct(gang, 95)
    out["restart_all_p50_s"] = _pct(every, 50)
    out["restart_all_p95_s"] = _pct(every, 95)
    out["failed_restarts"] = float(len(every) - result.restart_censored)
    out["failed_not_restarted"] = float(result.restart_censored)
    end_s = result.meter.end_s
    for cls, name in CLASS_NAMES.items():
        waits = [
            (r.start_s if r.start_s is not None else end_s) - r.job.submit_s
            for r in result.records
            if r.job.priority == cls
        ]
        out[f"wait_p50_s_{name}"] = _pct(waits, 50)
        out[f"wait_p95_s_{name}"] = _pct(waits, 95)
    for key in (
        "preemptions",
        "preempted_jobs",
        "preemption_waits",
        "moves",
        "spare_evictions",
        "failures",
        "jobs_killed_by_failure",
        "completed",
        "pending_at_end",
        "running_at_end",
        "plans_refused",
        "drains",
        "spare_swaps",
    ):
        out[key] = float(getattr(result, key))
    out["jobs"] = float(len(result.records))
    last_s = end_s - serve_grace_s
    out["unserved_at_end"] = float(
        sum(1 for r in result.records if r.start_s is None and r.job.submit_s < last_s)
    )
    out["node_hours"] = result.node_hours
    out["nodes_powered_on"] = float(result.powered_on)
    out["nodes_powered_off"] = float(result.powered_off)
    calls = result.victim_calls_s
    out["victim_p99_ms"] = 1000.0 * float(np.percentile(calls, 99)) if calls else 0.0
    return out
