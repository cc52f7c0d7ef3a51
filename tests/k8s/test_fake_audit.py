"""The auditor catches what it is there to catch (so the end-to-end checks can fail)."""

from __future__ import annotations

import pytest
from k8sobj import node, pod, pod_group

from gpudefrag_fakecluster.audit import Auditor
from gpudefrag_fakecluster.store import ApiError, Store


def _strip(obj: dict) -> dict:
    return {
        **obj,
        "metadata": {k: v for k, v in obj["metadata"].items() if k not in ("uid", "creationTimestamp")},
    }


def _running(store: Store, name: str) -> None:
    store.patch(
        "pods",
        "default",
        name,
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        subresource="status",
    )


def test_overcommit_and_partial_gang_are_reported():
    store = Store()
    auditor = Auditor(store)
    store.create("nodes", None, _strip(node("a", gpus=8)))
    for name in ("x", "y"):
        store.create("pods", "default", _strip(pod(name, gpus=8)))
        store.bind(
            "default", name, "a", {"alibabacloud.com/gpu-index": "0,1,2,3,4,5,6,7"}
        )  # the store does not check
    store.create("podgroups", "default", pod_group("g", 2))
    store.create("pods", "default", _strip(pod("g-0", gpus=1, group="g")))
    store.bind("default", "g-0", "a", {"alibabacloud.com/gpu-index": "0"})
    report = auditor.report()
    assert len(report.overcommits) == 2  # y over x, then g-0 over both
    assert report.partial_gangs == ["default/g incarnation 0: 1/2 bound over 0.00 s"]
    assert not report.ok


def test_forbidden_evictions_are_reported_but_refused_ones_are_not():
    store = Store()
    auditor = Auditor(store)
    store.create("nodes", None, _strip(node("a")))
    store.create("pods", "default", _strip(pod("orphan", gpus=1, owner=False)))
    store.create("pods", "default", _strip(pod("kept", gpus=1)))
    store.create(
        "poddisruptionbudgets",
        "default",
        {
            "metadata": {"name": "keep"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}},
        },
    )
    for name in ("orphan", "kept"):
        store.bind("default", name, "a")
        _running(store, name)
    with pytest.raises(ApiError):
        store.evict("default", "kept")  # 429: the PDB forbids it, and nothing is recorded
    store.evict("default", "orphan")  # the store allows it; the auditor flags it
    report = auditor.report()
    assert report.forbidden_evictions == ["default/orphan: evicted without a controller owner"]
    assert report.evictions == 1
