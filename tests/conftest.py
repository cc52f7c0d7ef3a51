"""Shared fixtures: the dataset mirror, the default workload inputs, small synthetic clusters.

The mirror is ``$GPUDEFRAG_MIRROR`` if set (a relative path is made absolute), else
``<repo>/../shared/data``.  When the variable is unset and that folder exists, it is exported at
import time so that every test (and every subprocess a test starts) resolves registered files
from it.

Synthetic-cluster helpers are exposed through the session fixture ``gen`` (a namespace of
hypothesis strategies and plain helper functions), so that test modules need not import this
file: use ``@given(data=st.data())`` and ``data.draw(gen.clusters())``.

The time-driven simulator's tests (in several folders) share two plain functions, imported
with ``from conftest import ...`` (pytest's default ``prepend`` import mode puts this folder on
``sys.path``): :func:`timed_workload`, a hand-made workload, and :func:`place_in_order`, the
first-fit decision their stub schedulers make.  Tests that drive the decision core through its
port without the simulator import :class:`InMemoryCluster` the same way.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import strategies as st
from lightkube import Client, KubeConfig

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import ANY_GPU_MODEL, GPU_MILLI_PER_GPU
from gpudefrag.model.gpu_models import KNOWN_GPU_MODELS, gpu_model_mask, model_id
from gpudefrag.model.jobs import Constraint, Job
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.model.port import Bind, PendingPod, RunningPod, SchedulingCycle, SchedulingDecision
from gpudefrag.model.topology import Topology
from gpudefrag.sim.sessions import fit_on_node
from gpudefrag.workloads.synthetic import SyntheticWorkload
from gpudefrag_fakecluster.apiserver import FakeApiServer
from gpudefrag_fakecluster.store import Store

REPO_ROOT = Path(__file__).resolve().parents[1]
MIRROR_ENV = "GPUDEFRAG_MIRROR"
FALLBACK_MIRROR = Path(__file__).parents[1] / ".." / "shared" / "data"


def _mirror_path() -> Path:
    env = os.environ.get(MIRROR_ENV, "").strip()
    return Path(env).expanduser() if env else FALLBACK_MIRROR.resolve()


if not os.environ.get(MIRROR_ENV, "").strip() and FALLBACK_MIRROR.resolve().is_dir():
    os.environ[MIRROR_ENV] = str(FALLBACK_MIRROR.resolve())
elif not Path(os.environ[MIRROR_ENV].strip()).expanduser().is_absolute():
    # ``.ci/run`` passes ../shared/data: made absolute once, so that tests that change the
    # working folder (``monkeypatch.chdir``) still find it
    os.environ[MIRROR_ENV] = str(Path(os.environ[MIRROR_ENV].strip()).expanduser().resolve())


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The dataset mirror folder (skips the test when it does not exist)."""
    path = _mirror_path()
    if not path.is_dir() or not (path / "openb").is_dir():
        pytest.skip(f"dataset mirror not available ({path}); set {MIRROR_ENV}")
    return path


@pytest.fixture(scope="session")
def default_inputs(mirror):
    """``workload_inputs('openb_pod_list_default')``: original pods, typical pods, GPU nodes."""
    from gpudefrag.experiments.common.inputs import workload_inputs

    return workload_inputs("openb_pod_list_default")


# ------------------------------------------------------------------------------ synthetic clusters
# Node shapes resembling the openb GPU-node list (model, GPUs, CPU milli, memory MiB), plus
# GPU-less nodes (model id 0, as ``cluster_from_nodes`` gives them).
NODE_SHAPES = (
    ("G2", 8, 96000, 393216),
    ("T4", 2, 104000, 524288),
    ("P100", 2, 16000, 122880),
    ("G3", 8, 128000, 786432),
    ("V100M16", 4, 32000, 131072),
    ("V100M32", 8, 96000, 786432),
    ("V100M16", 1, 8000, 32768),
    ("T4", 4, 96000, 393216),
    ("V100M32", 4, 48000, 376832),
    ("P100", 1, 8000, 61440),
    ("A10", 1, 128000, 1048576),
    ("", 0, 64000, 262144),
)


