"""Preemption victims: hand-worked cases for kube-scheduler's default (upstream's node choice),
KAI's preempt action (reverse scheduling order, preemptible jobs only, one more pod at a time)
and ours (cheapest by checkpoint, moving instead of killing), and a seeded random property test
(every plan validates, only allowed jobs are touched, ours costs no more than the others for a
single-pod preemptor, and ours finds a plan whenever kube's default does).

Costs in the comments: GPUs x (now - last checkpoint + restart), restart 300 s."""

from __future__ import annotations

import numpy as np
import pytest

from gpudefrag.capacity.victims import (
    CheckpointAwareVictims,
    KaiVictims,
    KubeDefaultVictims,
    VictimPlan,
    VictimRule,
    kai_victim_order,
    plan_cost_gpu_s,
    validate_plan,
)
from gpudefrag.gangs.moves import GangMove
from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import Constraint, Job
from gpudefrag.model.session import RunningInfo, Session
from gpudefrag.model.topology import superpod

NOW = 10 * 3600.0
RESTART = 300.0


def _job(
    jid: int, gpus: int, prio: int, submit_s: float = 0.0, c: str | None = None, milli: int = 1000
) -> Job:
    con = None if c is None else Constraint(*c.split(":"))
    return Job(jid, submit_s, 3600.0, gpus, milli, prio, con)


class Cluster:
    """A state with jobs bound where a test says, and what a victim rule knows of them."""

    def __init__(self, nodes: int, leaf_nodes: int) -> None:
        self.state = ClusterState.for_topology(superpod(nodes, leaf_nodes))
        self.running: dict[int, RunningInfo] = {}

    def run(
        self,
        job: Job,
        nodes: list[int],
        start_s: float = 0.0,
        ckpt_s: float = NOW - 600.0,
        preemptible: bool = True,
        next_ckpt_s: float = float("inf"),
    ) -> None:
        self.state.bind_job(job, nodes)
        self.running[job.job_id] = RunningInfo(job, start_s, ckpt_s, next_ckpt_s, preemptible)

    def placer(self, extra: Job) -> GangAware:
        return GangAware(Workload.from_jobs([*self.state.jobs.values(), extra]))

    def choose(self, rule: VictimRule, job: Job, may_wait_s: float = 0.0) -> VictimPlan | None:
        placer = self.placer(job)
        assert placer.place(self.state, job) is None, "the preemptor must be blocked"
        plan = rule.choose(Session(NOW, self.state, (), self.running), job, placer, RESTART, may_wait_s)
        if plan is not None:
            assert validate_plan(self.state, job, plan) is None
        return plan


# ---- kube-scheduler's default ---------------------------------------------------------------------
def test_kube_picks_the_node_whose_most_important_victim_has_the_lowest_priority():
    # pickOneNodeForPreemption, criterion 2: node 0's victim has priority 1, node 1's priority 0
    c = Cluster(2, 2)
    c.run(_job(1, 8, 1), [0])
    c.run(_job(2, 8, 0), [1])
    plan = c.choose(KubeDefaultVictims(), _job(9, 8, 2))
    assert plan == VictimPlan(9, (1,), (2,), (), 8 * (600.0 + RESTART))


def test_kube_prefers_fewer_victims_at_equal_priority():
    # criterion 3 (sum of priorities, each + 2^31): two pods on node 0 weigh more than one on node 1
    c = Cluster(2, 2)
    c.run(_job(1, 4, 0), [0])
    c.run(_job(2, 4, 0), [0])
    c.run(_job(3, 8, 0), [1])
    plan = c.choose(KubeDefaultVictims(), _job(9, 8, 2))
    assert plan is not None and plan.nodes == (1,) and plan.evict == (3,)


def test_kube_reprieves_the_more_important_pod_and_evicts_the_later_started_one():
    # node 0: two 4-GPU jobs of priority 0; taken off together, then put back most important first
    # (MoreImportantPod: same priority, the earlier start wins): job 1 (started at 100 s) fits
    # back beside the 4-GPU preemptor, job 2 (started at 200 s) does not.  Node 1's victim has
    # priority 1, so node 0 wins.
    c = Cluster(2, 2)
    c.run(_job(1, 4, 0), [0], start_s=100.0)
    c.run(_job(2, 4, 0), [0], start_s=200.0)
    c.run(_job(3, 8, 1), [1])
    plan = c.choose(KubeDefaultVictims(), _job(9, 4, 2))
    assert plan is not None and plan.nodes == (0,) and plan.evict == (2,)


