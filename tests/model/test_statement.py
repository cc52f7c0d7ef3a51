"""The one statement: operations checked together on a copy, committed in the rule order, or
refused with the state left as it was; worked on a 4-node cluster of 2-GPU nodes in 2 leaves."""

from __future__ import annotations

import numpy as np
import pytest

from gpudefrag.gangs.moves import GangMove
from gpudefrag.gangs.statements import job_statement, plan_statement
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.jobs import Constraint, Job
from gpudefrag.model.pods import PodSpec
from gpudefrag.model.statement import PodLedger, Statement, StatementError
from gpudefrag.model.topology import uniform


def _job(job_id: int, gpus: int, constraint: Constraint | None = None) -> Job:
    return Job(job_id, 0.0, 100.0, gpus, constraint=constraint)


def _state() -> ClusterState:
    """Nodes 0,1 in leaf 0 and 2,3 in leaf 1; job 1 (1 GPU) on node 0, job 2 (1 GPU) on node 2."""
    s = ClusterState.for_topology(uniform(4, 2, [("leaf", 2)]))
    s.bind_job(_job(1, 1), [0])
    s.bind_job(_job(2, 1), [2])
    return s


def _image(s: ClusterState) -> tuple[bytes, bytes, tuple[tuple[int, object], ...]]:
    return s.gpu_milli_left.tobytes(), s.free_gpus.tobytes(), tuple(sorted(s.placements.items()))


def test_a_move_then_a_start_commit_in_the_rule_order() -> None:
    s = _state()
    # moving job 1 from node 0 to node 2 frees node 0, on which the 2-GPU job 3 then starts
    stmt = plan_statement(s, _job(3, 2), [0], moves=[_move(1, (2,))])
    assert stmt.why_not() is None
    stmt.commit()
    assert [p.node for p in s.placements[1]] == [2]
    assert [p.node for p in s.placements[3]] == [0]
    assert s.free_gpus.tolist() == [0, 2, 0, 2]


def test_a_statement_that_does_not_fit_leaves_the_state_as_it_was() -> None:
    s = _state()
    before = _image(s)
    # job 1 stays on node 0, so the 2-GPU job 3 cannot start there
    stmt = plan_statement(s, _job(3, 2), [0])
    assert "started job 3" in (stmt.why_not() or "")
    with pytest.raises(StatementError, match="started job 3"):
        stmt.commit()
    assert _image(s) == before


def test_evictions_and_moves_are_undone_when_a_later_bind_fails() -> None:
    s = _state()
    before = _image(s)
    # the eviction of job 2 and the move of job 1 succeed on the copy; job 3 needs 4 GPUs on 2 nodes
    # but only node 0 is named
    stmt = plan_statement(s, _job(3, 4), [0], moves=[_move(1, (1,))], evict=[2])
    with pytest.raises(StatementError):
        stmt.commit()
    assert _image(s) == before


@pytest.mark.parametrize(
    ("evict", "moves", "why"),
    [
        ([7], [], "job 7 to stop is not running"),
        ([], [(7, (1,))], "job 7 to move is not running"),
        ([1], [(1, (1,))], "named twice"),
    ],
)
def test_what_is_not_running_or_named_twice_is_refused(
    evict: list[int], moves: list[tuple[int, tuple[int, ...]]], why: str
) -> None:
    s = _state()
    stmt = plan_statement(s, _job(3, 1), [1], moves=[_move(j, n) for j, n in moves], evict=evict)
    assert why in (stmt.why_not() or "")


def test_starting_a_running_job_is_refused() -> None:
    s = _state()
    assert "job 1 to start is already running" in (job_statement(s).bind(1, _job(1, 1), [1]).why_not() or "")


def test_the_check_runs_on_every_job_bound() -> None:
    s = _state()
    gang = _job(3, 4, Constraint("required", "leaf"))
    # nodes 1 and 3 are free only in part of two leaves: the bind fits once jobs 1 and 2 are
    # evicted, but the gang would span two leaves
    stmt = plan_statement(s, gang, [1, 3], evict=[1, 2])
    assert "requires one 'leaf'" in (stmt.why_not() or "")
    ok = plan_statement(s, gang, [0, 1], evict=[1])
    assert ok.why_not() is None


def test_replay_returns_a_copy_and_discard_forgets() -> None:
    s = _state()
    before = _image(s)
    stmt = plan_statement(s, _job(3, 2), [1])
    out = stmt.replay()
    assert out is not None
    assert _image(s) == before
    stmt.discard()
    assert not stmt.binds and not stmt.moves and not stmt.evictions


def _pods() -> tuple[ClusterState, dict[int, Placement]]:
    state = ClusterState(
        ["a", "b"], np.zeros(2, np.int64), np.array([2, 2]), np.array([8000, 8000]), np.array([64, 64])
    )
    spec = PodSpec(1000, 8, 1, 1000)
    on = {7: Placement(0, (0,), spec)}
    state.bind(on[7])
    return state, on


def test_a_pod_move_that_holds_its_source_binds_the_target_only() -> None:
    state, on = _pods()
    stmt: Statement[Placement, Placement] = Statement(PodLedger(state, on))
    stmt.move(7, Placement(1, (1,), on[7].pod), hold_source=True).commit()
    assert state.pod_count.tolist() == [1, 1]  # the source is held through the grace period
    assert state.gpu_milli_left[:, :2].tolist() == [[0, 1000], [1000, 0]]
    assert on[7].node == 1


def test_a_pod_move_to_a_gpu_in_use_is_refused_and_nothing_changes() -> None:
    state, on = _pods()
    before = state.snapshot()
    stmt: Statement[Placement, Placement] = Statement(PodLedger(state, on))
    stmt.move(7, Placement(0, (0,), on[7].pod), hold_source=True)
    with pytest.raises(StatementError, match="moved pod 7"):
        stmt.commit()
    assert state.snapshot() == before
    assert on[7].node == 0


def _move(job_id: int, to: tuple[int, ...]) -> GangMove:
    return GangMove(job_id, to)
