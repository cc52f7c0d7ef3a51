"""Taints and tolerations, node selectors and required node affinity: Kubernetes' matching
rules, and the scheduler keeping pods off nodes they may not use."""

from __future__ import annotations

import pytest
from k8sobj import node, pod

from gpudefrag.k8s.affinity import selects
from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.decide import decide_cycle
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.taints import node_taints, tolerates

GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")


def _aff(terms):
    """A pod spec with a required node affinity: ``terms`` = [[(key, operator, values), ...], ...]."""
    exprs = [{"matchExpressions": [{"key": k, "operator": o, "values": v} for k, o, v in t]} for t in terms]
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": exprs}}
        }
    }


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),  # key matches, any value
        ({"key": "nvidia.com/gpu", "value": "present"}, True),  # Equal is the default operator
        ({"key": "nvidia.com/gpu", "value": "absent"}, False),  # value differs
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),  # effect differs
        ({"operator": "Exists"}, True),  # empty key with Exists tolerates everything
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_toleration_rule(toleration, expected):
    assert tolerates(toleration, GPU_TAINT) is expected


def test_only_blocking_effects_count():
    spec = {
        "taints": [
            {"key": "a", "effect": "PreferNoSchedule"},
            {"key": "b", "value": "x", "effect": "NoExecute"},
        ]
    }
    assert node_taints(spec) == (("b", "x", "NoExecute"),)


def test_pods_stay_off_nodes_they_do_not_tolerate():
    tainted = node("gpu", gpus=8)
    tainted["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cache = ClusterCache()
    cache.replace_nodes([node("plain", gpus=1), tainted])
    core = DecisionCore("bestfit", [])
    cache.apply_pod("ADDED", pod("intolerant", gpus=4, created="2026-12-01T00:00:00Z"))
    tolerant = pod("tolerant", gpus=4, created="2026-12-01T00:00:01Z")
    tolerant["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    cache.apply_pod("ADDED", tolerant)
    cache.apply_pod("ADDED", pod("small", gpus=1, created="2026-12-01T00:00:02Z"))
    result = decide_cycle(cache, cache.pending(), core.scheduler, core.policy, None, 0.0)
    placed = {rec.key: cache.order[p.node] for rec, p in result.binds}
    # "plain" has 1 GPU: the intolerant 4-GPU pod fits nowhere it may go; "small" takes "plain"
    assert placed == {"default/tolerant": "gpu", "default/small": "plain"}
    assert [r.key for r in result.unplaced] == ["default/intolerant"]


@pytest.mark.parametrize(
    ("spec", "labels", "expected"),
    [
        ({}, {}, True),
        ({"nodeSelector": {"pool": "a"}}, {"pool": "a"}, True),
        ({"nodeSelector": {"pool": "a"}}, {"pool": "b"}, False),
        # one term, all expressions must hold
        (_aff([[("zone", "In", ["z1", "z2"]), ("gpu", "Exists", [])]]), {"zone": "z2", "gpu": "x"}, True),
        (_aff([[("zone", "In", ["z1", "z2"]), ("gpu", "Exists", [])]]), {"zone": "z2"}, False),
        # terms are ORed
        (_aff([[("zone", "In", ["z9"])], [("rack", "NotIn", ["r1"])]]), {"zone": "z1", "rack": "r2"}, True),
        (_aff([[("zone", "DoesNotExist", [])]]), {"zone": "z1"}, False),
        (_aff([[("gen", "Gt", ["3"])]]), {"gen": "4"}, True),
        (_aff([[("gen", "Lt", ["3"])]]), {"gen": "4"}, False),
    ],
)
def test_node_selector_and_required_affinity(spec, labels, expected):
    assert selects(spec, labels) is expected


def test_node_selector_keeps_pods_on_their_pool():
    cache = ClusterCache()
    cache.replace_nodes([node("a", pool="cpu"), node("b", pool="gpu")])
    core = DecisionCore("bestfit", [])
    picky = pod("picky", gpus=1)
    picky["spec"]["nodeSelector"] = {"pool": "gpu"}
    cache.apply_pod("ADDED", picky)
    result = decide_cycle(cache, cache.pending(), core.scheduler, core.policy, None, 0.0)
    assert [cache.order[p.node] for _, p in result.binds] == ["b"]