def test_kube_breaks_the_last_tie_by_the_latest_start():
    # one victim of priority 0 and 8 GPUs on each node: the later-started one is taken
    c = Cluster(2, 2)
    c.run(_job(1, 8, 0), [0], start_s=500.0)
    c.run(_job(2, 8, 0), [1], start_s=100.0)
    plan = c.choose(KubeDefaultVictims(), _job(9, 8, 2))
    assert plan is not None and plan.evict == (1,) and plan.nodes == (0,)


def test_kube_gang_candidate_is_a_leaf_and_takes_the_lower_priority_leaf():
    # required:leaf, 16 GPUs: leaf 0 (nodes 0, 1) holds priority-1 jobs, leaf 1 (2, 3) priority 0
    c = Cluster(4, 2)
    for jid, node, prio in [(1, 0, 1), (2, 1, 1), (3, 2, 0), (4, 3, 0)]:
        c.run(_job(jid, 8, prio), [node])
    plan = c.choose(KubeDefaultVictims(), _job(9, 16, 2, c="required:leaf"))
    assert plan is not None and sorted(plan.nodes) == [2, 3] and plan.evict == (3, 4) and not plan.moves


def test_kube_candidate_count_follows_upstream_defaults():
    rule = KubeDefaultVictims()
    # max(10 % of the nodes, 100), at most the nodes
    assert [rule.num_candidates(n) for n in (50, 1000, 5000)] == [50, 100, 500]


def test_kube_visits_only_the_candidates_it_needs_from_a_random_offset():
    # with room for one candidate (upstream's minCandidateNodesAbsolute = 1, 10 % of 2 nodes =
    # 0), the node found first from the random offset is taken, better or not
    def pick(seed: int) -> int:
        c = Cluster(2, 2)
        c.run(_job(1, 8, 1), [0])
        c.run(_job(2, 8, 0), [1])
        plan = c.choose(KubeDefaultVictims(min_candidate_nodes_absolute=1, seed=seed), _job(9, 8, 2))
        assert plan is not None
        return plan.nodes[0]

    assert {pick(seed) for seed in range(20)} == {0, 1}


# ---- KAI --------------------------------------------------------------------------------------------
def test_kai_evicts_the_newest_job_of_the_lowest_priority_first():
    # three full nodes; jobs 1 and 2 have priority 0, job 2 was created later (submit 100 s) but
    # started earlier (job 1 waited): KAI's victim queue is the reverse job order (priority, then
    # creation time), so job 2 goes; kube's last criterion (latest start) takes job 1 instead.
    c = Cluster(3, 3)
    c.run(_job(1, 8, 0, submit_s=0.0), [0], start_s=500.0)
    c.run(_job(2, 8, 0, submit_s=100.0), [1], start_s=110.0)
    c.run(_job(3, 8, 1, submit_s=200.0), [2], start_s=210.0)
    assert kai_victim_order(c.running) == [2, 1, 3]
    kai = c.choose(KaiVictims(), _job(9, 8, 2))
    assert kai is not None and kai.evict == (2,) and kai.nodes == (1,)
    kube = c.choose(KubeDefaultVictims(), _job(9, 8, 2))
    assert kube is not None and kube.evict == (1,)


def test_kai_takes_only_preemptible_jobs():
    c = Cluster(2, 2)
    c.run(_job(1, 8, 0, submit_s=50.0), [0], preemptible=False)
    c.run(_job(2, 8, 1, submit_s=0.0), [1])
    plan = c.choose(KaiVictims(), _job(9, 8, 2))
    assert plan is not None and plan.evict == (2,)
    c2 = Cluster(2, 2)
    c2.run(_job(1, 8, 0), [0], preemptible=False)
    c2.run(_job(2, 8, 0), [1], preemptible=False)
    assert c2.choose(KaiVictims(), _job(9, 8, 2)) is None
    assert c2.choose(KubeDefaultVictims(), _job(9, 8, 2)) is not None  # kube has no such class


