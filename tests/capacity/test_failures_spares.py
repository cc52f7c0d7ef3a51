"""Failure process, priority classes and spare nodes of suite 3."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gpudefrag.capacity.classes import BEST_EFFORT, PRODUCTION, RESEARCH, assign_classes
from gpudefrag.capacity.failures import LLAMA3_NODE_RATE_PER_H, FailureConfig, failure_events
from gpudefrag.capacity.spares import may_use_spares, spare_nodes
from gpudefrag.errors import ConfigError
from gpudefrag.model.jobs import Job
from gpudefrag.model.topology import superpod


def test_llama3_rate_is_one_failure_per_node_every_264_days():
    assert pytest.approx(419 / 2_654_208) == LLAMA3_NODE_RATE_PER_H
    assert pytest.approx(264, abs=1) == 1 / LLAMA3_NODE_RATE_PER_H / 24


def test_failure_count_matches_the_poisson_rate_and_outages_never_overlap():
    topo = superpod(200, 32)
    horizon = 30 * 86400.0
    cfg = FailureConfig(node_rate_per_h=1e-3, repair_median_s=3600.0)
    events = failure_events(topo, cfg, horizon, seed=3)
    # expected failures ~ nodes x hours x rate (repairs take a little time out): 200*720*1e-3 = 144
    assert 110 <= len(events) <= 180
    assert events == sorted(events) and all(o.repair_s > o.fail_s for o in events)
    by_node: dict[int, list] = {}
    for o in events:
        by_node.setdefault(o.node, []).append(o)
    for outs in by_node.values():
        for a, b in itertools.pairwise(outs):
            assert b.fail_s >= a.repair_s
    assert failure_events(topo, cfg, horizon, seed=3) == events
    assert failure_events(topo, cfg, horizon, seed=4) != events


def test_repair_times_are_lognormal_around_the_median():
    topo = superpod(400, 32)
    cfg = FailureConfig(node_rate_per_h=5e-3, repair_median_s=7200.0, repair_sigma=0.5)
    events = failure_events(topo, cfg, 20 * 86400.0, seed=1)
    durations = np.array([o.repair_s - o.fail_s for o in events])
    assert np.median(durations) == pytest.approx(7200.0, rel=0.1)
    assert np.std(np.log(durations)) == pytest.approx(0.5, rel=0.15)


def test_a_correlated_failure_takes_the_whole_leaf_down_at_once():
    topo = superpod(64, 32)
    cfg = FailureConfig(node_rate_per_h=0.0, leaf_rate_per_h=0.01)
    events = failure_events(topo, cfg, 10 * 86400.0, seed=2)
    assert events and all(o.correlated for o in events)
    first = [o for o in events if o.fail_s == events[0].fail_s]
    assert len(first) == 32 and len({topo.domains(0)[o.node] for o in first}) == 1


def test_scale_multiplies_the_rate_and_zero_means_none():
    topo = superpod(100, 32)
    base = len(failure_events(topo, FailureConfig(node_rate_per_h=1e-3), 40 * 86400.0, 5))
    many = len(failure_events(topo, FailureConfig(node_rate_per_h=1e-3, scale=4.0), 40 * 86400.0, 5))
    assert 3.0 * base < many < 5.0 * base
    assert failure_events(topo, FailureConfig(scale=0.0), 40 * 86400.0, 5) == []
    with pytest.raises(ValueError, match="repair_median_s"):
        FailureConfig(repair_median_s=0.0)
    with pytest.raises(ValueError, match="scale"):
        FailureConfig(scale=math.nan)


def test_classes_follow_the_shares_and_the_seed():
    jobs = [Job(i, float(i), 60.0, 1) for i in range(6000)]
    a = assign_classes(jobs, (0.2, 0.5, 0.3), seed=9)
    counts = np.bincount([j.priority for j in a], minlength=3)
    assert counts[PRODUCTION] == pytest.approx(1200, abs=120)
    assert counts[RESEARCH] == pytest.approx(3000, abs=150)
    assert counts[BEST_EFFORT] == pytest.approx(1800, abs=130)
    assert [j.priority for j in assign_classes(jobs, (0.2, 0.5, 0.3), seed=9)] == [j.priority for j in a]
    with pytest.raises(ValueError, match="sum"):
        assign_classes(jobs, (0.5, 0.5, 0.5), seed=1)


def test_spares_spread_over_leaves_or_in_one_block():
    topo = superpod(68, 32)  # leaves of 32, 32 and 4 nodes
    leafy = spare_nodes(topo, "dedicated", 0.11)  # round(7.48) = 7 -> 3.29, 3.29, 0.41 -> 3, 3, 1
    assert leafy.sum() == 7 and np.flatnonzero(leafy).tolist() == [29, 30, 31, 61, 62, 63, 67]
    assert np.array_equal(spare_nodes(topo, "pooled-leaf", 0.11), leafy)
    block = spare_nodes(topo, "pooled-cluster", 0.11)
    assert np.flatnonzero(block).tolist() == list(range(61, 68))
    assert not spare_nodes(topo, "none", 0.11).any()
    with pytest.raises(ConfigError, match="unknown spare policy"):
        spare_nodes(topo, "hot", 0.1)


def test_who_may_use_spares():
    assert may_use_spares("none", False, False)
    assert may_use_spares("dedicated", True, False) and not may_use_spares("dedicated", False, True)
    assert may_use_spares("pooled-leaf", False, True) and may_use_spares("pooled-cluster", True, False)
    assert not may_use_spares("pooled-leaf", False, False)
