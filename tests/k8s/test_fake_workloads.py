"""Work items, their manifests, the fake Job controller (restarts from checkpoints, whole-gang
restarts) and the replayer, on the in-process fake store with the fake kubelet.  No scheduler
runs here: a test binder binds every unbound pod to one node."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fakes_helpers import SCALE, wait_for

from gpudefrag.k8s import names
from gpudefrag_fakecluster.clock import ScaledClock, from_rfc3339
from gpudefrag_fakecluster.kubelet import FakeKubelet
from gpudefrag_fakecluster.store import ApiError, Store
from gpudefrag_fakecluster.workloads import (
    RESTARTS,
    JobController,
    Replayer,
    WorkItem,
    make_nodes,
    owner_uid,
    pdb_manifest,
    pod_manifest,
    podgroup_manifest,
)


class Binder:
    """Binds every unbound, live pod to ``node`` (a stand-in for the scheduler)."""

    def __init__(self, store: Store, node: str) -> None:
        self.store, self.node = store, node
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            for pod in self.store.list("pods")[0]:
                meta = pod["metadata"]
                if not pod["spec"].get("nodeName") and not meta.get("deletionTimestamp"):
                    with contextlib.suppress(ApiError):
                        self.store.bind(meta["namespace"], meta["name"], self.node)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def env() -> Iterator[tuple[Store, ScaledClock, JobController]]:
    clock = ScaledClock(scale=SCALE, start_s=1_700_000_000.0)
    store = Store(clock=clock.now_s)
    make_nodes(store, 1, gpus_per_node=4)
    kubelet = FakeKubelet(store, clock)
    controller = JobController(store, clock)
    kubelet.start()
    controller.start()
    binder = Binder(store, "node-0000")
    yield store, clock, controller
    binder.stop()
    controller.stop()
    kubelet.stop()
    store.close()


def pods_of(store: Store, app: str) -> list[dict[str, Any]]:
    return store.list("pods", "default", label_selector=f"app={app}")[0]


def running(store: Store, app: str, restarts: int, count: int) -> list[dict[str, Any]]:
    """The app's pods of restart ``restarts`` when ``count`` of them are Running, else []."""
    pods = [p for p in pods_of(store, app) if p["metadata"]["annotations"][RESTARTS] == str(restarts)]
    live = [p for p in pods if p["status"].get("phase") == "Running"]
    return live if len(live) == count else []


# ---- manifests ----------------------------------------------------------------------------
def test_pod_manifest_fields() -> None:
    item = WorkItem(
        0, "tr", namespace="ml", pods=2, cpu_milli=4000, memory_mib=2048, gpus=2, gpu_model="A100",
        run_s=1800, checkpoint_interval_s=600, priority=5, constraint="required:gpudefrag.io/leaf",
    )  # fmt: skip
    pod = pod_manifest(item, 1)
    meta, spec = pod["metadata"], pod["spec"]
    assert (meta["name"], meta["namespace"]) == ("tr-1", "ml")
    assert meta["labels"] == {"app": "tr", names.POD_GROUP_LABEL: "tr"}
    assert meta["annotations"] == {
        names.FAKE_RUN_S: "1800",
        RESTARTS: "0",
        names.ALIBABA_GPU_MODEL: "A100",
        names.CHECKPOINT_INTERVAL_S: "600",
        names.KUEUE_REQUIRED_TOPOLOGY: "gpudefrag.io/leaf",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "tr",
            "uid": owner_uid("ml", "tr"),
            "controller": True,
        }
    ]
    assert owner_uid("ml", "tr") == owner_uid("ml", "tr") != owner_uid("default", "tr")
    assert (spec["schedulerName"], spec["priority"]) == (names.SCHEDULER_NAME, 5)
    resources = spec["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "4000m", "memory": "2048Mi", names.NVIDIA_GPU: "2"}
    assert resources["limits"][names.NVIDIA_GPU] == "2"

    share = pod_manifest(WorkItem(0, "sh", gpus=1, gpu_milli=250, constraint="preferred:rack"), 0, "other")
    ann = share["metadata"]["annotations"]
    assert (ann[names.ALIBABA_GPU_MILLI], ann[names.ALIBABA_GPU_COUNT]) == ("250", "1")
    assert ann[names.KUEUE_PREFERRED_TOPOLOGY] == "rack"
    assert names.NVIDIA_GPU not in share["spec"]["containers"][0]["resources"]["limits"]
    assert names.POD_GROUP_LABEL not in share["metadata"]["labels"]
    assert share["spec"]["schedulerName"] == "other"

    assert podgroup_manifest(item)["spec"] == {"minMember": 2}
    assert podgroup_manifest(item)["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    pdb = pdb_manifest(WorkItem(0, "p", pdb_min_available=1))
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {"app": "p"}}}


@pytest.mark.parametrize(
    "kwargs",
    [{"pods": 0}, {"gpus": 2, "gpu_milli": 500}, {"gpus": 1, "gpu_milli": 1000}, {"constraint": "near:x"}],
)
def test_work_item_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        WorkItem(0, "bad", **kwargs)


