"""Joint placement of a batch of queued jobs with CP-SAT, warm-started from the heuristics.

For the first ``batch_jobs`` queued whole-GPU jobs of a scheduling pass:

1. Warm starts: the batch placed one job at a time, in queue order, by our policy and by
   Volcano-style bin-packing; the better of the two (by the objective below) is the hint.
2. Candidate placements per job: the two warm starts' placements; for a single pod, the
   ``candidates`` nodes with room where our measure grows least; for a gang, per allowed domain
   (up to ``candidates`` domains) the whole nodes our policy would pick there.
3. CP-SAT: at most one placement per job; on every node the pods placed use at most its free
   GPUs.  Objective (exact integers, lexicographic): GPUs started, then queue order (an earlier
   job weighs more), then fewer wholly free nodes broken.
4. The answer is replayed on a copy of the state (every bind checked, every required constraint
   re-checked); it is kept only if valid and strictly better than the hint, otherwise the hint
   stands and the reason is counted (``not_better``, ``invalid``, ``timeout``, ``error``).

The solve is deterministic: one worker, a fixed seed and a deterministic time limit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from gpudefrag.gangs.objective import node_deltas
from gpudefrag.gangs.ours import GangAware, pick_whole_nodes
from gpudefrag.gangs.policy import GangPolicy, candidate_levels
from gpudefrag.gangs.statements import job_statement
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job

__all__ = ["BatchConfig", "BatchGangPlacer"]

Assignment = dict[int, list[int]]


@dataclass(frozen=True)
class BatchConfig:
    batch_jobs: int = 24
    candidates: int = 4
    deterministic_time_s: float = 0.05
    seed: int = 1


class BatchGangPlacer:
    """Our policy for single jobs plus :meth:`place_batch` for a pass's first jobs."""

    def __init__(self, ours: GangAware, binpack: GangPolicy, cfg: BatchConfig | None = None) -> None:
        self.ours, self.binpack = ours, binpack
        self.cfg = cfg or BatchConfig()
        self.name = "ours-batch"
        self.outcomes: Counter[str] = Counter()

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        return self.ours.place(state, job)

    # ---- warm starts -----------------------------------------------------------------------
    @staticmethod
    def _sequential(policy: GangPolicy, state: ClusterState, jobs: list[Job]) -> Assignment:
        scratch = state.copy()
        out: Assignment = {}
        for job in jobs:
            nodes = policy.place(scratch, job)
            if nodes is not None:
                scratch.bind_job(job, nodes)
                out[job.job_id] = nodes
        return out

    @staticmethod
    def score(state: ClusterState, jobs: list[Job], plan: Assignment) -> tuple[int, int, int]:
        """(GPUs started, queue-order weight, -whole nodes broken): larger is better."""
        rank = {j.job_id: len(jobs) - i for i, j in enumerate(jobs)}
        gpus = sum(j.gpus for j in jobs if j.job_id in plan)
        order = sum(rank[j] for j in plan)
        whole = state.whole_free_nodes()
        touched = {n for nodes in plan.values() for n in nodes}
        return gpus, order, -sum(1 for n in touched if whole[n])

    # ---- candidates ------------------------------------------------------------------------
    def _candidates(self, state: ClusterState, job: Job, hints: list[Assignment]) -> list[tuple[int, ...]]:
        found: list[tuple[int, ...]] = [tuple(h[job.job_id]) for h in hints if job.job_id in h]
        sizes = state.pods_of(job)
        topo = state.topology
        if len(sizes) == 1:
            ok = np.flatnonzero(state.free_gpus >= sizes[0])
            if ok.size:
                delta = node_deltas(state, self.ours.work, sizes[0], ok)
                order = np.lexsort((ok, state.free_gpus[ok], np.round(delta, 9)))
                found += [(int(ok[i]),) for i in order[: self.cfg.candidates]]
        elif all(s == topo.max_gpus_per_node for s in sizes):
            k = len(sizes)
            whole = state.whole_free_nodes()
            for level in candidate_levels(state, job):
                dom = topo.domains(level) if level is not None else np.zeros(topo.num_nodes, dtype=np.int64)
                counts = np.bincount(dom[whole], minlength=int(dom.max()) + 1)
                for d in np.flatnonzero(counts >= k)[: self.cfg.candidates]:
                    members = np.flatnonzero((dom == d) & whole)
                    below = (level if level is not None else len(topo.levels)) - 1
                    found.append(tuple(int(n) for n in pick_whole_nodes(state, members, k, below)))
                if (counts >= k).any():
                    break
        return list(dict.fromkeys(found))

    # ---- the batch -------------------------------------------------------------------------
    def place_batch(self, state: ClusterState, jobs: list[Job]) -> Assignment:
        """Placements for some of ``jobs`` (queue order), never worse than the hint."""
        jobs = [j for j in jobs if not j.is_sharing][: self.cfg.batch_jobs]
        hints = [self._sequential(self.ours, state, jobs), self._sequential(self.binpack, state, jobs)]
        hint = max(hints, key=lambda h: self.score(state, jobs, h))
        if len(jobs) < 2:
            return hint
        cands = {j.job_id: self._candidates(state, j, hints) for j in jobs}
        solved = self._solve(state, jobs, cands, hint)
        if solved is None:
            return hint
        if not self._valid(state, jobs, solved):
            self.outcomes["invalid"] += 1
            return hint
        if self.score(state, jobs, solved) <= self.score(state, jobs, hint):
            self.outcomes["not_better"] += 1
            return hint
        self.outcomes["better"] += 1
        return solved

    def _solve(
        self, state: ClusterState, jobs: list[Job], cands: dict[int, list[tuple[int, ...]]], hint: Assignment
    ) -> Assignment | None:
        model = cp_model.CpModel()
        whole = state.whole_free_nodes()
        n_jobs = len(jobs)
        w_order = 2 * state.topology.num_nodes + 1
        w_gpu = w_order * (n_jobs * (n_jobs + 1) // 2 + 1)
        use: dict[tuple[int, int], cp_model.IntVar] = {}
        load: dict[int, list[tuple[cp_model.IntVar, int]]] = {}
        breaks: dict[int, list[cp_model.IntVar]] = {}
        terms = []
        for i, job in enumerate(jobs):
            sizes = state.pods_of(job)
            for c, nodes in enumerate(cands[job.job_id]):
                v = model.new_bool_var(f"j{job.job_id}c{c}")
                use[job.job_id, c] = v
                for n, g in zip(nodes, sizes):
                    load.setdefault(n, []).append((v, g))
                    if whole[n]:
                        breaks.setdefault(n, []).append(v)
                terms.append((w_gpu * job.gpus + w_order * (n_jobs - i), v))
                model.add_hint(v, hint.get(job.job_id) == list(nodes))
            model.add(sum(use[job.job_id, c] for c in range(len(cands[job.job_id]))) <= 1)
        for n, items in load.items():
            model.add(sum(g * v for v, g in items) <= int(state.free_gpus[n]))
        broken = []
        for n, vs in breaks.items():
            b = model.new_bool_var(f"broken{n}")
            for v in vs:
                model.add_implication(v, b)
            broken.append(b)
        model.maximize(sum(w * v for w, v in terms) - sum(broken))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = self.cfg.seed
        solver.parameters.max_deterministic_time = self.cfg.deterministic_time_s
        try:
            status = solver.solve(model)
        except Exception:  # the solver's own failure: count it, keep the hint
            self.outcomes["error"] += 1
            return None
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            self.outcomes["timeout" if status == cp_model.UNKNOWN else "error"] += 1
            return None
        return {job_id: list(cands[job_id][c]) for (job_id, c), v in use.items() if solver.boolean_value(v)}

    @staticmethod
    def _valid(state: ClusterState, jobs: list[Job], plan: Assignment) -> bool:
        by_id = {j.job_id: j for j in jobs}
        if not set(plan) <= set(by_id):
            return False
        stmt = job_statement(state)
        for job_id, nodes in plan.items():
            stmt.bind(job_id, by_id[job_id], nodes)
        return stmt.why_not() is None
