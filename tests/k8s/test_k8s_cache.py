"""The scheduler's cache: what counts on a node, assumptions, pending order."""

from __future__ import annotations

import copy

from k8sobj import node, pod

from gpudefrag.k8s.cache import ClusterCache


def _cache(*nodes: dict) -> ClusterCache:
    c = ClusterCache()
    c.replace_nodes(nodes)
    return c


def _free_gpu_milli(c: ClusterCache, name: str) -> list[int]:
    return c.state.gpu_milli_left[c.index[name], :8].tolist()


def test_bound_pod_counts_on_its_gpu_index_and_leaves_when_finished():
    c = _cache(node("a"), node("b"))
    p = pod("p", gpus=2, node_name="b", gpu_index="3,5", phase="Running")
    c.apply_pod("ADDED", p)
    # GPUs 3 and 5 of node b are taken, nothing else
    assert _free_gpu_milli(c, "b") == [1000, 1000, 1000, 0, 1000, 0, 1000, 1000]
    assert _free_gpu_milli(c, "a") == [1000] * 8
    done = copy.deepcopy(p)
    done["status"]["phase"] = "Succeeded"
    c.apply_pod("MODIFIED", done)
    assert _free_gpu_milli(c, "b") == [1000] * 8


def test_terminating_pod_counts_until_deleted():
    c = _cache(node("a"))
    p = pod("p", milli=500, node_name="a", gpu_index="0", phase="Running")
    c.apply_pod("ADDED", p)
    p2 = copy.deepcopy(p)
    p2["metadata"]["deletionTimestamp"] = "2026-12-01T00:01:00Z"
    c.apply_pod("MODIFIED", p2)
    assert _free_gpu_milli(c, "a")[0] == 500
    c.apply_pod("DELETED", p2)
    assert _free_gpu_milli(c, "a")[0] == 1000


def test_bound_without_index_takes_lowest_free_gpus():
    c = _cache(node("a", gpus=4))
    c.apply_pod("ADDED", pod("x", gpus=1, node_name="a", gpu_index="0", phase="Running"))
    c.apply_pod("ADDED", pod("y", gpus=2, node_name="a", scheduler="default-scheduler", phase="Running"))
    # x holds GPU 0; y (no annotation) gets the lowest free: 1 and 2
    assert c.state.gpu_milli_left[0, :4].tolist() == [0, 0, 0, 1000]


def test_assume_then_confirm_then_forget_is_noop_after_confirm():
    c = _cache(node("a"), node("b"))
    p = pod("p", gpus=1)
    rec = c.apply_pod("ADDED", p)
    assert [r.key for r in c.pending()] == ["default/p"]
    from gpudefrag.model.cluster import Placement

    c.assume(rec.uid, Placement(1, (4,), rec.request.spec))
    assert c.pending() == []
    assert _free_gpu_milli(c, "b")[4] == 0
    bound = copy.deepcopy(p)
    bound["spec"]["nodeName"] = "b"
    bound["metadata"]["annotations"]["alibabacloud.com/gpu-index"] = "4"
    c.apply_pod("MODIFIED", bound)
    c.forget(rec.uid)  # a late failure report must not undo what the API shows
    assert _free_gpu_milli(c, "b")[4] == 0


def test_forget_after_failed_bind_restores_state_and_pending():
    c = _cache(node("a"))
    rec = c.apply_pod("ADDED", pod("p", gpus=8))
    before = c.state.snapshot()
    from gpudefrag.model.cluster import Placement

    c.assume(rec.uid, Placement(0, tuple(range(8)), rec.request.spec))
    c.forget(rec.uid)
    assert c.state.snapshot() == before
    assert [r.key for r in c.pending()] == ["default/p"]


