"""The figures suite 2 reports for one simulated run (one window, load and variant).

Every figure is over the measurement window: jobs submitted in it, time integrals over it.

* ``alloc_pct`` / ``goodput_pct``: time-averaged GPUs in use / the same less the GPU time moves
  wasted (work redone, restarts), in % of the cluster's GPUs;
* ``wait_pXX_s`` over all started jobs, ``wait_p95_s_<size>`` by job size in GPUs (``size_32p``
  = 32 or more); ``wait_p95_s_32p_censored``: the p95 wait of every 32+ GPU job submitted in
  the window, a job still pending at the window's end counted as waiting until then (so a
  variant that never starts a gang does not look fast, and every variant of a window is
  measured over the same jobs); ``jct_mean_s`` (completion - submit, completed jobs);
* ``idle_<part>_pct``: the idle GPU time split by what the queue could use of it (see
  :mod:`gpudefrag.gangs.metrics`), in % of the GPU time;
* ``pending_at_end``: jobs submitted in the window and not started by its end;
* ``gang_one_leaf_pct``: multi-node gangs started in the window with every pod in one domain of
  the lowest topology level; ``excess_spread_<level>``: domains used minus the fewest that could
  hold the gang, averaged over those gangs;
* ``whole_nodes_mean``, ``whole_<level>_mean``: time-averaged wholly free nodes and domains;
  ``stranded_gpus_mean``: free GPUs off wholly free nodes, averaged over the time a multi-node
  gang waits;
* moves, gang moves, plans (refused), GPU-hours lost; decision latency per placement call and
  per scheduling pass (p50 / p99, ms).
"""

from __future__ import annotations

import math

import numpy as np

from gpudefrag.model.topology import Topology
from gpudefrag.sim.gang_sim import GangSimResult

__all__ = ["SIZE_CLASSES", "summarise"]

SIZE_CLASSES = ((1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (32, 10**9))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _size_name(lo: int, hi: int) -> str:
    return f"{lo}p" if hi > 10**6 else f"{lo}"


def summarise(result: GangSimResult, topology: Topology) -> dict[str, float]:
    recs = result.records
    started = [r for r in recs if r.start_s is not None]
    waits = [r.start_s - r.job.submit_s for r in started if r.start_s is not None]
    out: dict[str, float] = {
        "alloc_pct": 100.0 * result.allocation,
        "goodput_pct": 100.0 * result.goodput,
        "jobs": float(len(recs)),
        "wait_p50_s": _pct(waits, 50),
        "wait_p95_s": _pct(waits, 95),
        "wait_p99_s": _pct(waits, 99),
        "pending_at_end": float(len(recs) - len(started)),
    }
    for lo, hi in SIZE_CLASSES:
        w = [r.start_s - r.job.submit_s for r in started if lo <= r.job.gpus <= hi and r.start_s is not None]
        name = _size_name(lo, hi)
        out[f"wait_p50_s_{name}"] = _pct(w, 50)
        out[f"wait_p95_s_{name}"] = _pct(w, 95)
        out[f"wait_p99_s_{name}"] = _pct(w, 99)
    end_s = result.meter.end_s
    big = [(r.start_s if r.start_s is not None else end_s) - r.job.submit_s for r in recs if r.job.gpus >= 32]
    out["wait_p95_s_32p_censored"] = _pct(big, 95)
    done = [r.end_s - r.job.submit_s for r in recs if r.end_s is not None]
    out["jct_mean_s"] = float(np.mean(done)) if done else float("nan")
    out.update(_spread(result, topology))
    m = result.meter
    out["whole_nodes_mean"] = m.whole_nodes_s / m.span_s
    for li, name in enumerate(topology.levels):
        out[f"whole_{name}_mean"] = (m.whole_domains_s[li] / m.span_s) if m.whole_domains_s else 0.0
    out["stranded_gpus_mean"] = m.stranded_gpu_s / m.gang_wait_s if m.gang_wait_s > 0 else 0.0
    out["gang_wait_share_pct"] = 100.0 * m.gang_wait_s / m.span_s
    gpu_span_s = m.span_s * result.total_gpus
    out["idle_empty_pct"] = 100.0 * m.idle_empty_gpu_s / gpu_span_s
    out["idle_blocked_pct"] = 100.0 * m.idle_blocked_gpu_s / gpu_span_s
    out["idle_reachable_pct"] = 100.0 * m.idle_reachable_gpu_s / gpu_span_s
    out["idle_surplus_pct"] = 100.0 * m.idle_surplus_gpu_s / gpu_span_s
    out["migrations"] = float(result.migrations)
    out["gang_moves"] = float(result.gang_moves)
    out["plans"] = float(result.plans)
    out["plans_refused"] = float(result.plans_refused)
    out["gpu_hours_lost"] = result.waste_gpu_s / 3600.0
    out["decision_p50_ms"] = 1e3 * _pct(result.place_calls_s, 50)
    out["decision_p99_ms"] = 1e3 * _pct(result.place_calls_s, 99)
    out["pass_p99_ms"] = 1e3 * _pct(result.pass_s, 99)
    out["batch_p99_ms"] = 1e3 * _pct(result.batch_calls_s, 99) if result.batch_calls_s else 0.0
    out["defrag_p99_ms"] = 1e3 * _pct(result.defrag_calls_s, 99) if result.defrag_calls_s else 0.0
    out["wall_s"] = result.wall_s
    return out


def _spread(result: GangSimResult, topology: Topology) -> dict[str, float]:
    gangs = [r for r in result.records if r.start_s is not None and len(set(r.nodes)) > 1]
    out: dict[str, float] = {"gangs_started": float(len(gangs))}
    if not topology.levels:
        return out
    one_leaf = 0
    for li, name in enumerate(topology.levels):
        dom = topology.domains(li)
        biggest = int(topology.domain_sizes(li).max())
        excess = []
        for r in gangs:
            used = len(set(dom[list(r.nodes)].tolist()))
            excess.append(used - math.ceil(len(r.nodes) / biggest))
            if li == 0 and used == 1:
                one_leaf += 1
        out[f"excess_spread_{name}"] = float(np.mean(excess)) if excess else 0.0
    out["gang_one_leaf_pct"] = 100.0 * one_leaf / len(gangs) if gangs else float("nan")
    return out
