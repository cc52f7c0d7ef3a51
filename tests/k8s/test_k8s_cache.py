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
