"""``gpudefrag bench --gpus N --stream openb --batch B``: the batch placer on a realistic stream.

The cluster is :mod:`~gpudefrag.experiments.bench.stream`'s (the workload's nodes repeated to
``gpus`` GPUs, filled to ``fill`` by FGD); then the next ``decisions`` arrivals are decided in
consecutive batches of ``batch`` pods by the solver's scheduler
(:class:`~gpudefrag.batch.scheduler.BatchScheduler` with the default
:class:`~gpudefrag.batch.solver_config.SolverConfig`: FGD's plan as the hint, each pod's top
FGD candidates, CP-SAT on a deterministic budget, the referee), one cycle per batch on the one
long-lived state, each placement bound before the next batch.  Timed per batch, around
``decide``, after loading the compiled kernels and CP-SAT on a two-node state:

* **index**: the scheduler attached to the state (:meth:`BatchScheduler.attach`): FGD's plan
  and the candidates read FGD's incremental index (the workload's requests warmed on attach,
  timed apart);
* **scan**: never attached: FGD's plan and every pod's candidates score every node.

Reported per mode: p50 / p99 / max per batch (ms), and of the same the part outside CP-SAT's
own solve (FGD's plan, candidates, patterns, referee: what the index serves), and whether both
modes placed every batch alike.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.experiments.bench.scale import warm_up
from gpudefrag.experiments.bench.stream import filled_cluster
from gpudefrag.experiments.common.inputs import workload_inputs
from gpudefrag.frag.typical import TypicalPods
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.pods import PodBatch, PodSpec
from gpudefrag.model.port import PendingPod, RunningPod
from gpudefrag.policies.registry import make_policy

__all__ = ["BatchStreamResult", "bench_batch_stream", "format_batch_stream"]


@dataclass(frozen=True)
class _Cycle:
    """A scheduling cycle of one batch at time 0: nothing blocked, nothing running shown."""

    state: ClusterState
    pending: Sequence[PendingPod]
    now_s: float = 0.0
    blocked: Sequence[PendingPod] = ()

    def running_on(self, node: int) -> Sequence[RunningPod]:
        return ()


@dataclass(frozen=True)
class BatchStreamResult:
    """One mode's batches: wall ms per batch (the whole ``decide``), CP-SAT's own solve ms in
    it, the placements per batch as ``(arrival, node, gpus)``, and the process's peak RSS."""

    mode: str  # "index" or "scan"
    gpus: int
    nodes: int
    fill_pct: float
    batch: int
    batch_ms: np.ndarray
    solve_ms: np.ndarray
    placements: tuple[tuple[tuple[int, int, tuple[int, ...]], ...], ...]
    attach_s: float
    max_rss_mib: float

    @property
    def placed(self) -> int:
        return sum(len(p) for p in self.placements)


def warm_up_batches(typical: TypicalPods) -> None:
    """Load the solver's scheduler's compiled kernels and CP-SAT (attached and scanning) on a
    two-node state, so that the first timed batch does not include loading them."""
    warm_up("fgd", typical)
    for attach in (True, False):
        tiny = ClusterState(
            ("a", "b"), np.zeros(2, dtype=np.int64), np.full(2, 8), np.full(2, 64_000), np.full(2, 1 << 20)
        )
        scheduler = BatchScheduler(BatchPlacer(typical), batch_size=2, max_pending=2)
        if attach:
            scheduler.attach(tiny)
        pods = [PendingPod(i, PodSpec(1000, 1024, 1, 1000), 0.0, 0, False) for i in range(2)]
        scheduler.decide(_Cycle(tiny, pods))
        scheduler.placer.fgd.reset()