def test_pending_order_and_exclusions():
    c = _cache(node("a"))
    c.apply_pod("ADDED", pod("late", gpus=1, created="2026-12-01T00:00:05Z"))
    c.apply_pod("ADDED", pod("early", gpus=1, created="2026-12-01T00:00:01Z"))
    c.apply_pod("ADDED", pod("urgent", gpus=1, created="2026-12-01T00:00:09Z", priority=10))
    c.apply_pod("ADDED", pod("other", gpus=1, scheduler="default-scheduler"))
    gated = pod("gated", gpus=1)
    gated["spec"]["schedulingGates"] = [{"name": "wait"}]
    c.apply_pod("ADDED", gated)
    deleting = pod("deleting", gpus=1)
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T00:01:00Z"
    c.apply_pod("ADDED", deleting)
    c.apply_pod("ADDED", pod("bad", annotations={"alibabacloud.com/gpu-milli": "lots"}))
    assert [r.key for r in c.pending()] == ["default/urgent", "default/early", "default/late"]
    assert "alibabacloud.com/gpu-milli" in c.invalid["default/bad"]


def test_relist_drops_vanished_pods_and_node_change_recounts():
    c = _cache(node("a"), node("b"))
    p = pod("p", gpus=8, node_name="b", gpu_index="0,1,2,3,4,5,6,7", phase="Running")
    c.replace_pods([p, pod("q", gpus=1)])
    assert sum(_free_gpu_milli(c, "b")) == 0
    c.apply_node("ADDED", node("c"))  # rebuild keeps b's pod counted on b
    assert sum(_free_gpu_milli(c, "b")) == 0 and c.order == ["a", "b", "c"]
    c.replace_pods([pod("q", gpus=1, uid=c.by_key["default/q"])])
    assert sum(_free_gpu_milli(c, "b")) == 8000
    assert list(c.by_key) == ["default/q"]


def test_an_assumed_pod_keeps_its_room_when_the_node_list_changes():
    c = _cache(node("a"), node("b"))
    rec = c.apply_pod("ADDED", pod("p", gpus=8))
    from gpudefrag.model.cluster import Placement

    c.assume(rec.uid, Placement(1, tuple(range(8)), rec.request.spec))  # its bind is in flight
    c.apply_node("ADDED", node("0-first"))  # sorts first: every node index shifts by one
    assert c.order == ["0-first", "a", "b"]
    assert sum(_free_gpu_milli(c, "b")) == 0 and rec.assumed and rec.counted_on == "b"
    c.replace_nodes([node("a")])  # its node is gone: the assumption is dropped, the pod pending again
    assert not rec.assumed and [r.key for r in c.pending()] == ["default/p"]


