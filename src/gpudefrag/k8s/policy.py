"""The decision core the Kubernetes driver runs: the same policies and batch placer as the
simulators, and the target workload (typical pods) they measure fragmentation against.

Typical pods: given explicitly (``typical``, e.g. the simulator's, for parity), or *observed*:
FGD's rule over the GPU workload of the pods the cache has seen
(:func:`~gpudefrag.k8s.gpu_workload.gpu_workload_typical`: GPU pods, not DaemonSet or static
pods), recomputed when the number of pods seen has doubled since the last time (and at the
first cycle), so the measure follows the cluster's real mix without changing at every pod.

Expected requests: at the same moments (typical pods fixed or not), the policy is told the
requests of every pod the cache holds, most common first (:meth:`DecisionCore.expect_requests`),
so its incremental index (attached to the cache's decision view first; with the solver, the
policy is the batch placer's own FGD, whose index serves its plans and candidates) builds their
trees at once, up to its budget: the pods a cluster runs are the shapes it will be asked for.
Those trees are built in that cycle (seconds at 200,000 nodes, at the first cycle and each doubling); after it,
a decision on a running pod's shape costs a bounded search on a tree of its own CPU and memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from gpudefrag.batch.placer import BatchPlacer
from gpudefrag.batch.scheduler import BatchScheduler
from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.frag.typical import TypicalPods, typical_pods
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.gpu_workload import DEFAULT_WORKLOAD, gpu_workload_typical
from gpudefrag.k8s.topology_config import topology_from_nodes
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.pods import PodSpec, pod_batch
from gpudefrag.model.port import Scheduler, indexing
from gpudefrag.model.topology import Topology
from gpudefrag.policies.base import Policy
from gpudefrag.policies.registry import make_policy
from gpudefrag.policies.scheduler import PolicyScheduler

SOLVER = "solver"
SOLVER_BATCH_PODS = 16


class DecisionCore:
    def __init__(
        self,
        policy: str,
        topology_levels: list[str],
        typical: TypicalPods | None = None,
        solver: SolverConfig | None = None,
    ) -> None:
        """``solver``: the batch placer's settings when ``policy`` is ``solver`` (default
        :class:`~gpudefrag.batch.placer.SolverConfig`).  Its age bonuses count from each pod's
        creation time; lifetime ties never apply here, since the cycle shows no running pods."""
        self.policy_name = policy
        self.solver_config = solver if solver is not None else SolverConfig()
        self.topology_levels = list(topology_levels)
        self.fixed_typical = typical
        self.topology: Topology | None = None
        self._seen = 0
        self.policy: Policy
        self.scheduler: Scheduler
        self._build(typical if typical is not None else typical_pods(pod_batch([DEFAULT_WORKLOAD])))

    def _build(self, typical: TypicalPods) -> None:
        self.typical = typical
        old = getattr(self, "policy", None)
        if old is not None:  # its index (on the cache's decision view) is of no further use
            old.reset()
        if self.policy_name == SOLVER:
            placer = BatchPlacer(typical, self.solver_config)
            self.policy = placer.fgd  # one FGD and one index for the plans, candidates and owners
            self.scheduler = BatchScheduler(placer, SOLVER_BATCH_PODS, solver_batches=1)
        else:
            self.policy = make_policy(self.policy_name, typical)
            self.scheduler = PolicyScheduler(self.policy)
        self._warm_up()

    def _warm_up(self) -> None:
        """Decide a whole-GPU and a shared-GPU pod on a one-node state, so the compiled kernels
        are loaded before the first real pod waits for them."""
        one = ClusterState(
            ["warm-up"], np.zeros(1, np.int64), np.full(1, 8), np.full(1, 1000), np.full(1, 1024)
        )
        for spec in (PodSpec(100, 64, 1, 1000), PodSpec(100, 64, 1, 500)):
            self.policy.select(one, spec)

    def observe(self, cache: ClusterCache) -> None:
        """Recompute observed typical pods (unless fixed) and tell the policy the requests the
        cache holds, when the pods seen have doubled (module docstring)."""
        n = len(cache.pods)
        if self._seen and n < 2 * self._seen:
            return
        pods = [(rec.obj, rec.request) for rec in cache.pods.values() if rec.request is not None]
        if not pods:
            return
        self._seen = max(1, n)
        if self.fixed_typical is None:
            self._build(gpu_workload_typical(pods, cache.models.mask_of))
        indexed = indexing(self.scheduler)
        if indexed is not None:  # the trees go to the live view's index
            indexed.attach(cache.decision_view.state)
        self.expect_requests(req.spec.fit_key for _, req in pods)

    def expect_requests(self, requests: Iterable[tuple[int, ...]]) -> None:
        """Tell the policy these pods' requests (``fit_key``), most common first (module docstring)."""
        counts = Counter(requests)
        self.policy.expect(sorted(counts, key=lambda r: (-counts[r], r)))

    def nodes_changed(self, cache: ClusterCache) -> None:
        """Rebuild the topology from the nodes' labels."""
        if not self.topology_levels or not cache.order:
            self.topology = None
            return
        self.topology = topology_from_nodes([cache.nodes[n] for n in cache.order], self.topology_levels)
