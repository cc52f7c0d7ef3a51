"""Snapshots (``kubectl get nodes,pods -o json``) -> nodes, running pods with GPUs, pending pods.

Also the hand-made object builders that ``test_whatif.py`` and ``test_cli_plan.py`` import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudefrag.errors import InputError
from gpudefrag.k8s.snapshot import load_snapshot, snapshot_from_objects

T0 = "2024-05-01T12:00:00Z"
T0_S = 1714564800.0  # T0 in epoch seconds


def at(offset_s: float) -> str:
    """RFC 3339 time ``offset_s`` seconds from T0 (negative: before)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(T0_S + offset_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(
    name: str,
    gpus: int = 4,
    cpu: str = "32",
    memory: str = "128Gi",
    model: str = "V100M16",
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "alibabacloud.com/gpu-card-model": model,
                **(labels or {}),
            },
        },
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def make_pod(
    name: str,
    gpus: int = 0,
    cpu: str = "1",
    memory: str = "1Gi",
    node: str | None = None,
    gpu_index: str | None = None,
    created_s: float = -3600.0,
    started_s: float | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: bool = True,
    phase: str | None = None,
    ns: str = "default",
) -> dict[str, Any]:
    """A pod asking ``gpus`` whole GPUs; bound to ``node`` (Running, started at ``started_s``
    from T0, default its creation) or pending."""
    ann = dict(annotations or {})
    if gpu_index is not None:
        ann["alibabacloud.com/gpu-index"] = gpu_index
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": f"uid-{name}",
        "creationTimestamp": at(created_s),
        "annotations": ann,
        "labels": dict(labels or {}),
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}
        ]
    spec: dict[str, Any] = {
        "schedulerName": "gpudefrag",
        "containers": [{"name": "main", "resources": {"limits": limits}}],
    }
    status: dict[str, Any] = {"phase": phase or ("Running" if node else "Pending")}
    if node:
        spec["nodeName"] = node
        status["startTime"] = at(created_s if started_s is None else started_s)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def write_list(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


# ----------------------------------------------------------------------------- tests
def test_running_pending_and_finished_pods(tmp_path: Path) -> None:
    items = [
        make_node("n1"),
        make_node("n2"),
        make_pod("a", gpus=2, node="n1", gpu_index="1,2"),
        make_pod("b", gpus=1, node="n2"),  # no gpu-index: the lowest free GPU (0)
        make_pod("c", gpus=1),  # pending
        make_pod("d", gpus=4, node="n2", phase="Succeeded"),  # ignored
        make_pod("e", gpus=4, phase="Failed"),  # ignored
    ]
    snap = load_snapshot(write_list(tmp_path / "s.json", items))
    assert [n.name for n in snap.nodes] == ["n1", "n2"]
    assert [(r.key, node, gpus) for r, node, gpus in snap.running] == [
        ("default/a", "n1", (1, 2)),
        ("default/b", "n2", (0,)),
    ]
    assert [r.key for r in snap.pending] == ["default/c"]
    assert snap.skipped == []
    state = snap.cluster_state()
    assert state.gpu_milli_left[0, :4].tolist() == [1000, 0, 0, 1000]
    assert state.gpu_milli_left[1, :4].tolist() == [0, 1000, 1000, 1000]
    assert state.used_gpu_milli == 3000


def test_unknown_gpus_take_the_lowest_free_after_the_known_ones() -> None:
    # n1 has 4 GPUs; "known" holds GPU 1 (annotated).  "late" (2 GPUs, no annotation) is listed
    # first but bound after every annotated pod: lowest wholly free GPUs = 0 and 2.  "share"
    # (openb 300 milli, created earlier than "late") takes GPU 0 first -> "late" gets 2 and 3.
    share = make_pod("share", node="n1", created_s=-500, annotations={"alibabacloud.com/gpu-milli": "300"})
    items = [
        make_node("n1"),
        make_pod("late", gpus=2, node="n1", created_s=-100),
        make_pod("known", gpus=1, node="n1", gpu_index="1"),
        share,
    ]
    snap = snapshot_from_objects(items)
    got = {r.name: gpus for r, _, gpus in snap.running}
    assert got == {"known": (1,), "share": (0,), "late": (2, 3)}
    # the listed order is kept in ``running``
    assert [r.name for r, _, _ in snap.running] == ["late", "known", "share"]


def test_pods_that_cannot_be_counted_are_skipped() -> None:
    items = [
        make_node("n1", gpus=2),
        make_pod("a", gpus=2, node="n1", gpu_index="0,1"),
        make_pod("b", gpus=1, node="n1"),  # no GPU left on n1: left out
        make_pod("c", gpus=1, node="gone"),  # node not in the snapshot
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
    ]
    snap = snapshot_from_objects(items)
    assert [r.name for r, _, _ in snap.running] == ["a"]
    assert len(snap.skipped) == 3
    assert any("pods/default/b: does not fit on node 'n1'" in s for s in snap.skipped)
    assert any("pods/default/c: bound to node 'gone'" in s for s in snap.skipped)
    assert any("Service" in s for s in snap.skipped)
    assert "default/b" not in snap.objects


def test_nested_lists_and_typed_lists(tmp_path: Path) -> None:
    node_list = {"kind": "NodeList", "items": [{k: v for k, v in make_node("n1").items() if k != "kind"}]}
    pod_list = {"kind": "PodList", "items": [{k: v for k, v in make_pod("p", gpus=1).items() if k != "kind"}]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"kind": "List", "items": [node_list, pod_list]}))
    snap = load_snapshot(f)
    assert [n.name for n in snap.nodes] == ["n1"] and [p.name for p in snap.pending] == ["p"]


