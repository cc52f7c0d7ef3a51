"""Taints and tolerations: Kubernetes' matching rule, and the scheduler keeping pods off nodes
whose taints they do not tolerate."""

from __future__ import annotations

import pytest
from k8sobj import node, pod

from gpudefrag.k8s.cache import ClusterCache
from gpudefrag.k8s.decide import decide_cycle
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.taints import node_taints, tolerates

GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")


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
