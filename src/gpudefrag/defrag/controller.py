"""The defragmenter the time-driven simulator calls: blocked pod -> plan -> moves with a reservation.

At the end of a scheduling session that left pods pending (at most once per tick), it looks at
the pending pods in scheduling order (priority, then age), skips those already holding a
reservation or tried within ``replan_after_s``, and for the pods that are *blocked by
fragmentation* asks the planner for the cheapest plan (at most ``max_moves`` moves,
hysteresis applied); at most ``blocked_pods_per_tick`` pods are tried per tick.  Each plan
found is returned as moves that reserve the freed node for its blocked pod; up to
``plans_per_tick`` plans per tick, each made on the state the earlier ones leave (their moved
pods bound on their targets and no longer movable, their freed nodes excluded).

With ``small_pods_per_tick`` > 0, pods asking for at most one GPU (whole or shared) have a
budget of their own (``small_pods_per_tick`` tries, ``small_plans_per_tick`` plans): their plans
are mostly cheap consolidations of shared GPUs, and in a shared budget the oldest pods, large
multi-GPU pods that rarely get a plan, would use up every try.  They may also have a hysteresis
margin of their own (``small_margin``).

With ``headroom_fraction`` > 0, a pod asking for 2+ GPUs is planned for only while, with it
placed, at least that fraction of the cluster's GPU capacity would stay free (shared GPUs'
remainders included).  Near full load a multi-GPU pod served by migration takes room that the
stream of small arrivals would have used, and they queue; below the headroom each GPU served
that way costs far more wait than above it.

The planner is also told how many pending pods compete for the room it would free (those
whose request fits inside the blocked pod's: CPU, memory, GPU count and GPU milli each no
larger; GPU pods only for a GPU pod; GPU models not compared) and the blocked pod's run time
(for the queue harm).  Pods marked do-not-disrupt and pods already migrating are never moved.
A pending pod's ``excluded_nodes`` (nodes it may not use) are neither freed for it nor counted
in whether it is blocked; a running pod's ``excluded_nodes`` are never its destination.

The controller reads the cluster only through :class:`gpudefrag.model.port.ClusterPort` and
returns actions: per plan, a :class:`~gpudefrag.model.port.Reserve` of the freed node for its
blocked pod followed by the plan's :class:`~gpudefrag.model.port.Move` actions.  What a move
would lose is the pod's run time since its last checkpoint plus the eviction grace period (no
checkpoint assumed inside it).  Run times come from ``runtimes`` (a
:class:`~gpudefrag.model.port.RuntimeEstimator`): by default a history-based estimate such as
:class:`~gpudefrag.defrag.runtime.ResidualLife`; an experiment may pass an oracle.  When the
planner averages the natural wait over draws (``wait_draws`` > 0), the controller draws the
running pods' remaining run times once per tick, at stratified levels paired across pods by
its own generator (seeded with ``draw_seed``), so a run is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from gpudefrag.defrag.blocked import blocked_by_fragmentation
from gpudefrag.defrag.cost import MovablePod
from gpudefrag.defrag.natural_wait import RunningDraws, stratified_levels
from gpudefrag.defrag.planner import DefragPlanner, PlannedMove
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.port import Action, ClusterPort, Move, PendingPod, Reserve, RunningPod, RuntimeEstimator
from gpudefrag.model.statement import PodLedger, Statement


@dataclass
class DefragController:
    """Blocked pods -> planner -> reserve-and-move actions (module docstring)."""

    planner: DefragPlanner
    runtimes: RuntimeEstimator
    """Where run-time estimates come from."""
    blocked_pods_per_tick: int = 2
    replan_after_s: float = 120.0
    """A pod for which no plan was found is not planned for again before this much time has passed."""
    tick_interval_s: float = 30.0
    """The controller plans at most once per tick (a periodic controller, not one per session)."""
    plans_per_tick: int = 1
    """Plans (each for another blocked pod, on the state the earlier ones leave) per tick."""
    small_pods_per_tick: int = 0
    """Tries per tick for blocked pods asking for at most one GPU, on a budget of their own
    (0: they share ``blocked_pods_per_tick`` and ``plans_per_tick`` with the others)."""
    small_plans_per_tick: int = 1
    """Plans per tick for those pods when they have their own budget."""
    headroom_fraction: float = 0.0
    """Pods of 2+ GPUs get plans only while this fraction of GPU capacity would stay free
    with them placed (0: always)."""
    min_wait_s: float = 0.0
    """A pod gets plans only once it has waited this long since it arrived (0: at once)."""
    small_margin: float | None = None
    """Hysteresis margin of the plans for pods of at most one GPU, when they have a budget of
    their own (None: the planner's ``margin``).  Below 0 such a plan may cost more than it
    saves: it buys a shorter wait for the pods whose waits make the wait tail."""
    draw_seed: int = 0
    """Seed of the generator that pairs the run-time draws across pods (with the planner's
    ``wait_draws`` > 0)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.headroom_fraction < 1.0:
            raise ValueError(f"headroom_fraction must be in [0, 1), got {self.headroom_fraction}")
        self._last_try: dict[int, float] = {}
        self._last_tick = float("-inf")
        self._rng = np.random.default_rng(self.draw_seed)
        if self.small_margin is not None and not self.small_margin > -1.0:
            raise ValueError(f"small_margin must be above -1, got {self.small_margin}")

    @classmethod
    def with_config(cls, config: PlannerConfig, runtimes: RuntimeEstimator) -> DefragController:
        return cls(DefragPlanner(config), runtimes)

    def _movable(self, pods: Sequence[RunningPod], now_s: float) -> list[MovablePod]:
        grace_s = self.planner.config.migration.eviction_grace_s
        remaining_s = self.runtimes.remaining_all_s(pods, now_s).tolist()
        return [
            MovablePod(
                r.pod_id,
                r.node,
                r.gpus,
                r.spec,
                lost_work_s=r.work_since_checkpoint_s + grace_s,
                remaining_s=rem_s,
                movable=not (r.do_not_disrupt or r.migrating),
                excluded_nodes=r.excluded_nodes,
            )
            for r, rem_s in zip(pods, remaining_s)
        ]

    def _draws(
        self, pods: Sequence[RunningPod], now_s: float, num_nodes: int, running: list[MovablePod]
    ) -> RunningDraws | None:
        """Joint draws of the running ``pods``' further run times (``None`` when the planner
        averages no draws); ``running`` is ``pods`` as the planner sees them."""
        k = self.planner.config.wait_draws
        if k == 0:
            return None
        levels = stratified_levels(len(pods), k, self._rng)
        return RunningDraws.build(
            num_nodes, running, self.runtimes.remaining_quantiles_s(pods, now_s, levels)
        )

    @staticmethod
    def competing(
        pending: Sequence[PendingPod], pod: PodSpec, requests: npt.NDArray[np.int64] | None = None
    ) -> int:
        """Pending pods whose request fits inside ``pod``'s (``pod`` itself included).
        ``requests``: :func:`request_table` of ``pending``, when the caller has it."""
        cpu, mem, num_gpu, gpu_milli = request_table(pending) if requests is None else requests
        inside = (
            (cpu <= pod.cpu_milli)
            & (mem <= pod.memory_mib)
            & ((gpu_milli > 0) == (pod.gpu_milli > 0))
            & (num_gpu <= pod.num_gpu)
            & (gpu_milli <= pod.gpu_milli)
        )
        return int(np.count_nonzero(inside))

    def leaves_headroom(self, state: ClusterState, pod: PodSpec) -> bool:
        """True if ``pod`` asks for at most one GPU, or if with it placed at least
        ``headroom_fraction`` of the GPU capacity would still be free."""
        if pod.num_gpu < 2 or self.headroom_fraction <= 0.0:
            return True
        free_after_milli = int(state.gpu_milli_left.sum()) - pod.num_gpu * pod.gpu_milli
        return free_after_milli >= self.headroom_fraction * state.gpu_capacity_milli

    def _budget_class(self, spec: PodSpec) -> str:
        """``small`` for pods of at most one GPU when they have their own budget, else ``main``."""
        return "small" if self.small_pods_per_tick > 0 and spec.num_gpu <= 1 else "main"

    def plan(self, cluster: ClusterPort) -> list[Action]:
        """Reserve-and-move actions for this tick (none between ticks)."""
        now_s = cluster.now_s
        if now_s - self._last_tick < self.tick_interval_s:
            return []
        self._last_tick = now_s
        reservations = cluster.reservations
        reserved_pods = set(reservations.values())
        excluded = set(reservations)
        state: ClusterState | None = None
        running: list[MovablePod] | None = None
        draws: RunningDraws | None = None
        requests: npt.NDArray[np.int64] | None = None  # the pending pods' requests, once needed
        limits = {
            "main": (self.blocked_pods_per_tick, self.plans_per_tick),
            "small": (self.small_pods_per_tick, self.small_plans_per_tick),
        }
        tried = {"main": 0, "small": 0}
        plans = {"main": 0, "small": 0}

        def spent(cls: str) -> bool:  # "small" with no budget of its own is always spent
            return tried[cls] >= limits[cls][0] or plans[cls] >= limits[cls][1]

        actions: list[Action] = []
        pending_pods = cluster.pending
        for pending in pending_pods:
            if spent("main") and spent("small"):
                break
            cls = self._budget_class(pending.spec)
            if spent(cls) or pending.pod_id in reserved_pods:
                continue
            last = self._last_try.get(pending.pod_id)
            if last is not None and now_s - last < self.replan_after_s:
                continue
            if now_s - pending.arrival_s < self.min_wait_s:
                continue
            if state is None:
                state = cluster.snapshot()
            if not (
                blocked_by_fragmentation(state, pending.spec, pending.excluded_nodes)
                and self.leaves_headroom(state, pending.spec)
            ):
                continue
            if requests is None:
                requests = request_table(pending_pods)
            if running is None:
                pods = cluster.running
                running = self._movable(pods, now_s)
                draws = self._draws(pods, now_s, state.num_nodes, running)
            plan = self.planner.plan(
                state,
                running,
                pending.spec,
                frozenset(excluded),
                max(1, self.competing(pending_pods, pending.spec, requests)),
                self.runtimes.expected_s(pending),
                draws,
                self.small_margin if cls == "small" else None,  # one planner: one memo for both
                pending.excluded_nodes,
            )
            self._last_try[pending.pod_id] = now_s
            tried[cls] += 1
            if plan is not None:
                actions.append(Reserve(plan.target_node, pending.pod_id))
                actions += [Move(m.pod_id, m.to_node, m.to_gpus) for m in plan.moves]
                plans[cls] += 1
                running = _apply(state, running, plan.moves)  # as the next plan will find them
                excluded.add(plan.target_node)
        return actions


def request_table(pending: Sequence[PendingPod]) -> npt.NDArray[np.int64]:
    """The pods' requests as rows (cpu_milli, memory_mib, num_gpu, gpu_milli) of one array."""
    rows = [(q.spec.cpu_milli, q.spec.memory_mib, q.spec.num_gpu, q.spec.gpu_milli) for q in pending]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), 4).T


def _apply(state: ClusterState, running: list[MovablePod], moves: Sequence[PlannedMove]) -> list[MovablePod]:
    """Commit the plan's statement to ``state``: every moved pod bound on its target, its source
    held through the grace period; returns ``running`` with the moved pods no longer movable."""
    moved = {m.pod_id: m for m in moves}
    on = {p.pod_id: Placement(p.node, p.gpus, p.spec) for p in running if p.pod_id in moved}
    stmt: Statement[Placement, Placement] = Statement(PodLedger(state, on))
    for m in moves:
        stmt.move(m.pod_id, Placement(m.to_node, m.to_gpus, on[m.pod_id].pod), hold_source=True)
    stmt.commit()
    return [replace(p, movable=False) if p.pod_id in moved else p for p in running]