def build_cluster(nodes, tie_rank=None) -> ClusterState:
    """A fresh cluster from ``[(model or '', gpu_count, cpu_milli, memory_mib), ...]``."""
    names = [f"node-{i:02d}" for i in range(len(nodes))]
    models = np.array([model_id(m) if m else 0 for m, *_ in nodes], dtype=np.int64)
    gpus = np.array([n[1] for n in nodes], dtype=np.int64)
    cpu = np.array([n[2] for n in nodes], dtype=np.int64)
    mem = np.array([n[3] for n in nodes], dtype=np.int64)
    return ClusterState(names, models, gpus, cpu, mem, tie_rank)


def single_node(model: str, gpu_count: int, cpu_milli: int, memory_mib: int = 1 << 20) -> ClusterState:
    return build_cluster([(model, gpu_count, cpu_milli, memory_mib)])


def fitting_placements(state: ClusterState, pod: PodSpec, node: int) -> list[tuple[int, ...]]:
    """Some GPU tuples that fit ``pod`` on ``node`` (not only the canonical ones)."""
    if pod.gpu_milli <= 0:
        return [()] if state.why_not_fits(node, pod, ()) is None else []
    count = int(state.gpu_count[node])
    ok = [g for g in range(count) if state.gpu_milli_left[node, g] >= pod.gpu_milli]
    if len(ok) < pod.num_gpu:
        return []
    if pod.num_gpu == 1:
        cands = [(g,) for g in ok]
    else:
        cands = [tuple(ok[: pod.num_gpu]), tuple(ok[-pod.num_gpu :])]
    return [c for c in cands if state.why_not_fits(node, pod, c) is None]


def random_fill(state: ClusterState, pods, seed: int) -> list[Placement]:
    """Bind each pod on a random node/GPU choice that fits (scattered, not policy-like)."""
    rng = random.Random(seed)
    placed = []
    for pod in pods:
        options = [(n, g) for n in range(state.num_nodes) for g in fitting_placements(state, pod, n)]
        if not options:
            continue
        node, gpus = rng.choice(options)
        p = Placement(node, gpus, pod)
        state.bind(p)
        placed.append(p)
    return placed


# ------------------------------------------------------------------------------ strategies
CPU_CHOICES = (1000, 2000, 3152, 4000, 6000, 8000, 11300, 12500, 16000, 32000, 64000, 96000)
MEM_CHOICES = (0, 1024, 4096, 16384, 65536, 200000)
SHARE_MILLI = (50, 100, 160, 250, 300, 470, 500, 650, 810, 999)
CONSTRAINTS = ("", "V100M32", "V100M16|V100M32", "G2", "T4|P100", "A10|G3")


@st.composite
def node_specs(draw):
    model, gpus, cpu, mem = draw(st.sampled_from(NODE_SHAPES))
    if draw(st.booleans()):  # vary the shape beyond the openb list
        gpus = draw(st.sampled_from((0, 1, 2, 4, 8)))
        model = "" if gpus == 0 else draw(st.sampled_from(KNOWN_GPU_MODELS))
        cpu = draw(st.sampled_from((8000, 16000, 32000, 64000, 96000, 128000)))
    return (model, gpus, cpu, mem)


@st.composite
def pods(draw, kinds=("cpu", "share", "whole", "multi")):
    """A supported pod shape: CPU-only, sharing, one whole GPU, or 2/4/8 whole GPUs, maybe
    constrained to GPU models."""
    kind = draw(st.sampled_from(kinds))
    cpu = draw(st.sampled_from(CPU_CHOICES))
    mem = draw(st.sampled_from(MEM_CHOICES))
    if kind == "cpu":
        return PodSpec(cpu, mem)
    mask = gpu_model_mask(draw(st.sampled_from(CONSTRAINTS)))
    if kind == "share":
        return PodSpec(cpu, mem, 1, draw(st.sampled_from(SHARE_MILLI)), mask)
    if kind == "whole":
        return PodSpec(cpu, mem, 1, GPU_MILLI_PER_GPU, mask)
    return PodSpec(cpu, mem, draw(st.sampled_from((2, 4, 8))), GPU_MILLI_PER_GPU, mask)


@st.composite
def batches(draw, max_pods: int = 8):
    """1..``max_pods`` pods as a batch of arrivals: distinct objects with distinct names."""
    drawn = draw(st.lists(pods(), min_size=1, max_size=max_pods))
    return [
        PodSpec(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_model_mask, f"b{i}")
        for i, p in enumerate(drawn)
    ]