def test_kai_solves_a_gang_one_pod_at_a_time():
    # queue: 3 (priority 0, newest), 2, 1, then 4 (priority 1).  Pod 1: victim 3 on node 2 frees
    # it.  Pod 2: the recorded victim alone leaves one free node (the idle-GPU filter fails);
    # adding victim 2 and testing its node 1 frees nodes 1 and 2: victims 2 and 3, not 1 or 4.
    c = Cluster(4, 4)
    for jid, node, prio, t in [(1, 0, 0, 0.0), (2, 1, 0, 10.0), (3, 2, 0, 20.0), (4, 3, 1, 30.0)]:
        c.run(_job(jid, 8, prio, submit_s=t), [node])
    plan = c.choose(KaiVictims(), _job(9, 16, 2))
    assert plan is not None and plan.evict == (2, 3) and sorted(plan.nodes) == [1, 2]


def test_kai_un_evicts_a_victim_that_fits_back_on_its_own_node():
    # node 0: a 2-GPU job of priority 0 (newest, so the first victim) and a 6-GPU job; node 1 is
    # full.  Evicting the 2-GPU job alone does not make room for 8 GPUs; with the 6-GPU job both
    # are evicted on node 0; the preemptor takes node 0, neither fits back: both are victims.
    # Node 1's 4-GPU job (oldest, priority 0) is never needed.
    c = Cluster(2, 2)
    c.run(_job(1, 2, 0, submit_s=30.0), [0])
    c.run(_job(2, 6, 0, submit_s=20.0), [0])
    c.run(_job(3, 4, 0, submit_s=0.0), [1])
    c.run(_job(4, 4, 1, submit_s=0.0), [1])
    plan = c.choose(KaiVictims(), _job(9, 8, 2))
    assert plan is not None and plan.evict == (1, 2) and plan.nodes == (0,)
    # a 4-GPU preemptor: job 1 alone (2 GPUs) fails the idle-GPU filter; with job 2, node 0 is
    # tested with both evicted; the preemptor takes 4 of its 8 GPUs; pipelined again in job order,
    # job 2 (6 GPUs) finds no room but job 1 (2 GPUs) lands back on node 0: un-evicted.
    plan4 = c.choose(KaiVictims(), _job(9, 4, 2))
    assert plan4 is not None and plan4.evict == (2,) and plan4.nodes == (0,)


# ---- ours -------------------------------------------------------------------------------------------
def test_ours_evicts_the_recently_checkpointed_job_where_kube_takes_the_low_priority_one():
    # node 0: priority 0, last checkpoint 2 h ago: 8 x (7200 + 300) = 60,000 GPU-s
    # node 1: priority 1, checkpointed a minute ago: 8 x (60 + 300) = 2,880 GPU-s
    c = Cluster(2, 2)
    c.run(_job(1, 8, 0), [0], ckpt_s=NOW - 7200.0)
    c.run(_job(2, 8, 1), [1], ckpt_s=NOW - 60.0)
    kube = c.choose(KubeDefaultVictims(), _job(9, 8, 2))
    ours = c.choose(CheckpointAwareVictims(), _job(9, 8, 2))
    assert kube == VictimPlan(9, (0,), (1,), (), 60_000.0)
    # job 2 cannot move: node 0 is full
    assert ours == VictimPlan(9, (1,), (2,), (), 2_880.0)


def test_ours_lowest_class_first_takes_the_cheapest_plan_of_the_lowest_class_that_has_one():
    # node 0: priority 0, checkpoint 2 h ago (60,000 GPU-s); node 1: priority 1, a minute ago
    # (2,880 GPU-s); node 2: priority 0, an hour ago: 8 x (3600 + 300) = 31,200 GPU-s
    c = Cluster(3, 3)
    c.run(_job(1, 8, 0), [0], ckpt_s=NOW - 7200.0)
    c.run(_job(2, 8, 1), [1], ckpt_s=NOW - 60.0)
    c.run(_job(3, 8, 0), [2], ckpt_s=NOW - 3600.0)
    rule = CheckpointAwareVictims(lowest_class_first=True)
    # priority 0 admits a plan, so priority 1 is never searched: the cheaper of jobs 1 and 3
    assert c.choose(rule, _job(9, 8, 2)) == VictimPlan(9, (2,), (3,), (), 31_200.0)
    assert c.choose(CheckpointAwareVictims(), _job(9, 8, 2)) == VictimPlan(9, (1,), (2,), (), 2_880.0)
    # a 16-GPU preemptor needs two whole nodes: priority 0 alone frees nodes 0 and 2
    big = c.choose(rule, _job(9, 16, 2))
    assert big is not None and set(big.evict) == {1, 3} and big.cost_gpu_s == 60_000.0 + 31_200.0