def test_the_sets_a_cycle_reads_stay_what_a_full_pass_over_the_cache_finds():
    """Pending pods, unusable nodes and reservations are kept per event; after a random run of
    node and pod events, assumptions and failed binds, each equals the full pass."""
    import random

    from gpudefrag.k8s import names
    from gpudefrag.k8s.records import Reservation
    from gpudefrag.k8s.timefmt import from_rfc3339
    from gpudefrag.model.cluster import Placement

    rng = random.Random(5)
    node_names = [f"n{i}" for i in range(6)]
    c = _cache(*(node(n) for n in node_names))
    pods: dict[str, dict] = {}
    for step in range(400):
        op = rng.random()
        if op < 0.15:  # a node turns NotReady / cordoned / reserved, or back
            obj = node(rng.choice(node_names))
            if rng.random() < 0.3:
                obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            if rng.random() < 0.3:
                obj["spec"]["unschedulable"] = True
            if rng.random() < 0.4:
                obj["metadata"]["annotations"] = {
                    names.RESERVED_FOR: f"default/p{rng.randrange(20)}",
                    names.RESERVED_UNTIL: rng.choice(["2026-12-01T00:10:00Z", "not-a-time"]),
                }
            c.apply_node("MODIFIED", obj)
        elif op < 0.5:  # a pod arrives or changes: pending, gated, bound, finished, someone else's
            name = f"p{rng.randrange(20)}"
            old = pods.get(name)
            obj = pod(name, gpus=rng.choice([0, 1, 2]), uid=old["metadata"]["uid"] if old else None)
            kind = rng.random()
            if kind < 0.2:
                obj["spec"]["nodeName"] = rng.choice(node_names)
                obj["status"]["phase"] = "Running"
            elif kind < 0.3:
                obj["spec"]["schedulingGates"] = [{"name": "g"}]
            elif kind < 0.4:
                obj["status"]["phase"] = "Succeeded"
            elif kind < 0.5:
                obj["spec"]["schedulerName"] = "default-scheduler"
            elif kind < 0.55:
                obj["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
            pods[name] = obj
            c.apply_pod("MODIFIED" if old else "ADDED", obj)
        elif op < 0.62 and pods:  # a pod is deleted
            name = rng.choice(sorted(pods))
            c.apply_pod("DELETED", pods.pop(name))
        elif op < 0.85:  # the scheduler assumes a pending pod where it fits
            waiting = c.pending()
            if waiting:
                rec = rng.choice(waiting)
                for i in range(len(c.order)):
                    gpus = tuple(range(rec.request.spec.num_gpu))
                    if c.state.why_not_fits(i, rec.request.spec, gpus) is None:
                        c.assume(rec.uid, Placement(i, gpus, rec.request.spec))
                        break
        else:  # a bind fails
            assumed = [r for r in c.pods.values() if r.assumed]
            if assumed:
                c.forget(rng.choice(assumed).uid)
        full = sorted(
            (
                r
                for r in c.pods.values()
                if r.ours
                and r.request is not None
                and r.node is None
                and not r.assumed
                and not r.deleting
                and not r.gated
                and r.phase == "Pending"
            ),
            key=lambda r: (-r.request.priority, r.request.created_s, r.key),
        )
        assert [r.uid for r in c.pending()] == [r.uid for r in full], step
        assert c.unusable_nodes() == [i for i, n in enumerate(c.order) if not c.nodes[n].usable], step
        want = []
        for n in c.order:
            ann = c.nodes[n].annotations
            if ann.get(names.RESERVED_FOR):
                try:
                    until = from_rfc3339(ann.get(names.RESERVED_UNTIL, ""))
                except ValueError:
                    until = 0.0
                want.append(Reservation(n, ann[names.RESERVED_FOR], until, ann.get(names.PLAN, "")))
        assert c.all_reservations() == want, step


def test_excluded_nodes_follow_taint_and_label_changes_node_by_node(monkeypatch):
    """What each set of pod terms rules out is kept and updated per changed node; after every
    node event it equals a pass over every node, also across a rebuild and a dropped node log."""
    import random

    from gpudefrag.k8s import node_sets
    from gpudefrag.k8s.affinity import selects
    from gpudefrag.k8s.taints import tolerates_all

    monkeypatch.setattr(node_sets, "MIN_NODE_LOG", 8)
    rng = random.Random(9)
    node_names = [f"n{i}" for i in range(7)]
    c = _cache(*(node(n) for n in node_names))
    taint = {"key": "gpu", "value": "yes", "effect": "NoSchedule"}
    probes = [pod("plain"), pod("tolerant"), pod("picky"), pod("both")]
    probes[1]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    probes[2]["spec"]["nodeSelector"] = {"zone": "a"}
    probes[3]["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    probes[3]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    recs = [c.apply_pod("ADDED", p) for p in probes]
    for step in range(150):
        name = rng.choice(node_names)
        labels = {"zone": rng.choice("ab")} if rng.random() < 0.7 else {}
        obj = node(name, **labels)
        if rng.random() < 0.5:
            obj["spec"]["taints"] = [dict(taint)]
        if rng.random() < 0.05:  # a new node: indices change, everything is found again
            obj = node(f"m{step}", **labels)
            node_names.append(obj["metadata"]["name"])
        c.apply_node("MODIFIED", obj)
        for rec in recs:
            spec = rec.obj["spec"]
            want = [
                i
                for i, n in enumerate(c.order)
                if (c.nodes[n].taints and not tolerates_all(spec.get("tolerations") or [], c.nodes[n].taints))
                or not selects(spec, c.nodes[n].labels)
            ]
            assert c.excluded_for(rec).tolist() == want, (step, rec.key)
