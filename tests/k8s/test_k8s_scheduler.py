"""The scheduler against the fake API server: bad input, 409 on bind, partly bound gangs,
leader election."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from k8sobj import node, pod, pod_group

from gpudefrag.k8s.client import client_factory
from gpudefrag.k8s.leader import LeaderElector
from gpudefrag.k8s.scheduler import KubeScheduler, SchedulerConfig

pytestmark = pytest.mark.fake_only


def _create(store, kind, obj, ns="default"):
    obj = {
        **obj,
        "metadata": {k: v for k, v in obj["metadata"].items() if k not in ("uid", "creationTimestamp")},
    }
    return store.create(kind, None if kind == "nodes" else ns, obj)


def _wait(cond, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _scheduler(fake_api, **kw):
    config = SchedulerConfig(lease_namespace="default", lease_duration_s=3, **kw)
    sched = KubeScheduler(client_factory(fake_api.kubeconfig_path), config)
    thread = threading.Thread(target=sched.run, daemon=True)
    thread.start()
    return sched, thread


def _node_of(store, name):
    return store.get("pods", "default", name)["spec"].get("nodeName")


def test_malformed_annotation_gets_one_event_and_one_log_line(fake_api, caplog):
    store = fake_api.store
    _create(store, "nodes", node("a"))
    _create(store, "pods", pod("bad", annotations={"alibabacloud.com/gpu-milli": "half"}))
    _create(store, "pods", pod("good", gpus=1))
    with caplog.at_level(logging.WARNING, logger="gpudefrag.k8s"):
        sched, thread = _scheduler(fake_api)
        assert _wait(lambda: _node_of(store, "good") == "a")
        assert _wait(lambda: len(store.list("events", "default")[0]) == 1)
        time.sleep(0.5)  # later cycles must not report it again
        sched.stop.set()
        thread.join(5)
    (event,) = store.list("events", "default")[0]
    assert event["involvedObject"]["name"] == "bad" and event["type"] == "Warning"
    assert "alibabacloud.com/gpu-milli" in event["message"]
    lines = [r.getMessage() for r in caplog.records if "default/bad" in r.getMessage()]
    assert len(lines) == 1 and "gpu-milli" in lines[0]
    assert _node_of(store, "bad") is None


def test_bind_conflict_takes_what_the_api_says(fake_api):
    store = fake_api.store
    for n in ("a", "b"):
        _create(store, "nodes", node(n))
    sched = KubeScheduler(
        client_factory(fake_api.kubeconfig_path), SchedulerConfig(lease_namespace="default")
    )
    assert sched.elector.try_acquire()  # only a leader binds
    for obj in store.list("nodes")[0]:
        sched.cache.apply_node("ADDED", obj)
    created = _create(store, "pods", pod("p", gpus=8))
    rec = sched.cache.apply_pod("ADDED", created)
    from gpudefrag.model.cluster import Placement

    sched.cache.assume(rec.uid, Placement(0, tuple(range(8)), rec.request.spec))
    store.bind("default", "p", "b", {"alibabacloud.com/gpu-index": "0,1,2,3,4,5,6,7"})  # someone else won
    sched._bind(rec.uid, rec.key, "a", tuple(range(8)))
    sched._drain(timeout_s=1.0)
    assert sched.counters.bind_conflicts == 1
    # the pod counts on b (where the API says), not on a
    assert (
        sched.cache.state.gpu_milli_left[0].sum() == 8000 and sched.cache.state.gpu_milli_left[1].sum() == 0
    )


def test_partly_bound_gang_is_completed_after_a_restart(fake_api):
    store = fake_api.store
    for n in ("a", "b", "c"):
        _create(store, "nodes", node(n))
    _create(store, "podgroups", pod_group("g", 3))
    for i in range(3):
        _create(store, "pods", pod(f"g-{i}", gpus=8, group="g"))
    store.bind(
        "default", "g-0", "b", {"alibabacloud.com/gpu-index": "0,1,2,3,4,5,6,7"}
    )  # bound before a crash
    sched, thread = _scheduler(fake_api)
    assert _wait(lambda: all(_node_of(store, f"g-{i}") for i in range(3)))
    sched.stop.set()
    thread.join(5)
    assert sorted(_node_of(store, f"g-{i}") for i in range(3)) == ["a", "b", "c"]


def test_partly_bound_gang_that_cannot_complete_is_released(fake_api):
    store = fake_api.store
    _create(store, "nodes", node("a"))
    _create(store, "podgroups", pod_group("g", 2))
    for i in range(2):
        _create(store, "pods", pod(f"g-{i}", gpus=8, group="g"))
    store.bind("default", "g-0", "a", {"alibabacloud.com/gpu-index": "0,1,2,3,4,5,6,7"})
    sched, thread = _scheduler(fake_api, gang_timeout_s=0.5)
    # g-1 has no room anywhere: after the timeout the bound member is deleted (graceful)
    assert _wait(lambda: store.get("pods", "default", "g-0")["metadata"].get("deletionTimestamp") is not None)
    sched.stop.set()
    thread.join(5)
    assert sched.counters.gangs_released >= 1 and _node_of(store, "g-1") is None


def test_only_one_leader_and_takeover_after_expiry(fake_api):
    factory = client_factory(fake_api.kubeconfig_path)
    now = [1_000.0]
    a = LeaderElector(factory(), "lock", "default", "a", lease_duration_s=10, clock=lambda: now[0])
    b = LeaderElector(factory(), "lock", "default", "b", lease_duration_s=10, clock=lambda: now[0])
    assert a.try_acquire() and not b.try_acquire()
    now[0] += 5
    assert a.try_acquire() and not b.try_acquire()  # renewed
    now[0] += 11  # a stopped renewing: its lease expired
    assert not a.leading
    assert b.try_acquire() and b.leading
    assert not a.try_acquire()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["scheduler", "--kubeconfig", "{missing}"], "no such kubeconfig file"),
        (["scheduler", "--kubeconfig", "{bad}"], "not a usable kubeconfig"),
        (
            ["defrag", "--kubeconfig", "{bad}", "--headroom", "2"],
            "--headroom: must be a finite number >= 0 and < 1",
        ),
        (
            ["scheduler", "--kubeconfig", "{bad}", "--age-weight", "-1"],
            "--age-weight: must be a finite number >= 0",
        ),
        (
            ["scheduler", "--kubeconfig", "{bad}", "--age-max-gpus", "-2"],
            "--age-max-gpus: must be an integer in 0..8",
        ),
        (["scheduler", "--kubeconfig", "{bad}", "--whole-gpu-above", "1000"], "must be an integer in 0..999"),
    ],
)
def test_bad_command_lines_exit_2_with_one_line(tmp_path, capsys, argv, expected):
    from gpudefrag.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [\n")
    paths = {"missing": tmp_path / "none.yaml", "bad": bad}
    try:
        code = main([a.format(**paths) for a in argv])
    except SystemExit as e:  # a usage error, from argparse
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err


def test_a_scheduler_that_lost_its_lease_binds_nothing(fake_api):
    store = fake_api.store
    _create(store, "nodes", node("a"))
    sched = KubeScheduler(
        client_factory(fake_api.kubeconfig_path), SchedulerConfig(lease_namespace="default")
    )
    for obj in store.list("nodes")[0]:
        sched.cache.apply_node("ADDED", obj)
    rec = sched.cache.apply_pod("ADDED", _create(store, "pods", pod("p", gpus=8)))
    from gpudefrag.model.cluster import Placement

    sched.cache.assume(rec.uid, Placement(0, tuple(range(8)), rec.request.spec))
    sched._bind(rec.uid, rec.key, "a", tuple(range(8)))  # never acquired (or lost) the Lease
    sched._drain(timeout_s=1.0)
    assert _node_of(store, "p") is None and [r["verb"] for r in store.audit if r["verb"] == "bind"] == []
    assert [r.key for r in sched.cache.pending()] == ["default/p"]  # forgotten, schedulable again


def test_a_whole_gang_with_a_spare_member_is_not_released(fake_api):
    store = fake_api.store
    for n in ("a", "b"):
        _create(store, "nodes", node(n))
    _create(store, "podgroups", pod_group("g", 2))
    for i in range(3):  # minMember 2, a third member that has no room
        _create(store, "pods", pod(f"g-{i}", gpus=8, group="g"))
    store.bind("default", "g-0", "a", {"alibabacloud.com/gpu-index": "0,1,2,3,4,5,6,7"})
    store.bind("default", "g-1", "b", {"alibabacloud.com/gpu-index": "0,1,2,3,4,5,6,7"})
    sched, thread = _scheduler(fake_api, gang_timeout_s=0.2)
    time.sleep(1.5)
    sched.stop.set()
    thread.join(5)
    assert sched.counters.gangs_released == 0
    assert all(
        store.get("pods", "default", f"g-{i}")["metadata"].get("deletionTimestamp") is None for i in range(2)
    )