def test_ours_moves_a_victim_that_fits_elsewhere_instead_of_killing_it():
    # each node has 4 GPUs free and one 4-GPU job: the 8-GPU preemptor is blocked.  Job 1
    # (4 x (600 + 300) = 3,600) is cheaper than job 2 (4 x (1800 + 300) = 8,400); the preemptor
    # takes node 0 and job 1 moves to node 1's free GPUs.  Kube takes job 1 too (lower
    # priority) but kills it.
    c = Cluster(2, 2)
    c.run(_job(1, 4, 0), [0], ckpt_s=NOW - 600.0)
    c.run(_job(2, 4, 1), [1], ckpt_s=NOW - 1800.0)
    ours = c.choose(CheckpointAwareVictims(), _job(9, 8, 2))
    assert ours == VictimPlan(9, (0,), (), (GangMove(1, (1,)),), 3_600.0)
    kube = c.choose(KubeDefaultVictims(), _job(9, 8, 2))
    assert kube == VictimPlan(9, (0,), (1,), (), 3_600.0)


def test_ours_waits_for_a_checkpoint_when_that_is_cheaper_than_any_plan_now():
    # node 0: last checkpoint 1,500 s ago, the next in 300 s: now 8 x (1500 + 300) = 14,400,
    # 1 s after that checkpoint 8 x (1 + 300) = 2,408 at NOW + 301; node 1: 600 s ago, the next
    # in 1,200 s: 8 x (600 + 300) = 7,200 now.  Plans are made for room now; waiting is allowed
    # only as long as the simulator says.
    c = Cluster(2, 2)
    c.run(_job(1, 8, 0), [0], ckpt_s=NOW - 1500.0, next_ckpt_s=NOW + 300.0)
    c.run(_job(2, 8, 0), [1], ckpt_s=NOW - 600.0, next_ckpt_s=NOW + 1200.0)
    now = VictimPlan(9, (1,), (2,), (), 7_200.0)
    assert c.choose(CheckpointAwareVictims(), _job(9, 8, 1)) == now
    assert c.choose(CheckpointAwareVictims(), _job(9, 8, 1), may_wait_s=200.0) == now  # too short
    later = VictimPlan(9, (0,), (1,), (), 2_408.0, not_before_s=NOW + 301.0)
    assert c.choose(CheckpointAwareVictims(), _job(9, 8, 1), may_wait_s=600.0) == later
    # a wait priced at 1 GPU-s per GPU-second: 2,408 + 8 x 301 = 4,816 < 7,200, still later;
    # at 2: 2,408 + 4,816 = 7,224 > 7,200, so now
    assert c.choose(CheckpointAwareVictims(wait_price=1.0), _job(9, 8, 1), may_wait_s=600.0) == later
    assert c.choose(CheckpointAwareVictims(wait_price=2.0), _job(9, 8, 1), may_wait_s=600.0) == now
    # rules that never wait ignore the allowance
    assert c.choose(KubeDefaultVictims(), _job(9, 8, 1), may_wait_s=600.0).not_before_s == 0.0
    with pytest.raises(ValueError, match="wait_price"):
        CheckpointAwareVictims(wait_price=-1.0)


def test_ours_prefers_the_plan_with_a_move_when_costs_tie():
    # node 0: a 6-GPU job, 6 x (600 + 300) = 5,400 (2 GPUs free); node 1: a 3-GPU job,
    # 3 x (1,500 + 300) = 5,400 (5 free); node 2: a priority-2 job on 5 GPUs (3 free).
    # Freeing node 0 or node 1 costs the same; only the 3-GPU job has somewhere to go (node 2),
    # so the plan on node 1 (a move) beats the one on node 0 (a kill).
    c = Cluster(3, 3)
    c.run(_job(1, 6, 0), [0], ckpt_s=NOW - 600.0)
    c.run(_job(2, 3, 0), [1], ckpt_s=NOW - 1500.0)
    c.run(_job(3, 5, 2), [2])
    plan = c.choose(CheckpointAwareVictims(), _job(9, 8, 2))
    assert plan == VictimPlan(9, (1,), (), (GangMove(2, (2,)),), 5_400.0)


