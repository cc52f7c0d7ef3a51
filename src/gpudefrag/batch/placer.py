"""The batch placer: FGD's sequential answer as the hint, patterns, CP-SAT, validation.

For a batch of pending pods on a state:

1. **Hint.** Place the batch with FGD one pod at a time on a copy: FGD's answer.
2. **Candidates.** Per pod, the top ``candidates_per_pod`` nodes by FGD score on the batch's
   starting state (ties by tie rank), plus the node FGD's answer used.
3. **Patterns.** Per candidate node, the subsets of the pods that list it that fit together
   (exact GPU assignment, exact fragmentation afterwards), plus FGD's own subset on that node.
4. **Solve.** CP-SAT set packing (see :mod:`gpudefrag.batch.cpsat`), FGD's patterns as the hint.
   With ``age_weight_milli_per_s`` > 0 a placed pod counts, besides its GPU milli, an *age
   bonus*: its wait so far times that weight (see :func:`age_bonus_milli`), so the solver passes
   an older pod over for a younger one only when the GPU milli gained exceeds the difference
   (with ``age_max_gpus`` set, only pods of at most that many GPUs earn one).
   With ``whole_gpu_above_milli`` > 0 a sharing pod asking more than that counts as a whole GPU
   (see :func:`whole_gpu_bonus_milli`).
5. **Trust nothing.** Replay the solver's plan on a copy (:func:`evaluate_plan`); keep it only
   if it is valid and strictly better than FGD's plan under the exact objective, compared on
   the union of the nodes either plan touches.  Otherwise FGD's plan stands and the reason is
   counted: ``timeout`` (no solution in the budget), ``error``, ``infeasible``, ``invalid``
   (the replay failed), or ``not_better``.

With ``lifetime_ties`` and node lifetimes given (:mod:`gpudefrag.batch.lifetime`), FGD's plan
breaks its score ties by the nodes' expected busy times before the tie rank.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from gpudefrag.batch.bonuses import age_bonus_milli, whole_gpu_bonus_milli
from gpudefrag.batch.cpsat import SolveOutcome, best_single, solve_patterns
from gpudefrag.batch.lifetime import NodeLifetimes
from gpudefrag.batch.objective import PlanError, node_frag
from gpudefrag.batch.patterns import Pattern, enumerate_patterns
from gpudefrag.batch.protect import protected_nodes
from gpudefrag.batch.referee import referee
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.batch.stats import BatchResult, BatchStats
from gpudefrag.frag.typical import TypicalPods
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.fit import node_view
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.fgd import FgdPolicy


@dataclass
class BatchPlacer:
    """Decides a batch jointly; never returns a plan worse than FGD's under the exact objective."""

    typical: TypicalPods
    config: SolverConfig = field(default_factory=SolverConfig)

    def __post_init__(self) -> None:
        weight = self.config.age_weight_milli_per_s
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"age_weight_milli_per_s must be a finite number >= 0, got {weight}")
        if self.config.age_max_gpus < 0:
            raise ValueError(f"age_max_gpus must be >= 0, got {self.config.age_max_gpus}")
        above = self.config.whole_gpu_above_milli
        if not 0 <= above < GPU_MILLI_PER_GPU:
            raise ValueError(f"whole_gpu_above_milli must be in [0, {GPU_MILLI_PER_GPU}), got {above}")
        self.fgd = FgdPolicy(self.typical)
        self._tp = self.typical.kernel_args
        self.fallbacks: Counter[str] = Counter()

    def attach(self, state: ClusterState) -> None:
        """Keep FGD's incremental index of ``state``, a long-lived state that batches are decided
        on again and again: FGD's plan and the candidates then cost what changed, not a scan
        of every node (the same answers)."""
        self.fgd.attach(state)

    # --------------------------------------------------------------------- steps
    def age_bonuses(self, pods: Sequence[PodSpec], waited_s: Sequence[float]) -> list[int]:
        """Each pod's age bonus under this config (:func:`age_bonus_milli`; 0 for a pod asking
        more than ``age_max_gpus`` GPUs when that is set); empty when the config weighs no
        waits or no waits are given."""
        weight = self.config.age_weight_milli_per_s
        if weight <= 0 or not waited_s:
            return []
        if len(waited_s) != len(pods):
            raise ValueError(f"{len(waited_s)} waits for {len(pods)} pods")
        most = self.config.age_max_gpus
        return [
            age_bonus_milli(w, weight) if most <= 0 or p.num_gpu <= most else 0
            for p, w in zip(pods, waited_s)
        ]

    def pod_bonuses(self, pods: Sequence[PodSpec], waited_s: Sequence[float]) -> list[int]:
        """Each pod's bonus in the objective's first term: its age bonus (:meth:`age_bonuses`)
        plus its whole-GPU bonus (:func:`whole_gpu_bonus_milli`); empty when neither applies."""
        age = self.age_bonuses(pods, waited_s)
        whole = [whole_gpu_bonus_milli(p, self.config.whole_gpu_above_milli) for p in pods]
        if not any(whole):
            return age
        return [a + w for a, w in zip(age, whole)] if age else whole

    def protected(self, state: ClusterState, blocked: Iterable[PodSpec]) -> frozenset[int]:
        """The nodes to keep free for ``blocked`` (queue order) under this config."""
        cfg = self.config
        return protected_nodes(state, blocked, cfg.protect_blocked, cfg.protect_min_gpus)

    def fgd_plan(
        self,
        state: ClusterState,
        pods: list[PodSpec],
        avoid: frozenset[int] = frozenset(),
        lifetimes: NodeLifetimes | None = None,
        run_s: Sequence[float] = (),
    ) -> list[Placement | None]:
        """FGD's sequential answer for the batch (bound on ``state`` while it is planned, and
        unbound before it returns: ``state`` is left as it was).  A pod goes
        to a node in ``avoid`` only when it fits no other node.  With ``lifetime_ties`` and
        ``lifetimes``, score ties go to the node expected to stay busy longest
        (:meth:`~gpudefrag.policies.fgd.FgdPolicy.select_preferring`), and each placed pod
        extends its node's busy time to its expected run time ``run_s[i]`` (``lifetimes`` itself
        is not changed).

        Within the plan nodes only fill up, so a pod shape that fitted nowhere (or nowhere outside
        ``avoid``) fits nowhere later either: it is not asked again."""
        lives = lifetimes.copy() if lifetimes is not None and self.config.lifetime_ties else None
        if lives is not None and len(run_s) != len(pods):
            raise ValueError(f"{len(run_s)} expected run times for {len(pods)} pods")

        def select(on: ClusterState, pod: PodSpec) -> Placement | None:
            if lives is None:
                return self.fgd.select(on, pod)
            return self.fgd.select_preferring(on, pod, lives.of_nodes)

        masked = None
        if avoid:
            masked = state.copy()
            for node in avoid:
                masked.mask(node)
        nowhere: set[tuple[int, ...]] = set()
        not_outside: set[tuple[int, ...]] = set()
        plan: list[Placement | None] = []
        bound: list[Placement] = []
        try:
            for i, pod in enumerate(pods):
                shape = pod.fit_key
                p = None
                if shape not in nowhere:
                    if masked is not None and shape not in not_outside:
                        p = select(masked, pod)
                        if p is None:
                            not_outside.add(shape)
                    if p is None:
                        p = select(state, pod)
                        if p is None:
                            nowhere.add(shape)
                if p is not None:
                    state.bind(p)
                    bound.append(p)
                    if masked is not None and p.node not in avoid:
                        masked.bind(p)
                    if lives is not None:
                        lives.bind(p.node, run_s[i])
                plan.append(p)
        finally:
            for p in reversed(bound):
                state.unbind(p)
        return plan

    def candidates(
        self, state: ClusterState, pods: list[PodSpec], hint: list[Placement | None]
    ) -> dict[int, list[int]]:
        """``{node: [pod indices]}``: pods whose top-K FGD nodes (or hint node) include the node,
        each list ordered by how highly the pod ranks the node."""
        k = self.config.candidates_per_pod
        prefs: dict[int, list[tuple[int, int]]] = {}
        for i, pod in enumerate(pods):
            top = self.fgd.top_nodes(state, pod, k).tolist()
            h = hint[i]
            if h is not None and h.node not in top:
                top.append(h.node)
            for rank, n in enumerate(top):
                prefs.setdefault(n, []).append((rank, i))
        return {n: [i for _, i in sorted(lst)] for n, lst in prefs.items()}

    def _penalty(self, state: ClusterState, node: int, protected: frozenset[int]) -> float:
        """What using ``node`` adds to a plan's fragmentation: its protection, if any."""
        return self.config.protect_penalty_milli if node in protected else 0.0

    def patterns(
        self,
        state: ClusterState,
        pods: list[PodSpec],
        hint: list[Placement | None],
        protected: frozenset[int] = frozenset(),
        age_milli: Sequence[int] = (),
    ) -> tuple[list[Pattern], list[int]]:
        """All patterns, and the indices of those that make up FGD's answer; each carries its
        members' bonuses ``age_milli[i]`` (age and whole-GPU: :meth:`pod_bonuses`; none if
        empty)."""
        cfg = self.config
        out: list[Pattern] = []
        index: dict[tuple[int, tuple[int, ...]], int] = {}
        hint_nodes: dict[int, list[int]] = {}
        for i, p in enumerate(hint):
            if p is not None:
                hint_nodes.setdefault(p.node, []).append(i)
        for node, cands in sorted(self.candidates(state, pods, hint).items()):
            base = node_view(state, node)
            # Penalties (idle, protected) count as fragmentation before nothing is placed.
            before = node_frag(state, node, self._tp) - self._penalty(state, node, protected)
            for pat in enumerate_patterns(
                node,
                base,
                before,
                pods,
                cands,
                self._tp,
                cfg.max_pattern_size,
                cfg.max_patterns_per_node,
                cfg.prune_infeasible,
            ):
                index.setdefault((node, pat.members), len(out))
                if index[(node, pat.members)] == len(out):
                    out.append(pat)
        hint_idx: list[int] = []
        for node, members in hint_nodes.items():
            members_t = tuple(members)
            pat = self._hint_pattern(state, node, members_t, hint, pods, protected)
            key = (node, members_t)
            if key in index and out[index[key]].gpus == pat.gpus:
                hint_idx.append(index[key])
            else:
                out.append(pat)
                hint_idx.append(len(out) - 1)
        if any(age_milli):
            out = [replace(p, age_milli=sum(age_milli[i] for i in p.members)) for p in out]
        return out, hint_idx

    def _hint_pattern(
        self,
        state: ClusterState,
        node: int,
        members: tuple[int, ...],
        hint: list[Placement | None],
        pods: list[PodSpec],
        protected: frozenset[int],
    ) -> Pattern:
        """FGD's own subset on ``node`` with FGD's own GPUs, as a pattern (its fragmentation
        afterwards read with the subset bound on ``state``, unbound before it returns)."""
        placed = [hint[i] for i in members]
        bound: list[Placement] = []
        try:
            for p in placed:
                if p is None:
                    raise ValueError(f"a member of FGD's pattern on node {node} has no placement")
                state.bind(p)
                bound.append(p)
            after = node_frag(state, node, self._tp)
        finally:
            for p in reversed(bound):
                state.unbind(p)
        gpus = tuple(p.gpus for p in bound)
        penalty = self._penalty(state, node, protected)
        return Pattern(
            node,
            members,
            gpus,
            sum(pods[i].total_gpu_milli for i in members),
            after,
            node_frag(state, node, self._tp) - penalty,
        )

    # --------------------------------------------------------------------- decide
    def place(
        self,
        state: ClusterState,
        pods: list[PodSpec],
        protected: frozenset[int] = frozenset(),
        waited_s: Sequence[float] = (),
        lifetimes: NodeLifetimes | None = None,
        run_s: Sequence[float] = (),
    ) -> BatchResult:
        """Decide the batch on ``state`` (not mutated), keeping off ``protected`` nodes where
        possible (FGD's plan avoids them; the solver pays ``protect_penalty_milli`` each).

        ``waited_s[i]``: how long pod ``i`` has waited (for its age bonus; none if empty).
        ``lifetimes`` and ``run_s[i]`` (pod ``i``'s expected run time) break FGD's ties when
        ``lifetime_ties`` is set (see :meth:`fgd_plan`)."""
        started = time.perf_counter()
        age = self.pod_bonuses(pods, waited_s)
        hint = self.fgd_plan(state, pods, protected, lifetimes, run_s)
        fgd_list = [p for p in hint if p is not None]
        if len(pods) < self.config.min_solver_batch:
            return self._fgd_only(hint, fgd_list, len(pods), started)
        patterns, hint_idx = self.patterns(state, pods, hint, protected, age)
        if not patterns:  # no pod fits any node: nothing to decide
            return self._fgd_only(hint, fgd_list, len(pods), started)
        outcome, solver_plan, fallback = self._solve(patterns, hint_idx, pods)
        chosen_plan, chosen_obj, fgd_obj, verdict = referee(
            state, self.typical, self.config.protect_penalty_milli, hint, solver_plan, protected, age
        )
        fallback = fallback or verdict
        if fallback:
            self.fallbacks[fallback] += 1
        stats = BatchStats(
            size=len(pods),
            patterns=len(patterns),
            variables=outcome.variables if outcome else len(patterns),
            constraints=outcome.constraints if outcome else 0,
            status=outcome.status if outcome else "error",
            source="fgd" if chosen_plan is hint else "solver",
            fallback=fallback,
            solver_objective=outcome.objective if outcome else None,
            hint_objective=outcome.hint_objective if outcome else 0,
            fgd_gpu_milli=fgd_obj.gpu_milli,
            chosen_gpu_milli=chosen_obj.gpu_milli,
            fgd_frag_milli=fgd_obj.frag_milli,
            chosen_frag_milli=chosen_obj.frag_milli,
            solve_wall_s=outcome.wall_s if outcome else 0.0,
            deterministic_s=outcome.deterministic_s if outcome else 0.0,
            total_wall_s=time.perf_counter() - started,
            wall_limited=bool(outcome and outcome.wall_limited),
        )
        return BatchResult(chosen_plan, stats)

    def _solve(
        self,
        patterns: list[Pattern],
        hint_idx: list[int],
        pods: list[PodSpec],
    ) -> tuple[SolveOutcome | None, list[Placement | None] | None, str]:
        """(outcome, decoded plan or None, fallback reason or "")."""
        try:
            if len(pods) == 1:  # exact without a solver: the least fragmentation change wins
                outcome = best_single(patterns, hint_idx)
            else:
                cfg = self.config
                outcome = solve_patterns(
                    patterns,
                    len(pods),
                    hint_idx,
                    cfg.time_limit_s,
                    cfg.deterministic_time if cfg.deterministic else None,
                    cfg.seed,
                    cfg.workers,
                )
        except Exception as exc:  # a solver crash must never stop a run: fall back and count it
            self.last_error = repr(exc)
            return None, None, "error"
        if outcome.status == "unknown":
            return outcome, None, "timeout"
        if outcome.status in ("infeasible", "model_invalid"):
            return outcome, None, "infeasible" if outcome.status == "infeasible" else "error"
        try:
            return outcome, self._decode(patterns, outcome.chosen, pods), ""
        except PlanError:
            return outcome, None, "invalid"

    def _fgd_only(
        self, hint: list[Placement | None], fgd_list: list[Placement], size: int, started: float
    ) -> BatchResult:
        """FGD's plan, no solve (batch below ``min_solver_batch``, or nothing fits anywhere)."""
        gpu = sum(p.pod.total_gpu_milli for p in fgd_list)
        stats = BatchStats(
            size=size,
            patterns=0,
            variables=0,
            constraints=0,
            status="skipped",
            source="fgd",
            fallback="",
            solver_objective=None,
            hint_objective=0,
            fgd_gpu_milli=gpu,
            chosen_gpu_milli=gpu,
            fgd_frag_milli=0.0,
            chosen_frag_milli=0.0,
            solve_wall_s=0.0,
            deterministic_s=0.0,
            total_wall_s=time.perf_counter() - started,
            wall_limited=False,
        )
        return BatchResult(hint, stats)

    @staticmethod
    def _decode(patterns: list[Pattern], chosen: list[int], pods: list[PodSpec]) -> list[Placement | None]:
        plan: list[Placement | None] = [None] * len(pods)
        for idx in chosen:
            pat = patterns[idx]
            for member, gpus in zip(pat.members, pat.gpus):
                if plan[member] is not None:
                    raise PlanError(f"pod {member} in two chosen patterns")
                plan[member] = Placement(pat.node, gpus, pods[member])
        return plan
