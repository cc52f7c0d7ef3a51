"""Gang decision latency on a large, fragmented cluster (issue 18, item 3): our gang placement
(:class:`~gpudefrag.gangs.ours.GangAware`, suite 2's objective) at up to a million GPUs.

The cluster (:func:`gang_cluster`): a suite 2 topology preset (``superpod``: 8 GPUs per node,
32 nodes per leaf; ``nvl72``: 4 GPUs per node, 18 per NVLink domain, 8 domains per group)
sized to ``gpus`` GPUs and filled to ``fill`` of its GPUs, seeded:

* ``1 - SHARING_SHARE`` (80 %) of the filled GPUs by ITP cluster04 jobs, each drawn with
  probability proportional to its duration (the jobs running at a random instant) and split
  into pods (:meth:`ClusterState.pods_of`).  A one-pod job goes on the first of ``TRIES`` random
  nodes with room; a gang puts its full-node pods on distinct wholly free nodes, the first
  found among ``TRIES`` random draws per pod (no topology rule: a gang spreads over domains),
  and its remainder pod like a one-pod job.  A job without room is dropped (all-or-nothing).
* the rest by sharing pods (openb-like inference pods) of 250 or 500 milli of one GPU, equally
  likely (a simple stand-in for openb's ``gpu_milli``), each on the first of ``TRIES`` random
  nodes that has a partly used GPU with room, else on the first of them with room at all (a
  scheduler packs sharing pods onto shared GPUs), on that node's best-fit GPU
  (:meth:`ClusterState.bind`).

"Random nodes" are not uniform: every domain of every level with more than one domain gets a
weight ``exp(N(0, sigma^2))`` (``sigma = DOMAIN_SIGMA = 1`` by default) and a node is drawn with
probability proportional to the product of its domains' weights, so some leaves (NVLink
domains, groups) run hotter than others, as in a real cluster, and the cooler ones keep wholly
free nodes; with ``domain_sigma=0`` the nodes are uniform and wholly free nodes are scattered
about one per leaf (the hardest case for picking many of them).  The same seed gives the same
occupancy.

The measurement (:func:`bench_gangs`): the policy is ``GangAware`` with the workload of the ITP
jobs (:meth:`Workload.from_jobs`).  For each gang size, a job of that many GPUs with a
``required`` constraint at the lowest level whose largest domain holds that many GPUs (no
constraint when no level does: the whole cluster) is placed ``decisions`` times, timing
``place`` only.  A found gang is bound; when more than ``KEEP_GANGS`` of the bench's gangs are
bound, the oldest is unbound, so the decisions see a changing state that stays within a few
gangs of the filled one; every bench gang is unbound before the next size, so each size starts
from the same occupancy.
"""

from __future__ import annotations

import resource
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.gangs.objective import Workload
from gpudefrag.gangs.ours import GangAware
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.jobs import GPU_MILLI_PER_GPU, Constraint, Job
from gpudefrag.model.topology import PRESETS, Topology, superpod
from gpudefrag.workloads.itp import load_itp

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "DOMAIN_SIGMA",
    "KEEP_GANGS",
    "SHARING_MILLI",
    "SHARING_SHARE",
    "TRIES",
    "GangScaleResult",
    "bench_gangs",
    "format_result",
    "gang_cluster",
    "required_level",
]

TRIES = 16
"""Random nodes tried per filling pod before its job is dropped."""
SHARING_SHARE = 0.2
"""Share of the filled GPUs that sharing pods take."""
SHARING_MILLI = (250, 500)
"""The sharing pods' GPU share (milli of one GPU), drawn uniformly."""
DOMAIN_SIGMA = 1.0
"""Spread (log-normal sigma) of the domains' share of the filling pods."""
DRAW_CHUNK = 1 << 16
"""Random nodes drawn at once."""
ROUND = 4096
"""Jobs (or sharing pods) drawn at once while filling."""
MAX_ROUNDS = 100_000
"""Rounds before a fill that cannot reach its target stops."""
KEEP_GANGS = 2
"""Bench gangs kept bound at once; the oldest is unbound beyond this."""
BENCH_JOB_ID = 1 << 40
"""First job id of the bench's gangs (above every filling job's)."""
ITP_TRACE = "itp_cluster04"