def test_ours_gang_takes_the_cheapest_nodes_of_one_leaf():
    # required:leaf, 16 GPUs.  Leaf 0: two nodes with cheap jobs (8 x 360 = 2,880 each);
    # leaf 1: one free node and one node with an expensive job (8 x 7,500 = 60,000).
    c = Cluster(4, 2)
    c.run(_job(1, 8, 0), [0], ckpt_s=NOW - 60.0)
    c.run(_job(2, 8, 1), [1], ckpt_s=NOW - 60.0)
    c.run(_job(3, 8, 0), [3], ckpt_s=NOW - 7200.0)
    ours = c.choose(CheckpointAwareVictims(), _job(9, 16, 2, c="required:leaf"))
    # both cheap jobs go; the first (8 GPUs, the larger id last) moves to the free node 2
    assert ours is not None and sorted(ours.nodes) == [0, 1]
    assert ours.evict == (2,) and ours.moves == (GangMove(1, (2,)),)
    assert ours.cost_gpu_s == pytest.approx(5_760.0)
    # kube: leaf 1 has one victim of priority 0 (leaf 0's most important victim has priority 1)
    kube = c.choose(KubeDefaultVictims(), _job(9, 16, 2, c="required:leaf"))
    assert kube is not None and kube.evict == (3,) and kube.cost_gpu_s == pytest.approx(60_000.0)


def test_ours_stays_at_the_preferred_level_unless_told_to_compare_levels():
    # preferred:leaf, 16 GPUs; node 0 is free, node 1 (leaf 0) and node 3 (leaf 1) hold
    # expensive jobs (8 x 7,500 = 60,000), node 2 (leaf 1) a cheap one (8 x 360 = 2,880).
    # In one leaf: nodes 0 + 1 (60,000) beat nodes 2 + 3 (62,880).  Across leaves: nodes 0 + 2
    # cost 2,880.
    c = Cluster(4, 2)
    c.run(_job(1, 8, 0), [1], ckpt_s=NOW - 7200.0)
    c.run(_job(2, 8, 0), [2], ckpt_s=NOW - 60.0)
    c.run(_job(3, 8, 0), [3], ckpt_s=NOW - 7200.0)
    job = _job(9, 16, 2, c="preferred:leaf")
    leaf = c.choose(CheckpointAwareVictims(), job)
    assert leaf is not None and sorted(leaf.nodes) == [0, 1] and leaf.evict == (1,)
    spread = c.choose(CheckpointAwareVictims(across_levels=True), job)
    assert spread is not None and sorted(spread.nodes) == [0, 2] and spread.evict == (2,)
    assert spread.cost_gpu_s == pytest.approx(2_880.0) and leaf.cost_gpu_s == pytest.approx(60_000.0)


def test_no_rule_touches_jobs_of_equal_or_higher_priority():
    c = Cluster(2, 2)
    c.run(_job(1, 8, 2), [0])
    c.run(_job(2, 8, 3), [1])
    for rule in (KubeDefaultVictims(), KaiVictims(), CheckpointAwareVictims()):
        assert c.choose(rule, _job(9, 8, 2)) is None


def test_validate_plan_names_what_is_wrong():
    c = Cluster(2, 2)
    c.run(_job(1, 8, 0), [0])
    c.run(_job(2, 8, 5), [1])
    job = _job(9, 8, 2)
    assert validate_plan(c.state, job, VictimPlan(9, (0,), (1,), (), 0.0)) is None
    assert "priority" in (validate_plan(c.state, job, VictimPlan(9, (1,), (2,), (), 0.0)) or "")
    assert "neither" in (validate_plan(c.state, job, VictimPlan(9, (0,), (), (), 0.0)) or "")
    assert "started job 9" in (validate_plan(c.state, job, VictimPlan(9, (1,), (1,), (), 0.0)) or "")
    bad_move = VictimPlan(9, (0,), (), (GangMove(1, (1,)),), 0.0)  # node 1 is full
    assert "moved job 1" in (validate_plan(c.state, job, bad_move) or "")
    gang = _job(8, 16, 2, c="required:leaf")
    d = Cluster(4, 2)
    d.run(_job(1, 8, 0), [1])
    d.run(_job(2, 8, 0), [2])
    d.run(_job(3, 8, 0), [0])
    d.run(_job(4, 8, 0), [3])
    assert "requires one 'leaf'" in (
        validate_plan(d.state, gang, VictimPlan(8, (1, 2), (1, 2), (), 0.0)) or ""
    )


