"""The fake kubelet on the in-process fake store: quantities, admission, pod lifecycle, graceful
deletion, node leases; and the scaled clock it runs on."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from fakes_helpers import SCALE, wait_for

from gpudefrag.k8s import names
from gpudefrag_fakecluster.clock import ScaledClock, from_rfc3339, to_rfc3339
from gpudefrag_fakecluster.kubelet import (
    LEASE_NAMESPACE,
    FakeKubelet,
    NodeCapacity,
    PodUsage,
    overcommit,
    parse_quantity,
    pod_usage,
)
from gpudefrag_fakecluster.store import ApiError, Store
from gpudefrag_fakecluster.workloads import WorkItem, make_nodes, pod_manifest


@pytest.fixture
def cluster() -> Iterator[tuple[Store, ScaledClock, FakeKubelet]]:
    clock = ScaledClock(scale=SCALE, start_s=1_700_000_000.0)
    store = Store(clock=clock.now_s)
    make_nodes(store, 2, gpus_per_node=2, cpu_milli=8000, memory_mib=16384)
    kubelet = FakeKubelet(store, clock, heartbeat_s=10.0)
    kubelet.start()
    yield store, clock, kubelet
    kubelet.stop()
    store.close()


def phase(store: Store, name: str) -> str | None:
    try:
        return str(store.get("pods", "default", name)["status"].get("phase"))
    except ApiError:
        return None


def gone(store: Store, name: str) -> bool:
    try:
        store.get("pods", "default", name)
    except ApiError as e:
        return e.code == 404
    return False


def audit_time(store: Store, name: str, verb: str) -> float:
    """Simulated time of the first audited ``verb`` on pod ``name``."""
    return next(r["t"] for r in store.audit if r["name"] == name and r["verb"] == verb)


# ---- quantities, timestamps, the clock ------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", 0.5),
        ("2", 2.0),
        ("1.5", 1.5),
        ("4Gi", 4 * 2**30),
        ("512Mi", 512 * 2**20),
        ("1G", 1e9),
        ("1000k", 1e6),
        ("123456789", 123456789.0),
        ("1e3", 1000.0),
        ("100Ki", 102400.0),
        ("250u", 250e-6),
        (3, 3.0),
    ],
)
def test_parse_quantity(text: str | int, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "abc", "1.5Xi", "Mi", "1 Gi"])
def test_parse_quantity_rejects_garbage(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_rfc3339_round_trip() -> None:
    assert to_rfc3339(1_700_000_000.0) == "2023-11-14T22:13:20Z"
    assert to_rfc3339(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"
    assert to_rfc3339(1_700_000_000.25, micros=False) == "2023-11-14T22:13:20Z"
    assert to_rfc3339(1_700_000_000.0, micros=True) == "2023-11-14T22:13:20.000000Z"
    assert from_rfc3339("2023-11-14T22:13:20Z") == 1_700_000_000.0
    assert from_rfc3339("2023-11-14T22:13:20.25Z") == pytest.approx(1_700_000_000.25)
    assert from_rfc3339("2023-11-14T23:13:20+01:00") == 1_700_000_000.0
    with pytest.raises(ValueError):
        from_rfc3339("2023-11-14 22:13")


def test_scaled_clock_sleeps_in_simulated_time() -> None:
    clock = ScaledClock(scale=SCALE, start_s=100.0)
    assert clock.wall_delay(500.0) == pytest.approx(0.5)
    assert clock.wall_delay(-1.0) == 0.0
    stop = threading.Event()
    assert clock.sleep_until(clock.now_s() + 50.0, stop)
    assert clock.now_s() >= 150.0
    stop.set()
    assert not clock.sleep_until(clock.now_s() + 1e9, stop)


# ---- resource accounting ----------------------------------------------------------------------
def test_pod_usage_reads_requests_gpus_and_indices() -> None:
    whole = pod_manifest(WorkItem(0, "w", cpu_milli=1500, memory_mib=512, gpus=2), 0)
    assert pod_usage(whole) == PodUsage(1500, 512 * 2**20, (), unindexed_gpus=2)
    whole["metadata"]["annotations"][names.ALIBABA_GPU_INDEX] = "0,1"
    assert pod_usage(whole).gpu_milli_by_index == ((0, 1000), (1, 1000))
    share = pod_manifest(WorkItem(0, "s", gpus=1, gpu_milli=300), 0)
    assert pod_usage(share).unindexed_gpu_milli == 300
    share["metadata"]["annotations"][names.ALIBABA_GPU_INDEX] = "1"
    assert pod_usage(share).gpu_milli_by_index == ((1, 300),)
    kai = {"metadata": {"annotations": {names.KAI_GPU_FRACTION: "0.25", names.ALIBABA_GPU_INDEX: "0"}}}
    assert pod_usage(kai).gpu_milli_by_index == ((0, 250),)


def test_overcommit_rules() -> None:
    node = NodeCapacity(cpu_milli=4000, memory_bytes=2**30, gpus=2)
    on = lambda i, m: PodUsage(gpu_milli_by_index=((i, m),))  # noqa: E731
    assert overcommit(node, [on(0, 600), on(1, 600), on(1, 400)]) == {}
    assert overcommit(node, [on(0, 600), on(0, 500)]) == {names.NVIDIA_GPU: pytest.approx(0.1)}
    assert overcommit(node, [on(2, 100)]) == {names.NVIDIA_GPU: pytest.approx(0.1)}  # no GPU 2
    # one untouched GPU left: a pod asking for two unindexed whole GPUs does not fit
    assert names.NVIDIA_GPU in overcommit(node, [on(0, 100), PodUsage(unindexed_gpus=2)])
    assert overcommit(node, [PodUsage(cpu_milli=3000), PodUsage(cpu_milli=1500)]) == {"cpu": 0.5}
    assert "memory" in overcommit(node, [PodUsage(memory_bytes=2**30 + 1)])


# ---- the kubelet on a store -------------------------------------------------------------------
def test_bound_pod_runs_then_succeeds(cluster: tuple[Store, ScaledClock, FakeKubelet]) -> None:
    store, _, kubelet = cluster
    store.create("pods", "default", pod_manifest(WorkItem(0, "job", gpus=1, run_s=300.0), 0))
    time.sleep(0.02)
    assert phase(store, "job-0") == "Pending"  # not bound: the kubelet leaves it alone
    store.bind("default", "job-0", "node-0000", {names.ALIBABA_GPU_INDEX: "1"})
    wait_for(lambda: phase(store, "job-0") == "Running")
    pod = store.get("pods", "default", "job-0")
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert pod["status"]["containerStatuses"][0]["state"]["running"]
    started_s = from_rfc3339(pod["status"]["startTime"])
    wait_for(lambda: phase(store, "job-0") == "Succeeded")
    pod = store.get("pods", "default", "job-0")
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "False"
    finished_s = from_rfc3339(pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
    assert 300.0 <= finished_s - started_s < 300.0 + 100.0  # run time counted in simulated seconds
    assert kubelet.rejected == []
    assert kubelet.max_overcommit == {}


def test_running_pod_writes_its_checkpoints(cluster: tuple[Store, ScaledClock, FakeKubelet]) -> None:
    store, _, _ = cluster
    item = WorkItem(0, "ck", gpus=1, run_s=350.0, checkpoint_interval_s=100.0)
    store.create("pods", "default", pod_manifest(item, 0))
    store.bind("default", "ck-0", "node-0001")
    wait_for(lambda: phase(store, "ck-0") == "Succeeded")
    pod = store.get("pods", "default", "ck-0")
    started_s = from_rfc3339(pod["status"]["startTime"])
    # checkpoints at start + 100, 200, 300 s; the last one written is the 300 s one
    assert from_rfc3339(pod["metadata"]["annotations"][names.LAST_CHECKPOINT]) == pytest.approx(
        started_s + 300.0
    )
    writes = [r for r in store.audit if r["name"] == "ck-0" and r["verb"] == "patch"]
    assert len(writes) == 3


def test_overcommitted_pod_is_rejected(cluster: tuple[Store, ScaledClock, FakeKubelet]) -> None:
    store, _, kubelet = cluster
    big = WorkItem(0, "big", gpus=2)
    store.create("pods", "default", pod_manifest(big, 0))
    store.bind("default", "big-0", "node-0000")
    wait_for(lambda: phase(store, "big-0") == "Running")
    store.create("pods", "default", pod_manifest(WorkItem(0, "one", gpus=1), 0))
    store.bind("default", "one-0", "node-0000")
    wait_for(lambda: phase(store, "one-0") == "Failed")
    assert store.get("pods", "default", "one-0")["status"]["reason"] == "OutOfgpu"
    assert kubelet.rejected == [("default", "one-0", "OutOfgpu")]
    # fractional shares: 600 + 600 milli on GPU 0 do not fit, on GPUs 0 and 1 they do
    for name, index in (("a", "0"), ("b", "0"), ("c", "1")):
        store.create("pods", "default", pod_manifest(WorkItem(0, name, gpus=1, gpu_milli=600), 0))
        store.bind("default", f"{name}-0", "node-0001", {names.ALIBABA_GPU_INDEX: index})
    wait_for(lambda: phase(store, "c-0") == "Running" and phase(store, "b-0") == "Failed")
    assert phase(store, "a-0") == "Running"
    assert kubelet.rejected[-1] == ("default", "b-0", "OutOfgpu")
    cpu_hog = pod_manifest(WorkItem(0, "hog", cpu_milli=9000), 0)
    store.create("pods", "default", cpu_hog)
    store.bind("default", "hog-0", "node-0001")
    wait_for(lambda: phase(store, "hog-0") == "Failed")
    assert kubelet.rejected[-1] == ("default", "hog-0", "OutOfcpu")
    assert kubelet.max_overcommit == {}


def test_graceful_deletion_waits_for_the_grace(cluster: tuple[Store, ScaledClock, FakeKubelet]) -> None:
    store, _, _ = cluster
    store.create("pods", "default", pod_manifest(WorkItem(0, "svc", gpus=2, run_s=1e9), 0))
    store.bind("default", "svc-0", "node-0000")
    wait_for(lambda: phase(store, "svc-0") == "Running")
    store.delete("pods", "default", "svc-0", grace_period_s=200)
    asked_s = audit_time(store, "svc-0", "delete-request")
    assert store.get("pods", "default", "svc-0")["metadata"]["deletionTimestamp"]
    wait_for(lambda: gone(store, "svc-0"))
    removed_s = audit_time(store, "svc-0", "delete")
    # the deletionTimestamp is written in whole seconds: up to one second early
    assert 199.0 <= removed_s - asked_s < 200.0 + 100.0
    # the GPUs were held until then and are free again now
    store.create("pods", "default", pod_manifest(WorkItem(0, "next", gpus=2), 0))
    store.bind("default", "next-0", "node-0000")
    wait_for(lambda: phase(store, "next-0") == "Running")


def test_deleting_a_pod_that_is_not_running_removes_it_at_once() -> None:
    clock = ScaledClock(scale=SCALE)
    store = Store(clock=clock.now_s)
    make_nodes(store, 1)
    kubelet = FakeKubelet(store, clock, start_delay_s=1e6)  # admitted pods never start
    kubelet.start()
    try:
        store.create("pods", "default", pod_manifest(WorkItem(0, "slow", gpus=1), 0))
        store.bind("default", "slow-0", "node-0000")
        time.sleep(0.02)
        store.delete("pods", "default", "slow-0", grace_period_s=10_000)
        wait_for(lambda: gone(store, "slow-0"), timeout_wall_s=2.0)  # long before the grace ends
    finally:
        kubelet.stop()
        store.close()


def test_node_leases_renewed_and_fail_node(cluster: tuple[Store, ScaledClock, FakeKubelet]) -> None:
    store, clock, kubelet = cluster

    def renewed(node: str) -> float:
        return from_rfc3339(store.get("leases", LEASE_NAMESPACE, node)["spec"]["renewTime"])

    def ready(node: str) -> str:
        conditions = store.get("nodes", None, node)["status"]["conditions"]
        return str(next(c["status"] for c in conditions if c["type"] == "Ready"))

    first = wait_for(lambda: renewed("node-0001") if _exists(store, "node-0001") else None)
    lease = store.get("leases", LEASE_NAMESPACE, "node-0001")["spec"]
    assert lease["holderIdentity"] == "node-0001"
    assert lease["leaseDurationSeconds"] == 40
    wait_for(lambda: renewed("node-0001") >= first + 30.0)  # renewed every 10 simulated seconds
    kubelet.fail_node("node-0001")
    assert ready("node-0001") == "False"
    stopped = renewed("node-0001")
    time.sleep(0.1)  # 100 simulated seconds: ten missed heartbeats
    assert renewed("node-0001") == stopped
    assert renewed("node-0000") > stopped + 50.0
    assert ready("node-0000") == "True"
    kubelet.recover_node("node-0001")
    assert ready("node-0001") == "True"
    assert clock.now_s() > stopped


def _exists(store: Store, node: str) -> bool:
    try:
        store.get("leases", LEASE_NAMESPACE, node)
    except ApiError:
        return False
    return True