def test_two_files_are_one_snapshot(tmp_path: Path) -> None:
    a = write_list(tmp_path / "nodes.json", [make_node("n1")])
    b = write_list(tmp_path / "pods.json", [make_pod("p", gpus=1, node="n1", gpu_index="3")])
    snap = load_snapshot(a, b)
    assert snap.running[0][2] == (3,)


def test_yaml_snapshot(tmp_path: Path) -> None:
    import yaml

    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"kind": "List", "items": [make_node("n1"), make_pod("p", gpus=1)]}))
    assert [p.name for p in load_snapshot(f).pending] == ["p"]


def test_only_scheduler_filters_pending_pods_not_bound_ones() -> None:
    other = make_pod("other", gpus=1)
    other["spec"]["schedulerName"] = "default-scheduler"
    bound_other = make_pod("bound", gpus=1, node="n1")
    bound_other["spec"]["schedulerName"] = "default-scheduler"
    snap = snapshot_from_objects(
        [make_node("n1"), make_pod("ours", gpus=1), other, bound_other], only_scheduler="gpudefrag"
    )
    assert [p.name for p in snap.pending] == ["ours"]
    assert [r.name for r, _, _ in snap.running] == ["bound"]  # occupies resources whoever bound it
    assert any("pods/default/other: pending for scheduler 'default-scheduler'" in s for s in snap.skipped)


def _bad_annotation(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["annotations"]["alibabacloud.com/gpu-milli"] = "abc"
    return pod


@pytest.mark.parametrize(
    ("items", "needle"),
    [
        (
            [make_node("n1"), _bad_annotation(make_pod("foo"))],
            "pods/default/foo: annotation 'alibabacloud.com/gpu-milli': 'abc' is not an integer in 1..1000",
        ),
        (
            [make_node("n1"), make_pod("foo", cpu="lots")],
            "pods/default/foo: spec.containers[0].resources.limits['cpu']",
        ),
        (
            [make_node("n1"), make_pod("foo", gpus=1, node="n1", gpu_index="5")],
            "pods/default/foo: annotation 'alibabacloud.com/gpu-index': GPU 5 does not exist",
        ),
        (
            [make_node("n1"), make_pod("foo", gpus=2, node="n1", gpu_index="0")],
            "pods/default/foo: annotation 'alibabacloud.com/gpu-index': names 1 GPUs, the pod asks 2",
        ),
        ([make_node("n1", gpus=16)], "nodes/n1: status.allocatable['nvidia.com/gpu']: 16 GPUs"),
        ([make_node("n1", memory="a lot")], "nodes/n1: status.allocatable['memory']"),
        ([make_node("n1"), make_node("n1")], "nodes/n1: listed twice"),
        ([make_node("n1"), make_pod("foo"), make_pod("foo")], "pods/default/foo: listed twice"),
        ([make_node("n1"), "text"], "items[1]: not an object"),
    ],
)
def test_malformed_objects_name_the_file_and_the_object(
    tmp_path: Path, items: list[Any], needle: str
) -> None:
    f = write_list(tmp_path / "snap.json", items)
    with pytest.raises(InputError) as e:
        load_snapshot(f)
    assert str(e.value).startswith(f"{f}: ")
    assert needle in str(e.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a v1 List"),
        ('{"items": 3}', "'items' must be a list"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "snap.json"
    f.write_text(text)
    with pytest.raises(InputError, match=needle):
        load_snapshot(f)
    with pytest.raises(InputError, match="cannot read"):
        load_snapshot(tmp_path / "missing.json")