# ---- property test ----------------------------------------------------------------------------------
def _random_cluster(rng: np.random.Generator) -> tuple[Cluster, Job]:
    c = Cluster(8, 4)
    placer = GangAware(Workload.from_jobs([_job(0, 8, 0)]))
    jid = 1
    for _ in range(int(rng.integers(6, 40))):
        g = int(rng.choice([1, 1, 2, 4, 8, 8, 16]))
        milli = 500 if g == 1 and rng.random() < 0.3 else 1000
        con = "required:leaf" if g > 8 and rng.random() < 0.5 else None
        job = _job(jid, g, int(rng.integers(0, 3)), float(rng.uniform(0, NOW)), con, milli)
        nodes = placer.place(c.state, job)
        if nodes is None:
            continue
        c.run(
            job,
            nodes,
            start_s=float(rng.uniform(0, NOW)),
            ckpt_s=NOW - float(rng.uniform(0, 3 * 3600)),
            preemptible=bool(rng.random() < 0.8),
        )
        jid += 1
    for j in sorted(c.running):  # departures leave the cluster fragmented
        if rng.random() < 0.25:
            c.state.unbind_job(j)
            del c.running[j]
    g = int(rng.choice([1, 2, 4, 8, 12, 16, 24]))
    milli = 500 if g == 1 and rng.random() < 0.5 else 1000
    con = str(rng.choice(["required:leaf", "preferred:leaf", "none"])) if g > 8 else "none"
    pre = _job(999, g, int(rng.integers(1, 4)), NOW, None if con == "none" else con, milli)
    return c, pre


def test_random_plans_validate_and_ours_is_cheapest_for_single_pods():
    rng = np.random.default_rng(20240519)
    seen = {"kube": 0, "kai": 0, "ours": 0, "single": 0, "moves": 0}
    for _ in range(300):
        c, job = _random_cluster(rng)
        placer = c.placer(job)
        if placer.place(c.state, job) is not None:
            continue  # not blocked: no preemption asked
        plans: dict[str, VictimPlan | None] = {}
        for rule in (KubeDefaultVictims(seed=3), KaiVictims(), CheckpointAwareVictims()):
            plan = rule.choose(Session(NOW, c.state, (), c.running), job, placer, RESTART)
            plans[rule.name] = plan
            if plan is None:
                continue
            seen[rule.name] += 1
            assert validate_plan(c.state, job, plan) is None, (rule.name, plan)
            touched = list(plan.evict) + [m.job_id for m in plan.moves]
            assert all(c.running[j].job.priority < job.priority for j in touched)
            if rule.name == "kai":
                assert all(c.running[j].preemptible for j in touched)
            if rule.name != "ours":
                assert not plan.moves
            assert plan.cost_gpu_s == pytest.approx(plan_cost_gpu_s(touched, c.running, NOW, RESTART))
        kube, kai, ours = plans["kube"], plans["kai"], plans["ours"]
        allowed_per_node = [
            sum(1 for j in c.state.node_jobs[n] if c.running[j].job.priority < job.priority)
            for n in range(c.state.topology.num_nodes)
        ]
        if max(allowed_per_node) > CheckpointAwareVictims().max_candidates_per_node:
            continue  # ours' node search is exact only up to that many jobs per node
        if kube is not None:
            # kube's candidate frees a domain by evicting every allowed job touching it; ours'
            # search of that domain then finds a room too, and the placement policy places there
            assert ours is not None
        if len(c.state.pods_of(job)) == 1 and ours is not None:
            seen["single"] += 1
            for other in (kube, kai):
                if other is not None:
                    assert ours.cost_gpu_s <= other.cost_gpu_s + 1e-6
        if ours is not None and ours.moves:
            seen["moves"] += 1
    # the random cases exercise every rule, single pods and moves (not a vacuous loop)
    assert min(seen.values()) >= 5, seen