def stream_batches(
    state: ClusterState, arrivals: PodBatch, first: int, decisions: int, batch: int, scheduler: BatchScheduler
) -> tuple[np.ndarray, np.ndarray, tuple[tuple[tuple[int, int, tuple[int, ...]], ...], ...]]:
    """(ms per batch, CP-SAT solve ms per batch, placements per batch) of arrivals ``first ..
    first + decisions - 1`` decided by ``scheduler`` in batches of ``batch`` on ``state``
    (changed: each batch's placements bound)."""
    ms, solve_ms, placed = [], [], []
    for lo in range(first, first + decisions, batch):
        hi = min(lo + batch, first + decisions)
        pending = [PendingPod(i, arrivals.pod(i), 0.0, 0, False) for i in range(lo, hi)]
        started = time.perf_counter()
        decision = scheduler.decide(_Cycle(state, pending))
        ms.append((time.perf_counter() - started) * 1e3)
        solve_ms.append(sum(st.solve_wall_s for st in scheduler.last_stats) * 1e3)
        for b in decision.binds:
            state.bind(b.placement)
        placed.append(tuple((b.pod_id, b.placement.node, b.placement.gpus) for b in decision.binds))
    return np.array(ms), np.array(solve_ms), tuple(placed)


def bench_batch_stream(
    workload: str, gpus: int, batch: int = 16, decisions: int = 2000, seed: int = 42, fill: float = 0.85
) -> list[BatchStreamResult]:
    """The module docstring's bench: the index mode, then the scan mode."""
    inputs = workload_inputs(workload)
    warm_up_batches(inputs.typical)
    filler = make_policy("fgd", inputs.typical, seed)
    filler.expect(inputs.pods.requests())
    state, arrivals, first, _ = filled_cluster(workload, gpus, filler, seed, fill)
    fill_pct = 100.0 * state.used_gpu_milli / state.gpu_capacity_milli
    decisions = min(decisions, len(arrivals) - first)
    out = []
    for mode in ("index", "scan"):
        work = state.copy()
        placer = BatchPlacer(inputs.typical)
        scheduler = BatchScheduler(placer, batch_size=batch, max_pending=batch)
        attach_s = 0.0
        if mode == "index":
            placer.fgd.expect(inputs.pods.requests())
            started = time.perf_counter()
            scheduler.attach(work)
            attach_s = time.perf_counter() - started
        ms, solve_ms, placed = stream_batches(work, arrivals, first, decisions, batch, scheduler)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        gpus_total = int(state.gpu_count.sum())
        out.append(
            BatchStreamResult(
                mode, gpus_total, state.num_nodes, fill_pct, batch, ms, solve_ms, placed, attach_s, rss
            )
        )
        placer.fgd.reset()
    return out


def format_batch_stream(results: list[BatchStreamResult]) -> str:
    """The results as a table (ms per batch), then whether the modes placed alike."""
    lines = [
        f"{'mode':<6} {'batches':>7} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'outside p50':>12} "
        f"{'outside p99':>12} {'outside max':>12} {'placed':>7} {'attach s':>9} {'RSS peak MiB':>13}"
    ]
    for r in results:
        outside = r.batch_ms - r.solve_ms
        lines.append(
            f"{r.mode:<6} {r.batch_ms.size:>7} {np.percentile(r.batch_ms, 50):>9.2f} "
            f"{np.percentile(r.batch_ms, 99):>9.2f} {r.batch_ms.max():>9.2f} {np.percentile(outside, 50):>12.2f} "
            f"{np.percentile(outside, 99):>12.2f} {outside.max():>12.2f} {r.placed:>7} {r.attach_s:>9.2f} "
            f"{r.max_rss_mib:>13.0f}"
        )
    lines.append(
        "outside: the batch's ms outside CP-SAT's own solve (FGD's plan, candidates, patterns, referee)"
    )
    by_mode = {r.mode: r for r in results}
    if "index" in by_mode and "scan" in by_mode:
        a, b = by_mode["index"].placements, by_mode["scan"].placements
        same = sum(x == y for x, y in zip(a, b))
        lines.append(f"index and scan placed {same:,} of {len(a):,} batches alike")
    return "\n".join(lines)
