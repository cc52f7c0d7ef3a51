"""What the defragmentation controller reads of running pods: checkpoints and who may move."""

from __future__ import annotations

from k8sobj import node, pod

from gpudefrag.k8s import names
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.port import CachePort
from gpudefrag.k8s.timefmt import from_rfc3339, to_rfc3339

START = from_rfc3339("2026-12-01T00:00:00Z")


def _running(**kw) -> dict:
    p = pod(kw.pop("name", "p"), gpus=1, node_name="a", gpu_index="0", phase="Running", **kw)
    p["status"]["startTime"] = to_rfc3339(START)
    return p


def _port(*pods, now_s=START + 1000):
    cache = ClusterCache()
    cache.replace_nodes([node("a")])
    cache.replace_pods(pods)
    return CachePort(cache, now_s)


def test_checkpoint_from_interval_and_from_annotation():
    # ran 1000 s with a 300 s interval: last checkpoint at 900 s of run time, 100 s at risk
    (r,) = _port(_running(annotations={names.CHECKPOINT_INTERVAL_S: "300"})).running
    assert (r.run_time_s, r.last_checkpoint_run_s, r.work_since_checkpoint_s) == (1000, 900, 100)
    # an explicit checkpoint 250 s after the start wins over the interval
    ann = {names.CHECKPOINT_INTERVAL_S: "300", names.LAST_CHECKPOINT: to_rfc3339(START + 250)}
    (r,) = _port(_running(annotations=ann)).running
    assert r.last_checkpoint_run_s == 250
    # no checkpoints: all 1000 s would be lost
    (r,) = _port(_running()).running
    assert r.work_since_checkpoint_s == 1000 and r.checkpoint_interval_s == 0


def test_who_may_be_disrupted():
    pods = [
        _running(name="ok"),
        _running(name="ownerless", owner=False),
        _running(name="pinned", annotations={names.DO_NOT_DISRUPT: "true"}),
        _running(name="gang", group="g"),
        _running(name="foreign", scheduler="default-scheduler"),
    ]
    got = {r.spec.name: r.do_not_disrupt for r in _port(*pods).running}
    assert got == {
        "default/ok": False,
        "default/ownerless": True,
        "default/pinned": True,
        "default/gang": True,
        "default/foreign": True,
    }
