"""The node list repeated for the arrival-only protocol at a larger size."""

from __future__ import annotations

import numpy as np
import pytest

from gpudefrag.experiments.calib.run import run_experiment
from gpudefrag.experiments.common.inputs import workload_inputs
from gpudefrag.workloads.openb import NodeTable
from gpudefrag.workloads.replicate import replicate_nodes


def _table() -> NodeTable:
    return NodeTable(("b", "a"), np.array([4000, 8000]), np.array([100, 200]), np.array([2, 0]), ("T4", ""))


def test_fewest_copies_holding_the_gpus_with_unique_names():
    t = replicate_nodes(_table(), 5)  # 2 GPUs per copy -> 3 copies
    assert t.names == ("b", "a", "b-x1", "a-x1", "b-x2", "a-x2")
    assert t.gpu_count.tolist() == [2, 0] * 3 and t.cpu_milli.tolist() == [4000, 8000] * 3
    assert t.models == ("T4", "") * 3 and t.total_gpus == 6
    assert replicate_nodes(_table(), 1).names == ("b", "a")
    wide = replicate_nodes(_table(), 22)  # 11 copies: suffixes padded to two digits
    assert wide.names[2:4] == ("b-x01", "a-x01") and len(set(wide.names)) == 22


def test_a_node_list_without_gpus_is_refused():
    t = NodeTable(("a",), np.array([1000]), np.array([10]), np.array([0]), ("",))
    with pytest.raises(ValueError, match="no GPUs"):
        replicate_nodes(t, 8)


def test_one_copy_is_the_published_run_and_two_copies_double_the_workload(mirror):
    plain = run_experiment(seed=43)
    same = run_experiment(seed=43, min_gpus=1)
    assert np.array_equal(plain.result.node, same.result.node) and np.array_equal(plain.curve, same.curve)
    gpus = workload_inputs().nodes.total_gpus
    double = run_experiment(seed=43, min_gpus=gpus + 1)
    assert len(double.node_names) == 2 * len(plain.node_names)
    asked = int(double.prepared.requested_gpu_milli)
    # the workload is prepared for the doubled capacity: 130 % of it, within one pod
    assert abs(asked - 1.3 * 2 * gpus * 1000) <= 8000
    assert double.curve[130] > 90.0
