"""The scheduler's decision view: after every sync it equals the cache's state with the masked
nodes masked, and an index attached to it decides as a scan of that masked copy."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gpudefrag.k8s.decision_view import DecisionView
from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.pods import PodSpec
from gpudefrag.policies.registry import make_policy

ARRAYS = ("cpu_milli_left", "memory_mib_left", "gpu_milli_left", "free_gpus", "pod_count", "affinity")
PODS = (
    PodSpec(4000, 8192, 1, 1000),
    PodSpec(2000, 1024, 1, 300),
    PodSpec(8000, 32768, 2, 1000),
    PodSpec(1000, 512),
    PodSpec(16000, 65536, 8, 1000),
)


def _expected(source: ClusterState, masked: np.ndarray) -> ClusterState:
    out = source.copy()
    out.mask_many(np.unique(masked))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_sync_equals_the_source_with_the_masked_nodes_masked(gen, typical_small, seed):
    rng = random.Random(seed)
    shapes = [("V100M32", 8, 96000, 1 << 19), ("T4", 4, 32000, 1 << 17), ("", 0, 64000, 1 << 18)]
    nodes = [rng.choice(shapes) for _ in range(30)]
    source = gen.build_cluster(nodes, np.array(rng.sample(range(30), 30), dtype=np.int64))
    view = DecisionView(source)
    indexed = make_policy("fgd", typical_small)
    scan = make_policy("fgd", typical_small)
    bound: list[Placement] = []
    masked = np.zeros(0, dtype=np.int64)
    for _ in range(120):
        op = rng.random()
        if op < 0.45:  # the cache counts a pod (a bind seen on the API, or an assumption)
            p = scan.select(source, rng.choice(PODS))
            if p is not None:
                source.bind(p)
                bound.append(p)
        elif op < 0.7 and bound:  # a pod leaves
            source.unbind(bound.pop(rng.randrange(len(bound))))
        elif op < 0.85:  # a node turns unusable or usable, a reservation comes or goes
            drawn = rng.sample(range(30), rng.randrange(0, 6))
            # ascending (kept as given: the next syncs with the same array take the short path) or not
            masked = np.array(sorted(drawn) if seed % 2 else drawn + drawn[:1], dtype=np.int64)
        work = view.sync(masked)
        want = _expected(source, masked)
        for name in ARRAYS:
            assert np.array_equal(getattr(work, name), getattr(want, name)), name
        indexed.attach(work)
        for pod in PODS:  # the cycle decides, binding on the view (not assumed: undone at the next sync)
            got, expect = indexed.select(work, pod), scan.select(want, pod)
            assert (got is None) == (expect is None)
            if got is not None:
                assert (got.node, got.gpus) == (expect.node, expect.gpus)
                if rng.random() < 0.5:
                    work.bind(got)
                    want.bind(got)
    view.close()
    assert view not in source._watchers


def test_a_policy_scheduler_decides_in_place_through_the_index_and_leaves_the_state_as_it_was(
    gen, typical_small
):
    """One cycle of five pods on the indexed state: the binds a copy-and-scan cycle makes, and
    the state (and so the index) unchanged afterwards."""
    from gpudefrag.k8s.decide import Cycle
    from gpudefrag.model.port import PendingPod
    from gpudefrag.policies.scheduler import PolicyScheduler

    rng = random.Random(2)
    state = gen.build_cluster([("V100M32", 8, 96000, 1 << 19), ("T4", 4, 32000, 1 << 17)] * 6)
    indexed = make_policy("fgd", typical_small)
    indexed.attach(state)
    pending = [PendingPod(i, rng.choice(PODS), 0.0, 0, False) for i in range(5)]
    before = state.snapshot()
    got = PolicyScheduler(indexed).decide(Cycle(0.0, state, pending, []))
    assert state.snapshot() == before
    copy = state.copy()
    scan = make_policy("fgd", typical_small)
    want = []
    for p in pending:
        placed = scan.select(copy, p.spec)
        if placed is not None:
            copy.bind(placed)
            want.append((p.pod_id, placed.node, placed.gpus))
    assert [(b.pod_id, b.placement.node, b.placement.gpus) for b in got.binds] == want
    assert len(want) == 5
    again = indexed.select(state, pending[0].spec)  # the index saw the binds undone
    first = scan.select(state, pending[0].spec)
    assert (again.node, again.gpus) == (first.node, first.gpus)
