"""Domain aggregates of the gang state and the gang placement that reads them.

(a) After every bind and unbind of random jobs, the kept aggregates equal a recount from
scratch (and bind takes the same GPUs as its numpy rule did); a copy keeps its own; direct
writes that hide nodes are noticed, and ``hide`` / ``restore`` keep them.  (b) ``GangAware``
places every job on the same nodes, in the same order, as a reference copy of the algorithm as
it was before the aggregates (``_Reference`` below: every decision grouped all nodes with
``np.bincount``), on random states of small superpod, nvl72 and mixed-node topologies, with
required, preferred and no constraints at every level, sharing pods and remainder pods.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.gangs.policy import candidate_levels
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.domain_counts import DomainCounts
from gpudefrag.model.domain_index import domain_index
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Constraint, Job
from gpudefrag.model.topology import Topology, nvl72, superpod, uniform

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


# ---- the reference: the placement as it was, grouping every node on every decision ------------


def _ref_whole_counts(state: ClusterState, whole: npt.NDArray[np.bool_]) -> list[IntArray]:
    topo = state.topology
    return [
        np.bincount(
            topo.domains(li), weights=whole.astype(np.float64), minlength=topo.num_domains(li)
        ).astype(np.int64)
        for li in range(len(topo.levels))
    ]


def _ref_term(x: IntArray, k: int, gpn: int) -> IntArray:
    return gpn * x * (x < k)


def _ref_node_deltas(state: ClusterState, work: Workload, pod_gpus: int, nodes: IntArray) -> FloatArray:
    topo = state.topology
    gpn = topo.max_gpus_per_node
    f = state.free_gpus[nodes]
    f2 = f - pod_gpus
    was_whole = f == topo.gpus_per_node[nodes]
    delta = np.zeros(nodes.size, dtype=np.float64)
    counts = _ref_whole_counts(state, state.free_gpus == topo.gpus_per_node) if was_whole.any() else []
    n_levels = max(1, len(topo.levels))
    for s, w in zip(work.sizes, work.weights):
        if s <= gpn:
            delta += w * (f2 * (f2 < s) - f * (f < s))
            continue
        k = s // gpn
        delta += w * np.where(was_whole, f2, -pod_gpus)
        for li, cnt in enumerate(counts):
            wd = cnt[topo.domains(li)[nodes]]
            change = _ref_term(wd - 1, k, gpn) - _ref_term(wd, k, gpn)
            delta += (w / n_levels) * np.where(was_whole, change, 0)
    return delta


def _ref_parent_map(state: ClusterState, level: int, upper: int) -> IntArray:
    topo = state.topology
    out = np.zeros(topo.num_domains(level), dtype=np.int64)
    out[topo.domains(level)] = topo.domains(upper)
    return out


def _ref_domain_delta(state: ClusterState, work: Workload, level: int, taken: IntArray) -> FloatArray:
    topo = state.topology
    gpn = topo.max_gpus_per_node
    counts = _ref_whole_counts(state, state.free_gpus == topo.gpus_per_node)
    n_levels = max(1, len(topo.levels))
    delta = np.zeros(taken.size, dtype=np.float64)
    for s, w in zip(work.sizes, work.weights):
        if s <= gpn:
            continue
        k = s // gpn
        for li in range(level, len(topo.levels)):
            wd = counts[li] if li == level else counts[li][_ref_parent_map(state, level, li)]
            delta += (w / n_levels) * (_ref_term(wd - taken, k, gpn) - _ref_term(wd, k, gpn))
    return delta


def _ref_pick(state: ClusterState, whole_nodes: IntArray, k: int, level: int) -> IntArray:
    if level < 0 or k == 0:
        return np.sort(whole_nodes)[:k]
    dom = state.topology.domains(level)[whole_nodes]
    ids, counts = np.unique(dom, return_counts=True)
    fits = counts >= k
    if fits.any():
        best = ids[fits][np.argmin(counts[fits])]
        return _ref_pick(state, whole_nodes[dom == best], k, level - 1)
    out: list[IntArray] = []
    need = k
    for i in np.lexsort((ids, -counts)):
        take = min(need, int(counts[i]))
        out.append(_ref_pick(state, whole_nodes[dom == ids[i]], take, level - 1))
        need -= take
        if need == 0:
            break
    return np.concatenate(out)


class _Reference:
    """GangAware as it was before the domain aggregates."""

    def __init__(self, work: Workload) -> None:
        self.work = work

    def _single(self, state: ClusterState, pod_gpus: int, nodes: IntArray) -> int | None:
        ok = nodes[state.free_gpus[nodes] >= pod_gpus]
        if ok.size == 0:
            return None
        delta = _ref_node_deltas(state, self.work, pod_gpus, ok)
        return int(ok[np.lexsort((ok, state.free_gpus[ok], np.round(delta, 9)))[0]])

    def place(self, state: ClusterState, job: Job) -> list[int] | None:
        every = np.arange(state.topology.num_nodes, dtype=np.int64)
        if job.is_sharing:
            fm = state.gpu_milli_left
            partly = (fm >= job.gpu_milli) & (fm < GPU_MILLI_PER_GPU)
            if partly.any():
                return [int(np.argmin(np.where(partly, fm, GPU_MILLI_PER_GPU + 1).min(axis=1)))]
            node = self._single(state, 1, every)
            return None if node is None else [node]
        sizes = state.pods_of(job)
        if len(sizes) == 1:
            node = self._single(state, sizes[0], every)
            return None if node is None else [node]
        for level in candidate_levels(state, job):
            nodes = self._gang_at(state, sizes, level)
            if nodes is not None:
                return nodes
        return None

    def _gang_at(self, state: ClusterState, sizes: list[int], level: int | None) -> list[int] | None:
        topo = state.topology
        gpn = topo.max_gpus_per_node
        k = sum(1 for s in sizes if s == gpn)
        rest = [s for s in sizes if s != gpn]
        whole = (state.free_gpus == topo.gpus_per_node) & (topo.gpus_per_node >= gpn)
        if level is None:
            dom = np.zeros(topo.num_nodes, dtype=np.int64)
            n_dom, below = 1, len(topo.levels) - 1
        else:
            dom = topo.domains(level)
            n_dom, below = topo.num_domains(level), level - 1
        w = np.bincount(dom, weights=whole.astype(np.float64), minlength=n_dom).astype(np.int64)
        ok = w >= k
        if rest:
            spare = np.bincount(dom, weights=(state.free_gpus >= rest[0]) & ~whole, minlength=n_dom)
            ok &= (spare > 0) | (w >= k + 1)
        if not ok.any():
            return None
        cand = np.flatnonzero(ok)
        taken = np.where(ok, k, 0).astype(np.int64)
        if level is not None and level >= 0:
            score = _ref_domain_delta(state, self.work, level, taken)[cand]
        else:
            score = np.zeros(cand.size)
        best = int(cand[np.lexsort((cand, w[cand], np.round(score, 9)))[0]])
        members = np.flatnonzero(dom == best)
        chosen = _ref_pick(state, members[whole[members]], k, below)
        nodes = [int(n) for n in chosen]
        if rest:
            r = self._single(state, rest[0], np.setdiff1d(members, chosen))
            if r is None:
                return None
            nodes.append(r)
        return nodes


def _ref_gpus(rows: dict[int, IntArray], node: int, pod_gpus: int, milli: int) -> tuple[int, ...]:
    """The GPUs a pod takes on ``node`` (bind's rule as it was, on numpy), updating ``rows``."""
    row = rows[node]
    if milli < GPU_MILLI_PER_GPU:
        ok = np.flatnonzero(row >= milli)
        partly = ok[row[ok] < GPU_MILLI_PER_GPU]
        pick = (int(partly[np.argmin(row[partly])]) if partly.size else int(ok[0]),)
        row[pick[0]] -= milli
        return pick
    idx = tuple(int(i) for i in np.flatnonzero(row == GPU_MILLI_PER_GPU)[:pod_gpus])
    row[list(idx)] = 0
    return idx


# ---- random states and jobs ------------------------------------------------------------------


def _mixed() -> Topology:
    """40 nodes of 8 or 4 GPUs (every fifth has 4): racks of 5, rows of 2 racks, one hall."""
    gpn = [4 if i % 5 == 3 else 8 for i in range(40)]
    return Topology.build(
        gpn,
        ("rack", "row", "hall"),
        [np.arange(40) // 5, np.arange(40) // 10, np.zeros(40, dtype=np.int64)],
    )


TOPOLOGIES = {
    "superpod": lambda: superpod(64, leaf_nodes=8),
    "nvl72": lambda: nvl72(288),
    "mixed": _mixed,
    "flat": lambda: uniform(24, 8, []),
}


def _random_job(rng: np.random.Generator, topo: Topology, job_id: int) -> Job:
    """1..64 GPUs (a quarter of the 1-GPU jobs share a GPU), constraints at every level."""
    gpus = (
        int(rng.choice([1, 1, 2, 3, 4, 8, 8, 12, 16, 24, 32, 40, 64]))
        if rng.random() < 0.8
        else int(rng.integers(1, 65))
    )
    milli = int(rng.choice([250, 500, 700])) if gpus == 1 and rng.random() < 0.25 else GPU_MILLI_PER_GPU
    mode = rng.choice(["none", "required", "preferred"])
    level = str(rng.choice(["node", *topo.levels]))
    con = None if mode == "none" else Constraint(str(mode), level)
    return Job(job_id, 0.0, 1.0, gpus, gpu_milli=milli, constraint=con)


def _random_nodes(rng: np.random.Generator, state: ClusterState, job: Job) -> list[int] | None:
    """A random placement (fragments the state): each pod on a random node with room."""
    out: list[int] = []
    scratch = state.copy()
    for g in state.pods_of(job):
        ok = [
            int(n)
            for n in rng.permutation(state.topology.num_nodes)
            if scratch.fits(int(n), g, job.gpu_milli)
        ]
        if not ok:
            return None
        out.append(ok[0])
        if job.is_sharing:
            break
        scratch.free_gpus[ok[0]] -= g
    return out


def _recount(state: ClusterState) -> DomainCounts:
    return DomainCounts.recount(state.index, state.free_gpus, state.topology.gpus_per_node)


WORK = Workload((1, 2, 4, 8, 16, 32, 64), (0.3, 0.05, 0.1, 0.25, 0.1, 0.15, 0.05))


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_aggregates_and_decisions_match_the_reference(name: str, seed: int) -> None:
    topo = TOPOLOGIES[name]()
    rng = np.random.default_rng(seed)
    ours, ref = GangAware(WORK), _Reference(WORK)
    state = ClusterState.for_topology(topo)
    placed = compared = 0
    for step in range(250):
        if state.placements and rng.random() < 0.3:
            state.unbind_job(int(rng.choice(sorted(state.placements))))
        else:
            job = _random_job(rng, topo, step)
            want = ref.place(state, job)
            got = ours.place(state, job)
            assert got == want, (step, job)
            compared += 1
            nodes = got if got is not None and rng.random() < 0.6 else _random_nodes(rng, state, job)
            if nodes is None:
                continue
            rows = {n: state.gpu_milli_left[n].copy() for n in nodes}
            expect = [_ref_gpus(rows, n, g, job.gpu_milli) for n, g in zip(nodes, state.pods_of(job))]
            assert [p.gpu_indices for p in state.bind_job(job, nodes)] == expect
            placed += 1
        assert state.kept_counts().equals(_recount(state)), step
    assert placed > 50 and compared > 100


@pytest.mark.parametrize("how", ["direct", "hide"])
@pytest.mark.parametrize("name", ["superpod", "nvl72", "mixed"])
def test_hidden_nodes_keep_decisions_equal_to_the_reference(name: str, how: str) -> None:
    # Reservations hide nodes by zeroing their free arrays for one call.  Written directly,
    # the aggregates go stale and domain_counts answers a recount; through hide / restore the
    # kept aggregates follow.  Either way the decisions equal the reference's, and putting the
    # nodes back gives the kept aggregates of before.
    topo = TOPOLOGIES[name]()
    rng = np.random.default_rng(11)
    ours, ref = GangAware(WORK), _Reference(WORK)
    state = ClusterState.for_topology(topo)
    while state.used_gpus() < 0.5 * topo.total_gpus:
        job = _random_job(rng, topo, len(state.placements))
        nodes = _random_nodes(rng, state, job) if rng.random() < 0.5 else ours.place(state, job)
        if nodes is not None:
            state.bind_job(job, nodes)
    kept = state.kept_counts().copy()
    arrays = state.free_gpus.copy(), state.gpu_milli_left.copy()
    hidden_cases = 0
    for trial in range(40):
        hidden = rng.choice(topo.num_nodes, size=int(rng.integers(1, topo.num_nodes // 3)), replace=False)
        hidden_cases += int((state.free_gpus[hidden] > 0).any())
        if how == "direct":
            saved = state.free_gpus[hidden].copy(), state.gpu_milli_left[hidden].copy()
            state.free_gpus[hidden] = 0
            state.gpu_milli_left[hidden] = 0
        else:
            rows = state.hide(hidden)
            assert not state.free_gpus[hidden].any() and not state.gpu_milli_left[hidden].any()
            assert state.domain_counts() is state.kept_counts()
        assert state.domain_counts().equals(_recount(state))
        for j in range(5):
            job = _random_job(rng, topo, 1000 + 10 * trial + j)
            assert ours.place(state, job) == ref.place(state, job)
        if how == "direct":
            state.free_gpus[hidden], state.gpu_milli_left[hidden] = saved
        else:
            state.restore(hidden, rows)
        assert np.array_equal(state.free_gpus, arrays[0]) and np.array_equal(state.gpu_milli_left, arrays[1])
        assert state.domain_counts() is state.kept_counts()
        assert state.kept_counts().equals(kept)
    assert hidden_cases > 30


def test_a_copy_keeps_its_own_aggregates() -> None:
    state = ClusterState.for_topology(superpod(16, leaf_nodes=4))
    state.bind_job(Job(1, 0, 1, 24), [0, 1, 2])
    other = state.copy()
    other.bind_job(Job(2, 0, 1, 8), [5])
    other.unbind_job(1)
    assert state.kept_counts().equals(_recount(state))
    assert other.kept_counts().equals(_recount(other))
    # worked by hand: leaf 0 (nodes 0-3) has one wholly free node in state, four in other
    assert state.kept_counts().whole[0].tolist() == [1, 4, 4, 4]
    assert other.kept_counts().whole[0].tolist() == [4, 3, 4, 4]


def test_histogram_by_hand() -> None:
    # 8 nodes of 8 GPUs, leaves of 4.  Node 0 keeps 5 free (3 taken), node 1 keeps 7 (a share
    # takes one GPU), node 5 none; everything else wholly free.
    state = ClusterState.for_topology(superpod(8, leaf_nodes=4))
    state.bind_job(Job(1, 0, 1, 3), [0])
    state.bind_job(Job(2, 0, 1, 1, gpu_milli=500), [1])
    state.bind_job(Job(3, 0, 1, 1, gpu_milli=250), [1])  # best fit: the partly used GPU, no change
    state.bind_job(Job(4, 0, 1, 8), [5])
    leaf, spine, root = state.kept_counts().free_hist
    assert leaf[0].tolist() == [0, 0, 0, 0, 0, 1, 0, 1, 2]
    assert leaf[1].tolist() == [1, 0, 0, 0, 0, 0, 0, 0, 3]
    assert spine.tolist() == root.tolist() == [[1, 0, 0, 0, 0, 1, 0, 1, 5]]
    assert [w.tolist() for w in state.kept_counts().whole] == [[2, 3], [5], [5]]


def test_failed_bind_leaves_the_aggregates_as_they_were() -> None:
    state = ClusterState.for_topology(superpod(4, leaf_nodes=2))
    state.bind_job(Job(1, 0, 1, 4), [1])
    before = state.kept_counts().copy()
    with pytest.raises(ValueError):
        state.bind_job(Job(2, 0, 1, 16), [0, 1])  # node 1 has only 4 free
    assert state.kept_counts().equals(before) and before.equals(_recount(state))


# ---- the domain index --------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    groups=st.lists(st.integers(0, 5), min_size=0, max_size=3),
)
def test_domain_index_matches_brute_force(n: int, groups: list[int]) -> None:
    names = [f"l{i}" for i in range(len(groups))]
    topo = uniform(n, 4, list(zip(names, groups)))
    index = domain_index(topo)
    assert index is domain_index(topo)  # cached
    maps = [*topo.domain_of, np.zeros(n, dtype=np.int64)]
    assert index.root == len(groups)
    for li, dom in enumerate(maps):
        for d in range(int(dom.max()) + 1):
            assert index.members(li, d).tolist() == [i for i in range(n) if dom[i] == d]
            if li >= 1:
                below = maps[li - 1]
                kids = sorted({int(below[i]) for i in range(n) if dom[i] == d})
                assert index.children(li, d).tolist() == kids
        for up in range(li + 1, len(maps)):
            expect = [int(maps[up][int(np.flatnonzero(dom == d)[0])]) for d in range(int(dom.max()) + 1)]
            assert index.ancestor(li, up).tolist() == expect