def test_make_nodes() -> None:
    store = Store()
    nodes = make_nodes(store, 3, gpus_per_node=4, gpu_model="A10", labels_fn=lambda i: {"leaf": f"l{i // 2}"})
    assert [n["metadata"]["name"] for n in nodes] == ["node-0000", "node-0001", "node-0002"]
    node = store.get("nodes", None, "node-0002")
    assert node["status"]["allocatable"] == {
        "cpu": "96",
        "memory": "786432Mi",
        names.NVIDIA_GPU: "4",
        "pods": "110",
    }
    labels = node["metadata"]["labels"]
    assert labels["leaf"] == "l1"
    assert labels[names.ALIBABA_GPU_MODEL] == labels[names.NVIDIA_GPU_PRODUCT] == "A10"
    assert labels["kubernetes.io/hostname"] == "node-0002"
    assert node["status"]["conditions"][0]["type"] == "Ready"


# ---- the controller ---------------------------------------------------------------------------
def test_evicted_pod_restarts_from_its_last_checkpoint(env: tuple[Store, ScaledClock, JobController]) -> None:
    store, clock, controller = env
    controller.submit(WorkItem(0, "train", gpus=1, run_s=1000.0, checkpoint_interval_s=300.0))
    [pod] = wait_for(lambda: running(store, "train", 0, 1))
    assert pod["metadata"]["name"] == "train-0"
    started_s = from_rfc3339(pod["status"]["startTime"])
    clock.sleep_until(started_s + 700.0, threading.Event())
    # Evicted after 700 s of running; it stops at the end of its 30 s grace, at ~730 s.  The
    # checkpoints were at 300 and 600 s, so 600 s of work are kept, ~130 s lost, and the
    # replacement has 1000 - 600 = 400 s left to run.
    store.evict("default", "train-0")
    [new] = wait_for(lambda: running(store, "train", 1, 1))
    meta = new["metadata"]
    assert meta["annotations"][names.FAKE_RUN_S] == "400"
    assert meta["generateName"] == "train-" and meta["name"] != "train-0"
    status = controller.status("train")
    assert (status.incarnations, status.kept_work_s, status.completed) == (2, 600.0, False)
    assert 100.0 <= status.lost_work_s < 300.0
    wait_for(controller.all_done)
    status = controller.status("train")
    assert status.completed and status.completion_s is not None and status.first_bind_s is not None
    assert status.completion_s - from_rfc3339(new["status"]["startTime"]) >= 400.0


def test_a_lost_gang_member_restarts_the_whole_gang(env: tuple[Store, ScaledClock, JobController]) -> None:
    store, _, controller = env
    controller.submit(WorkItem(0, "gang", pods=3, gpus=1, run_s=1e6))
    assert store.get("podgroups", "default", "gang")["spec"]["minMember"] == 3
    first = wait_for(lambda: running(store, "gang", 0, 3))
    assert sorted(p["metadata"]["name"] for p in first) == ["gang-0", "gang-1", "gang-2"]
    store.delete("pods", "default", "gang-1", grace_period_s=0)
    second = wait_for(lambda: running(store, "gang", 1, 3))
    assert not {p["metadata"]["name"] for p in second} & {"gang-0", "gang-1", "gang-2"}
    assert all(p["metadata"]["labels"][names.POD_GROUP_LABEL] == "gang" for p in second)
    assert len(pods_of(store, "gang")) == 3  # the old members were deleted
    status = controller.status("gang")
    assert status.incarnations == 2 and status.kept_work_s == 0.0 and status.lost_work_s > 0.0


def test_a_rejected_pod_is_replaced_until_it_fits(env: tuple[Store, ScaledClock, JobController]) -> None:
    store, _, controller = env
    controller.submit(WorkItem(0, "first", gpus=4, run_s=50.0))
    wait_for(lambda: running(store, "first", 0, 1))
    controller.submit(WorkItem(0, "second", gpus=1, run_s=50.0))  # bound to the full node: OutOfgpu
    wait_for(controller.all_done)
    assert controller.status("first").incarnations == 1
    assert controller.status("second").incarnations > 1
    assert controller.status("second").lost_work_s == 0.0  # it never ran before it fitted


# ---- the replayer -----------------------------------------------------------------------------
def test_replayer_submits_in_order_at_the_scaled_times() -> None:
    clock = ScaledClock(scale=SCALE)
    store = Store(clock=clock.now_s)
    controller = JobController(store, clock)
    items = [WorkItem(300.0, "c"), WorkItem(0.0, "a"), WorkItem(100.0, "b"), WorkItem(100.0, "b2")]
    replayer = Replayer(store, clock, items, controller)
    replayer.start()
    try:
        assert replayer.join(timeout=10.0)
    finally:
        replayer.stop()
        store.close()
    assert [name for name, _ in replayer.submitted] == ["a", "b", "b2", "c"]
    assert replayer.start_s is not None
    for (_, t_s), item in zip(replayer.submitted, sorted(items, key=lambda i: i.submit_s)):
        assert item.submit_s <= t_s - replayer.start_s < item.submit_s + 100.0
    assert sorted(p["metadata"]["name"] for p in store.list("pods")[0]) == ["a-0", "b-0", "b2-0", "c-0"]