@st.composite
def clusters(draw, min_nodes=1, max_nodes=12, max_prior=25):
    """A small cluster with a random tie-break permutation, partly filled by random binds."""
    nodes = draw(st.lists(node_specs(), min_size=min_nodes, max_size=max_nodes))
    rank = draw(st.permutations(range(len(nodes))))
    state = build_cluster(nodes, np.array(rank, dtype=np.int64))
    prior = draw(st.lists(pods(), max_size=max_prior))
    random_fill(state, prior, draw(st.integers(0, 2**16)))
    return state


def synthetic_typical():
    """Typical pods of a small hand-made trace: sharing, whole, multi-GPU, CPU-only and a
    model-constrained shape (so FGD sees ``no_access`` too)."""
    from gpudefrag.frag.typical import typical_pods

    shapes = (
        [(3152, 0, 1, 810, "")] * 9
        + [(11300, 0, 1, 1000, "")] * 7
        + [(12500, 0, 0, 0, "")] * 5
        + [(4000, 0, 1, 160, "")] * 4
        + [(8000, 0, 1, 470, "V100M32")] * 3
        + [(88000, 0, 8, 1000, "")] * 2
        + [(32000, 0, 2, 1000, "")] * 2
        + [(2000, 0, 0, 0, "")]
    )
    specs = [PodSpec(c, m, n, g, gpu_model_mask(s), f"t-{i}") for i, (c, m, n, g, s) in enumerate(shapes)]
    return typical_pods(pod_batch(specs, [s[4] for s in shapes]))


@pytest.fixture(scope="session")
def typical_small():
    return synthetic_typical()


@pytest.fixture(scope="session")
def gen():
    """Strategies and helpers for synthetic clusters (see the module docstring)."""
    return SimpleNamespace(
        clusters=clusters,
        pods=pods,
        batches=batches,
        node_specs=node_specs,
        build_cluster=build_cluster,
        single_node=single_node,
        random_fill=random_fill,
        fitting_placements=fitting_placements,
        NODE_SHAPES=NODE_SHAPES,
        ANY=ANY_GPU_MODEL,
    )


@pytest.fixture(scope="session")
def cluster_builder():
    """``build(nodes, tie_rank=None)``: a fresh ClusterState from node tuples."""
    return build_cluster


# ------------------------------------------------------------------------------ time-driven runs
def timed_workload(
    pods,
    arrivals,
    durations,
    *,
    priority=None,
    interval=600.0,
    phase=0.0,
    dnd=None,
    horizon=10_000.0,
    warmup=0.0,
) -> SyntheticWorkload:
    """A hand-made workload: ``pods`` (named ``p<i>`` unless named) arriving at ``arrivals``
    and running ``durations`` seconds, all with the same checkpoint ``interval`` and ``phase``."""
    pods = [
        PodSpec(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_model_mask, p.name or f"p{i}")
        for i, p in enumerate(pods)
    ]
    n = len(pods)
    return SyntheticWorkload(
        pods=pod_batch(pods),
        arrival_s=np.asarray(arrivals, dtype=float),
        duration_s=np.asarray(durations, dtype=float),
        checkpoint_interval_s=np.full(n, float(interval)),
        checkpoint_phase_s=np.full(n, float(phase)),
        do_not_disrupt=np.zeros(n, bool) if dnd is None else np.asarray(dnd, bool),
        priority=np.zeros(n, np.int64) if priority is None else np.asarray(priority, np.int64),
        warmup_s=warmup,
        horizon_s=horizon,
        offered_load=1.0,
    )


def place_in_order(cycle: SchedulingCycle, nodes_of) -> SchedulingDecision:
    """Every pending pod of ``cycle`` considered, in order, and bound on the first of
    ``nodes_of(pod, work)`` it fits (``best`` GPUs), binding as it goes on a copy of the cycle's
    state; no bind where none fits.  No work reported (the latency is the config's)."""
    work, binds = cycle.state.copy(), []
    for pending in cycle.pending:
        pod = pending.spec
        for n in nodes_of(pod, work):
            gpus = fit_on_node(work, n, pod)
            if gpus is not None:
                p = Placement(n, gpus, pod)
                work.bind(p)
                binds.append(Bind(pending.pod_id, p))
                break
    return SchedulingDecision(binds, len(cycle.pending), 0.0, 0.0)


