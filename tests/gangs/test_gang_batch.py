"""The CP-SAT batch placer for jobs and gangs: better than queue order when it can be, never worse."""

from __future__ import annotations

import numpy as np

from gpudefrag.gangs.batch import BatchGangPlacer
from gpudefrag.gangs.invariants import check_job
from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.gangs.volcano import VolcanoBinpack
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Job, parse_constraint
from gpudefrag.model.topology import superpod, uniform


def _placer() -> BatchGangPlacer:
    return BatchGangPlacer(GangAware(Workload((1, 2, 8, 16), (0.25, 0.25, 0.25, 0.25))), VolcanoBinpack())


def test_joint_placement_starts_the_bigger_job_queue_order_would_block() -> None:
    # Node 0 is wholly free, node 1 has 1 free GPU.  Queue: a 2-GPU job, then an 8-GPU job.
    # In queue order the 2-GPU job can only take node 0 and the 8-GPU job no longer fits:
    # 2 GPUs started.  Jointly: the 8-GPU job on node 0, 8 GPUs started.
    st = ClusterState.for_topology(superpod(2))
    st.bind_job(Job(90, 0, 1, 7), [1])
    p = _placer()
    jobs = [Job(1, 0, 1, 2), Job(2, 0, 1, 8)]
    assert p._sequential(p.ours, st, jobs) == {1: [0]}
    assert p.place_batch(st, jobs) == {2: [0]}
    assert p.outcomes["better"] == 1


def test_keeps_the_hint_when_queue_order_is_already_best() -> None:
    st = ClusterState.for_topology(superpod(2))
    st.bind_job(Job(90, 0, 1, 7), [1])
    p = _placer()
    jobs = [Job(1, 0, 1, 1), Job(2, 0, 1, 8)]  # the 1-GPU job fits beside job 90
    assert p.place_batch(st, jobs) == {1: [1], 2: [0]}
    assert p.outcomes["better"] == 0 and p.outcomes["not_better"] == 1


def test_random_batches_are_valid_never_worse_and_deterministic() -> None:
    rng = np.random.default_rng(3)
    topo = uniform(12, 8, [("leaf", 4), ("spine", 0)])
    for trial in range(15):
        st = ClusterState.for_topology(topo)
        jid = 1000
        for n in range(topo.num_nodes):
            used = int(rng.integers(0, 9))
            if used:
                st.bind_job(Job(jid, 0, 1, used), [n])
                jid += 1
        sizes = rng.choice([1, 2, 4, 8, 16, 24], size=10)
        jobs = [
            Job(i, 0, 1, int(g), constraint=parse_constraint("required:leaf") if g > 8 and i % 2 else None)
            for i, g in enumerate(sizes)
        ]
        a, b = _placer(), _placer()
        plan = a.place_batch(st, jobs)
        assert plan == b.place_batch(st, jobs), trial
        scratch = st.copy()
        for job in jobs:
            if job.job_id in plan:
                scratch.bind_job(job, plan[job.job_id])  # raises if the plan is not valid
                check_job(scratch, job)  # whole gang, required constraint held
        hints = [a._sequential(a.ours, st, jobs), a._sequential(a.binpack, st, jobs)]
        best_hint = max(a.score(st, jobs, h) for h in hints)
        assert a.score(st, jobs, plan) >= best_hint
