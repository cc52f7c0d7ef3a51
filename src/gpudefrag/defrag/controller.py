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
multi-GPU pods that rarely get a plan, would use up every try.

With ``headroom_fraction`` > 0, a pod asking for 2+ GPUs is planned for only while, with it
placed, at least that fraction of the cluster's GPU capacity would stay free (shared GPUs'
remainders included).  Near full load a multi-GPU pod served by migration takes room that the
stream of small arrivals would have used, and they queue; below the headroom each GPU served
that way costs far more wait than above it.

The planner is also told how many pending pods compete for the room it would free (those
whose request fits inside the blocked pod's: CPU, memory, GPU count and GPU milli each no
larger; GPU pods only for a GPU pod; GPU models not compared) and the blocked pod's run time
(for the queue harm).  Pods marked do-not-disrupt and pods already migrating are never moved.

Run times: with ``runtimes`` unset the planner gets the simulator's true remaining run times
(a perfect estimate); with a :class:`~gpudefrag.defrag.runtime.ResidualLife` it gets, for a
running pod, the mean residual life after the time since the pod first started, and for the
blocked pod the mean run time, i.e. only what a cluster's history would tell it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpudefrag.defrag.cost import MovablePod
from gpudefrag.defrag.planner import DefragPlanner, PlannerConfig, blocked_by_fragmentation
from gpudefrag.defrag.runtime import ResidualLife
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.sim.timed import Move, SimView


@dataclass
class DefragController:
    """Adapter from :class:`DefragPlanner` to the simulator's defragmenter hook."""

    planner: DefragPlanner
    blocked_pods_per_tick: int = 2
    eviction_grace_s: float = 30.0
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
    runtimes: ResidualLife | None = None
    """Where run-time estimates come from (``None``: the simulator's true run times)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.headroom_fraction < 1.0:
            raise ValueError(f"headroom_fraction must be in [0, 1), got {self.headroom_fraction}")
        self._last_try: dict[int, float] = {}
        self._last_tick = float("-inf")

    @classmethod
    def with_config(cls, config: PlannerConfig, eviction_grace_s: float = 30.0) -> DefragController:
        return cls(DefragPlanner(config), eviction_grace_s=eviction_grace_s)

    def _movable(self, view: SimView) -> list[MovablePod]:
        out = []
        est = self.runtimes
        for r in view.running:
            s = r.spec
            # Work lost is what has run since the last checkpoint when the pod actually stops,
            # i.e. after the grace period (no checkpoint assumed inside the grace period).
            lost = r.work_since_checkpoint_s + self.eviction_grace_s
            out.append(
                MovablePod(
                    r.pod_id,
                    r.node,
                    r.gpus,
                    s.cpu_milli,
                    s.memory_mib,
                    s.num_gpu,
                    s.gpu_milli,
                    s.gpu_model_mask,
                    run_time_s=lost,
                    remaining_s=(
                        r.remaining_work_s if est is None else est.remaining_s(view.now_s - r.start_s)
                    ),
                    checkpoint_interval_s=0.0,
                    checkpoint_phase_s=0.0,
                    movable=not (r.do_not_disrupt or r.migrating),
                )
            )
        return out

    def _run_time_s(self, view: SimView, pod_id: int) -> float:
        """The blocked pod's run time as the planner is told it."""
        if self.runtimes is None:
            return float(view.workload.duration_s[pod_id])
        return self.runtimes.expected_s()

    @staticmethod
    def competing(pending: list, pod) -> int:
        """Pending pods whose request fits inside ``pod``'s (``pod`` itself included)."""
        gpu = pod.gpu_milli > 0
        return sum(
            1
            for q in pending
            if q.spec.cpu_milli <= pod.cpu_milli
            and q.spec.memory_mib <= pod.memory_mib
            and (q.spec.gpu_milli > 0) == gpu
            and q.spec.num_gpu <= pod.num_gpu
            and q.spec.gpu_milli <= pod.gpu_milli
        )

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

    def plan(self, view: SimView, now_s: float) -> list[Move]:
        if now_s - self._last_tick < self.tick_interval_s:
            return []
        self._last_tick = now_s
        reserved_pods = set(view.reservations.values())
        excluded = set(view.reservations)
        state = None
        running: list[MovablePod] | None = None
        limits = {
            "main": (self.blocked_pods_per_tick, self.plans_per_tick),
            "small": (self.small_pods_per_tick, self.small_plans_per_tick),
        }
        tried = {"main": 0, "small": 0}
        plans = {"main": 0, "small": 0}

        def spent(cls: str) -> bool:  # "small" with no budget of its own is always spent
            return tried[cls] >= limits[cls][0] or plans[cls] >= limits[cls][1]

        moves: list[Move] = []
        for pending in view.pending:
            if spent("main") and spent("small"):
                break
            cls = self._budget_class(pending.spec)
            if spent(cls) or pending.pod_id in reserved_pods:
                continue
            last = self._last_try.get(pending.pod_id)
            if last is not None and now_s - last < self.replan_after_s:
                continue
            if state is None:
                state = view.state
            if not (
                blocked_by_fragmentation(state, pending.spec) and self.leaves_headroom(state, pending.spec)
            ):
                continue
            if running is None:
                running = self._movable(view)
            plan = self.planner.plan(
                state,
                running,
                pending.spec,
                frozenset(excluded),
                max(1, self.competing(view.pending, pending.spec)),
                self._run_time_s(view, pending.pod_id),
            )
            self._last_try[pending.pod_id] = now_s
            tried[cls] += 1
            if plan is not None:
                moves += [
                    Move(m.pod_id, m.to_node, m.to_gpus, pending.pod_id, plan.target_node) for m in plan.moves
                ]
                plans[cls] += 1
                running = _apply(state, running, plan.moves)  # as the next plan will find them
                excluded.add(plan.target_node)
        return moves


def _apply(state: ClusterState, running: list[MovablePod], moves) -> list[MovablePod]:
    """Bind the moved pods on their targets in ``state`` (their sources stay held through the
    grace period) and return ``running`` with them no longer movable."""
    moved = {m.pod_id: m for m in moves}
    out = []
    for p in running:
        m = moved.get(p.pod_id)
        if m is not None:
            state.bind(Placement(m.to_node, m.to_gpus, p.spec))
            p = replace(p, movable=False)
        out.append(p)
    return out