@dataclass
class InMemoryCluster:
    """The read side of the port over plain lists: what a real cluster's caches would hold."""

    state: ClusterState
    now_s: float = 0.0
    pending: list[PendingPod] = field(default_factory=list)
    running: list[RunningPod] = field(default_factory=list)
    reservations: dict[int, int] = field(default_factory=dict)

    @property
    def blocked(self) -> list[PendingPod]:
        return [p for p in self.pending if p.blocked]

    def running_on(self, node: int) -> list[RunningPod]:
        return [p for p in self.running if p.node == node]

    def snapshot(self) -> ClusterState:
        return self.state.copy()

    def start(
        self, pod_id: int, spec: PodSpec, node: int, gpus: tuple[int, ...], *, last_ckpt: float
    ) -> None:
        """A pod that started at t = 0 and has run since; ``last_ckpt``: its run time at its last
        checkpoint (0: none)."""
        self.state.bind(Placement(node, gpus, spec))
        self.running.append(
            RunningPod(pod_id, spec, node, gpus, 0.0, 600.0, self.now_s, last_ckpt, False, False)
        )


# ---- suite 2 (gangs): random states and jobs shared by the baseline tests ----------------------


def random_gang_state(topo: Topology, rng: random.Random) -> ClusterState:
    """A state on ``topo`` with about 35 % full nodes, 25 % partly used, 5 % with a shared GPU."""
    s = ClusterState.for_topology(topo)
    g = topo.max_gpus_per_node
    for i in range(topo.num_nodes):
        r = rng.random()
        if r < 0.35:
            s.bind_job(Job(50_000 + i, 0.0, 1.0, g), [i])
        elif r < 0.6:
            s.bind_job(Job(50_000 + i, 0.0, 1.0, rng.randint(1, g - 1)), [i])
        elif r < 0.65:
            s.bind_job(Job(50_000 + i, 0.0, 1.0, 1, gpu_milli=rng.choice((250, 500))), [i])
    return s