def _topology(preset: str, gpus: int, leaf_nodes: int | None) -> Topology:
    """The preset sized to ``gpus`` GPUs; ``leaf_nodes`` sets superpod's nodes per leaf group."""
    if preset not in PRESETS:
        raise ValueError(f"unknown topology preset {preset!r}; known: {', '.join(PRESETS)}")
    if preset == "superpod":
        return superpod(max(1, gpus // 8), leaf_nodes or 32)
    if leaf_nodes is not None:
        raise ValueError("leaf_nodes applies to the superpod preset only (an NVLink domain is 18 nodes)")
    return PRESETS[preset](max(1, gpus // 4))


class _NodeDraws:
    """Random nodes for the filling rule: node ``i`` with probability proportional to the
    product of its domains' weights (``exp(N(0, sigma^2))`` per domain of every level with more
    than one domain; ``sigma = 0``: uniform), drawn in chunks from one seeded generator."""

    def __init__(self, topology: Topology, rng: np.random.Generator, sigma: float) -> None:
        weight = np.ones(topology.num_nodes, dtype=np.float64)
        for li in range(len(topology.levels)):
            count = topology.num_domains(li)
            if count > 1:
                weight *= rng.lognormal(0.0, sigma, size=count)[topology.domain_of[li]]
        self.cum = np.cumsum(weight)
        self.rng = rng
        self.buf = np.zeros(0, dtype=np.int64)
        self.pos = 0

    def take(self, count: int) -> IntArray:
        if self.pos + count > self.buf.size:
            u = self.rng.random(max(DRAW_CHUNK, count)) * self.cum[-1]
            self.buf = np.minimum(np.searchsorted(self.cum, u, side="right"), self.cum.size - 1)
            self.pos = 0
        out = self.buf[self.pos : self.pos + count]
        self.pos += count
        return out


def _one_pod_node(state: ClusterState, pod_gpus: int, draws: IntArray, skip: list[int]) -> int | None:
    for node in draws.tolist():
        if node not in skip and state.free_gpus[node] >= pod_gpus:
            return int(node)
    return None


def _sharing_node(state: ClusterState, gpu_milli: int, draws: IntArray) -> int | None:
    fm = state.gpu_milli_left[draws]
    room = fm >= gpu_milli
    for ok in ((room & (fm < GPU_MILLI_PER_GPU)).any(axis=1), room.any(axis=1)):
        if ok.any():
            return int(draws[int(np.argmax(ok))])
    return None


def _job_nodes(state: ClusterState, job: Job, draws: _NodeDraws) -> list[int] | None:
    """The filling rule of the module docstring for one job: its nodes, or None."""
    if job.is_sharing:
        node = _sharing_node(state, job.gpu_milli, draws.take(TRIES))
        return None if node is None else [node]
    sizes = state.pods_of(job)
    if len(sizes) == 1:
        node = _one_pod_node(state, sizes[0], draws.take(TRIES), [])
        return None if node is None else [node]
    gpn = state.index.max_gpus_per_node
    full = sum(1 for s in sizes if s == gpn)
    tried = draws.take(TRIES * full)
    whole = tried[state.free_gpus[tried] == gpn]
    _, first = np.unique(whole, return_index=True)
    if first.size < full:
        return None
    nodes = [int(x) for x in whole[np.sort(first)][:full]]
    if len(sizes) > full:
        rest = _one_pod_node(state, sizes[-1], draws.take(TRIES), nodes)
        if rest is None:
            return None
        nodes.append(rest)
    return nodes


def _fill(
    state: ClusterState, jobs: list[Job], draws: _NodeDraws, target_milli: float, used_milli: int
) -> int:
    """Bind ``jobs`` in order by the filling rule until ``target_milli`` is used; returns the
    milli used.  Ids continue from the state's count of jobs."""
    job_id = len(state.jobs)
    for template in jobs:
        if used_milli >= target_milli:
            break
        job = Job(job_id, 0.0, 1.0, template.gpus, gpu_milli=template.gpu_milli)
        nodes = _job_nodes(state, job, draws)
        if nodes is not None:
            state.bind_job(job, nodes)
            used_milli += job.gpus * job.gpu_milli
            job_id += 1
    return used_milli


def gang_cluster(
    gpus: int,
    preset: str,
    seed: int,
    fill: float = 0.6,
    itp_jobs: list[Job] | None = None,
    domain_sigma: float = DOMAIN_SIGMA,
    leaf_nodes: int | None = None,
) -> ClusterState:
    """The module docstring's filled cluster (``itp_jobs``: the ITP cluster04 jobs when None;
    ``domain_sigma``: the spread of the domains' load, 0 for uniformly random nodes;
    ``leaf_nodes``: superpod's nodes per leaf group, 32 when None)."""
    topo = _topology(preset, gpus, leaf_nodes)
    state = ClusterState.for_topology(topo)
    jobs = itp_jobs if itp_jobs is not None else load_itp(ITP_TRACE)
    rng = np.random.default_rng(seed)
    draws = _NodeDraws(topo, rng, domain_sigma)
    target_milli = fill * topo.total_gpus * GPU_MILLI_PER_GPU
    sizes = np.array([j.gpus for j in jobs], dtype=np.int64)
    p = np.array([j.duration_s for j in jobs], dtype=np.float64)
    p /= p.sum()
    used = 0
    for phase_target, sharing in (((1.0 - SHARING_SHARE) * target_milli, False), (target_milli, True)):
        for _ in range(MAX_ROUNDS):
            if used >= phase_target:
                break
            if sharing:
                milli = rng.choice(np.array(SHARING_MILLI, dtype=np.int64), size=ROUND)
                batch = [Job(0, 0.0, 1.0, 1, gpu_milli=int(m)) for m in milli]
            else:
                batch = [Job(0, 0.0, 1.0, int(g)) for g in rng.choice(sizes, size=ROUND, p=p)]
            used = _fill(state, batch, draws, phase_target, used)
    return state


def required_level(topology: Topology, gpus: int) -> str | None:
    """The lowest level whose largest domain holds ``gpus`` GPUs; None when no level does."""
    for li, name in enumerate(topology.levels):
        held = np.bincount(topology.domain_of[li], weights=topology.gpus_per_node)
        if int(held.max()) >= gpus:
            return name
    return None


@dataclass(frozen=True)
class GangScaleResult:
    """One bench: the cluster, its build time, and per gang size (GPUs) the level required
    (``"none"``: no constraint), the latencies of ``place`` (ms), the decisions that found no
    room, and every decision's nodes in order (``()`` when it found no room)."""

    preset: str
    levels: str
    gpus: int
    nodes: int
    used_gpus: float
    whole_free_nodes: int
    build_s: float
    level: dict[int, str]
    latency_ms: dict[int, FloatArray]
    no_room: dict[int, int]
    placed: dict[int, list[tuple[int, ...]]]
    max_rss_mib: float


def bench_gangs(
    gpus: int,
    preset: str,
    seed: int,
    decisions: int,
    sizes: tuple[int, ...] = (64, 512, 1024, 8192),
    fill: float = 0.6,
    domain_sigma: float = DOMAIN_SIGMA,
    leaf_nodes: int | None = None,
) -> GangScaleResult:
    """Build the cluster, then time ``decisions`` gang placements per size (module docstring)."""
    jobs = load_itp(ITP_TRACE)
    started = time.perf_counter()
    state = gang_cluster(gpus, preset, seed, fill, jobs, domain_sigma, leaf_nodes)
    build_s = time.perf_counter() - started
    used = state.used_gpus()
    whole = int(state.whole_free_nodes().sum())
    policy = GangAware(Workload.from_jobs(jobs))
    levels: dict[int, str] = {}
    latency: dict[int, FloatArray] = {}
    no_room: dict[int, int] = {}
    placed: dict[int, list[tuple[int, ...]]] = {}
    next_id = BENCH_JOB_ID
    for size in sizes:
        name = required_level(state.topology, size)
        levels[size] = name or "none"
        con = None if name is None else Constraint("required", name)
        times = np.empty(decisions, dtype=np.float64)
        bound: deque[int] = deque()
        placed[size] = []
        no_room[size] = 0
        for i in range(decisions):
            job = Job(next_id, 0.0, 1.0, size, constraint=con)
            next_id += 1
            t0 = time.perf_counter_ns()
            nodes = policy.place(state, job)
            times[i] = (time.perf_counter_ns() - t0) / 1e6
            if nodes is None:
                no_room[size] += 1
                placed[size].append(())
                continue
            state.bind_job(job, nodes)
            placed[size].append(tuple(nodes))
            bound.append(job.job_id)
            if len(bound) > KEEP_GANGS:
                state.unbind_job(bound.popleft())
        while bound:
            state.unbind_job(bound.popleft())
        latency[size] = times
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    topo = state.topology
    sizes_text = ", ".join(
        f"{name} of {int(np.bincount(topo.domain_of[li]).max()):,} nodes"
        for li, name in enumerate(topo.levels)
    )
    return GangScaleResult(
        preset,
        sizes_text,
        state.topology.total_gpus,
        state.topology.num_nodes,
        used,
        whole,
        build_s,
        levels,
        latency,
        no_room,
        placed,
        rss_mib,
    )


def format_result(res: GangScaleResult) -> str:
    """A few lines: the cluster, then per gang size its level and p50 / p99 / max in ms."""
    lines = [
        f"{res.preset} ({res.levels}): {res.gpus:,} GPUs on {res.nodes:,} nodes, {res.used_gpus / res.gpus:.1%} used, "
        f"{res.whole_free_nodes:,} wholly free nodes; build {res.build_s:.1f} s, peak RSS {res.max_rss_mib:,.0f} MiB",
        f"{'gang GPUs':>10} {'required':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'no room':>8}",
    ]
    for size, times in res.latency_ms.items():
        p50, p99 = (float(np.percentile(times, q)) for q in (50, 99)) if times.size else (0.0, 0.0)
        top = float(times.max()) if times.size else 0.0
        lines.append(
            f"{size:>10,} {res.level[size]:>9} {p50:>8.2f} {p99:>8.2f} {top:>8.2f} "
            f"{res.no_room[size]:>4}/{times.size}"
        )
    return "\n".join(lines)
