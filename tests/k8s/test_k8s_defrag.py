"""The defragmentation controller against the fake cluster: plan written before the first
eviction, continued (not repeated) after a restart, released when its pod binds; dry run; PDBs."""

from __future__ import annotations

import json

import pytest

from gpudefrag.k8s import names
from gpudefrag.k8s.client import client_factory
from gpudefrag.k8s.defrag import DefragConfig, DefragReconciler
from gpudefrag_fakecluster.cluster import FakeCluster
from gpudefrag_fakecluster.workloads import WorkItem, make_nodes

pytestmark = pytest.mark.fake_only

EIGHT = "0,1,2,3,4,5,6,7"


def _fragmented(fc: FakeCluster, pdb: int = 0) -> None:
    """Two 8-GPU nodes, a 4-GPU pod on each (a on node-0000, b on node-0001), then an 8-GPU pod
    that fits nowhere although 8 GPUs are free: moving a or b frees a whole node."""
    make_nodes(fc.store, 2)
    fc.jobs.submit(WorkItem(0, "a", gpus=4, run_s=36000, checkpoint_interval_s=60, pdb_min_available=pdb))
    fc.jobs.submit(WorkItem(0, "b", gpus=4, run_s=36000, checkpoint_interval_s=60, pdb_min_available=pdb))
    fc.store.bind("default", "a-0", "node-0000", {names.ALIBABA_GPU_INDEX: "0,1,2,3"})
    fc.store.bind("default", "b-0", "node-0001", {names.ALIBABA_GPU_INDEX: "0,1,2,3"})
    assert fc.wait(lambda: all(p["status"].get("phase") == "Running" for p in fc.pods()), 10)
    fc.jobs.submit(WorkItem(0, "big", gpus=8, run_s=600))


def _reconciler(fc: FakeCluster, **kw) -> DefragReconciler:
    # two nodes: the headroom gate (5 % of the GPUs left free) would forbid every plan here
    config = DefragConfig(lease_namespace="default", headroom_fraction=0.0, **kw)
    return DefragReconciler(client_factory(fc.kubeconfig)(), config, clock=fc.clock.now_s)


def _evictions(fc: FakeCluster) -> list[str]:
    return [r["name"] for r in fc.store.audit if r["verb"] == "evict"]


def _reserved(fc: FakeCluster) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"].get("annotations", {}).get(names.RESERVED_FOR)
        for n in fc.store.list("nodes")[0]
        if n["metadata"].get("annotations", {}).get(names.RESERVED_FOR)
    }


def test_plan_written_then_continued_not_repeated_then_released():
    with FakeCluster(scale=10.0, heartbeat_s=600.0) as fc:
        _fragmented(fc)
        (plan,) = _reconciler(fc).reconcile()
        assert plan["pod"] == "default/big-0" and len(plan["victims"]) == 1
        node = plan["node"]
        assert _reserved(fc) == {node: "default/big-0"}
        stored = json.loads(fc.store.get("nodes", None, node)["metadata"]["annotations"][names.PLAN])
        assert stored["victims"] == plan["victims"]
        assert len(_evictions(fc)) == 1
        # a restarted controller (a new instance) continues: no new plan, no second eviction
        assert _reconciler(fc).reconcile() == []
        assert len(_evictions(fc)) == 1
        # the blocked pod binds on the freed node: the reservation ends
        assert fc.wait(lambda: not any(p["metadata"]["uid"] in plan["victims"] for p in fc.pods()), 45)
        fc.store.bind("default", "big-0", node, {names.ALIBABA_GPU_INDEX: EIGHT})
        _reconciler(fc).reconcile()
        assert _reserved(fc) == {}
        assert fc.auditor.report().ok


def test_dry_run_changes_nothing():
    with FakeCluster(scale=10.0, heartbeat_s=600.0) as fc:
        _fragmented(fc)
        before = fc.store.resource_version
        rec = _reconciler(fc, dry_run=True)
        (plan,) = rec.reconcile()
        assert rec.counters.printed == [plan] and plan["moves"][0]["pod"] in ("default/a-0", "default/b-0")
        assert fc.store.resource_version == before and _evictions(fc) == []


def test_pdb_refusal_backs_off_and_never_forces():
    with FakeCluster(scale=10.0, heartbeat_s=600.0) as fc:
        # each of a and b is its PDB's only pod: minAvailable 1 forbids evicting it
        _fragmented(fc, pdb=1)
        rec = _reconciler(fc)
        assert len(rec.reconcile()) == 1
        assert rec.counters.refused_429 == 1 and rec.counters.evictions == 0
        rec.reconcile()  # within the back-off: not tried again
        assert rec.counters.refused_429 == 1
        assert all(p["metadata"].get("deletionTimestamp") is None for p in fc.pods())
        assert fc.auditor.report().forbidden_evictions == []


def test_a_plan_naming_a_pod_that_may_not_move_is_not_carried_out():
    # a plan annotation (as if written by an older controller, or by hand) lists an ownerless pod
    # and a do-not-disrupt pod: the controller's last check refuses both
    with FakeCluster(scale=10.0, heartbeat_s=600.0) as fc:
        make_nodes(fc.store, 1)
        from k8sobj import pod

        uids = []
        for name, owner, ann in (("orphan", False, {}), ("pinned", True, {names.DO_NOT_DISRUPT: "true"})):
            body = pod(name, gpus=1, owner=owner, annotations=ann)
            body["metadata"] = {
                k: v for k, v in body["metadata"].items() if k not in ("uid", "creationTimestamp")
            }
            uids.append(fc.store.create("pods", "default", body)["metadata"]["uid"])
            fc.store.bind("default", name, "node-0000", {names.ALIBABA_GPU_INDEX: str(len(uids) - 1)})
        waiting = pod("waiting", gpus=8)
        waiting["metadata"] = {
            k: v for k, v in waiting["metadata"].items() if k not in ("uid", "creationTimestamp")
        }
        fc.store.create("pods", "default", waiting)
        plan = {"pod": "default/waiting", "node": "node-0000", "victims": uids, "moves": []}
        from gpudefrag.k8s.timefmt import to_rfc3339

        annotations = {
            names.RESERVED_FOR: "default/waiting",
            names.RESERVED_UNTIL: to_rfc3339(fc.clock.now_s() + 600),
            names.PLAN: json.dumps(plan),
        }
        fc.store.patch("nodes", None, "node-0000", {"metadata": {"annotations": annotations}})
        assert fc.wait(
            lambda: all(
                p["status"].get("phase") == "Running" for p in fc.pods() if p["spec"].get("nodeName")
            ),
            10,
        )
        _reconciler(fc).reconcile()
        assert _evictions(fc) == []