def random_gang_jobs(topo: Topology, rng: random.Random, k: int) -> list[Job]:
    """``k`` jobs of mixed sizes (sharing, single-node, gangs with remainders) and constraints."""
    g = topo.max_gpus_per_node
    levels = ["node", *topo.levels]
    out = []
    for j in range(k):
        gpus = rng.choice((1, 2, g // 2, g, g + g // 2, 2 * g, 3 * g, 4 * g + 1, 6 * g))
        c = rng.choice((None, "required", "preferred"))
        con = None if c is None else Constraint(c, rng.choice(levels))
        milli = rng.choice((1000, 1000, 1000, 300)) if gpus == 1 else 1000
        out.append(Job(j, 0.0, 1.0, gpus, gpu_milli=milli, constraint=con))
    return out


def busy_state(topo: Topology, used: dict[int, int]) -> ClusterState:
    """A state whose node n has ``used[n]`` GPUs taken by filler jobs."""
    s = ClusterState.for_topology(topo)
    for i, (node, g) in enumerate(sorted(used.items())):
        s.bind_job(Job(10_000 + i, 0.0, 1.0, g), [node])
    return s


def gang_job(gpus: int, c: str | None = None, jid: int = 1) -> Job:
    """A job of ``gpus`` GPUs with constraint ``c`` (``"required:leaf"``) or none."""
    con = None if c is None else Constraint(*c.split(":"))
    return Job(jid, 0.0, 1.0, gpus, constraint=con)


def check_policy_on_random_states(policy, topo: Topology, seed: int, states: int, complete: bool) -> None:
    """On random states: ``policy.place`` never mutates the state; an answer binds whole (one node
    per pod, every pod fits); required constraints hold; with ``complete``, a job without a
    constraint or with a preferred one is placed exactly when the cluster can host it."""
    from gpudefrag.gangs.policy import domain_can_host
    from gpudefrag.gangs.topo_search import all_in_one_domain

    rng = random.Random(seed)
    every = np.arange(topo.num_nodes, dtype=np.int64)
    for _ in range(states):
        s = random_gang_state(topo, rng)
        before = (s.free_gpus.copy(), s.gpu_milli_left.copy(), s.epoch, dict(s.placements))
        for job in random_gang_jobs(topo, rng, 12):
            nodes = policy.place(s, job)
            assert np.array_equal(s.free_gpus, before[0]) and np.array_equal(s.gpu_milli_left, before[1])
            assert s.epoch == before[2] and s.placements == before[3]
            c = job.constraint
            if complete and (c is None or c.mode == "preferred"):
                assert (nodes is not None) == domain_can_host(s, job, every)
            if nodes is None:
                continue
            assert len(nodes) == len(s.pods_of(job))
            s.copy().bind_job(job, nodes)  # raises unless every pod fits where it is put
            if c is not None and c.mode == "required":
                assert all_in_one_domain(topo, topo.level_index(c.level), nodes)


# ---- the dataset mirror, for tests that read the real traces -----------------------------------

DEFAULT_MIRROR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
"""Where ``.ci/run`` points ``GPUDEFRAG_MIRROR`` by default (``../shared/data``)."""


def real_mirror() -> Path | None:
    """The mirror folder holding the real traces (``GPUDEFRAG_MIRROR``, else the CI default)."""
    env = os.environ.get("GPUDEFRAG_MIRROR")
    for cand in ([Path(env)] if env else []) + [DEFAULT_MIRROR]:
        if (cand / "philly-pollux" / "philly.csv").is_file():
            return cand
    return None


needs_mirror = pytest.mark.skipif(real_mirror() is None, reason="dataset mirror not available")


# ---- the Kubernetes driver: a fake API server, or a real cluster ---------------------------------
# Fixtures for the Kubernetes driver's tests: a fake API server, and a lightkube client to it
# (or to a real cluster).
#
# ``fake_api`` starts a :class:`~gpudefrag_fakecluster.apiserver.FakeApiServer` on 127.0.0.1 with a
# fresh store and a kubeconfig (``.store``, ``.url``, ``.kubeconfig_path``) and stops it after
# the test.  ``kube_client`` is a ``lightkube.Client`` to it, or, when the environment variable
# ``GPUDEFRAG_KUBECONFIG`` names a kubeconfig file, to that real cluster.  With a real cluster,
# a test that requests ``fake_api`` (the fake's internals: its store, compaction) or carries the
# ``fake_only`` mark is skipped.  ``kube_namespace`` is ``"default"`` on the fake and a fresh
# namespace (deleted afterwards) on a real cluster.

REAL_KUBECONFIG_ENV = "GPUDEFRAG_KUBECONFIG"
_namespaces = itertools.count(1)


def real_kubeconfig() -> Path | None:
    """The real cluster's kubeconfig named by ``$GPUDEFRAG_KUBECONFIG``, if that file exists."""
    value = os.environ.get(REAL_KUBECONFIG_ENV, "").strip()
    path = Path(value).expanduser() if value else None
    return path if path is not None and path.is_file() else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fake_only: needs the fake API server's internals (skipped on a real cluster)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if real_kubeconfig() is None:
        return
    skip = pytest.mark.skip(reason=f"needs the fake API server (${REAL_KUBECONFIG_ENV} names a real cluster)")
    for item in items:
        if "fake_only" in item.keywords or "fake_api" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[FakeApiServer]:
    """A started fake API server with a fresh store (seed 0) and a kubeconfig; stopped after."""
    if real_kubeconfig() is not None:
        pytest.skip(f"needs the fake API server (${REAL_KUBECONFIG_ENV} names a real cluster)")
    server = FakeApiServer(Store(seed=0)).start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield server
    finally:
        server.stop()
        server.store.close()


@pytest.fixture
def kube_client(request: pytest.FixtureRequest) -> Iterator[Client]:
    """A lightkube client to the real cluster of ``$GPUDEFRAG_KUBECONFIG``, else to ``fake_api``."""
    path = real_kubeconfig()
    if path is None:
        path = request.getfixturevalue("fake_api").kubeconfig_path
    client = Client(KubeConfig.from_file(path), field_manager="gpudefrag-tests")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kube_namespace(kube_client: Client) -> Iterator[str]:
    """``"default"`` on the fake; a fresh namespace on a real cluster (deleted afterwards)."""
    if real_kubeconfig() is None:
        yield "default"
        return
    from lightkube.resources.core_v1 import Namespace

    name = f"gpudefrag-test-{os.getpid()}-{next(_namespaces)}"
    kube_client.create(Namespace.from_dict({"metadata": {"name": name}}))
    try:
        yield name
    finally:
        kube_client.delete(Namespace, name)
