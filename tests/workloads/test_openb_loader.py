"""Strict openb node/pod loaders: real trace counts (spec §1) and every bad-input case."""

from __future__ import annotations

import csv
import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from gpudefrag.data import store
from gpudefrag.errors import ConfigError, InputError
from gpudefrag.workloads import (
    KNOWN_GPU_MODELS,
    NODE_LIST,
    PUBLISHED_WORKLOADS,
    NodeTable,
    PodTable,
    load_nodes,
    load_pods,
    workload_path,
)

REAL_MIRROR_FALLBACK = Path("/work/shared/data")


def real_mirror() -> Path | None:
    """The real dataset mirror: $GPUDEFRAG_MIRROR, else /work/shared/data; None if absent."""
    env = os.environ.get("GPUDEFRAG_MIRROR")
    for cand in ([Path(env)] if env else []) + [REAL_MIRROR_FALLBACK]:
        if (cand / NODE_LIST).is_file() and (cand / "openb/openb_pod_list_default.csv").is_file():
            return cand
    return None


MIRROR = real_mirror()
needs_mirror = pytest.mark.skipif(MIRROR is None, reason="dataset mirror not available")

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"


def _csv(tmp_path: Path, text: str, name: str = "pods.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- real traces -----------------------------------------------------------------------------------


@needs_mirror
def test_real_node_list_counts():
    nodes = load_nodes(MIRROR / NODE_LIST)
    assert isinstance(nodes, NodeTable)
    assert len(nodes) == 1213
    assert nodes.total_gpus == 6212
    assert int(nodes.cpu_milli.sum()) == 107_018_000
    assert nodes.names[0] == "openb-node-0000" and nodes.models[0] == "P100"
    assert nodes.source_path == MIRROR / NODE_LIST
    assert set(nodes.models) == set(KNOWN_GPU_MODELS)
    g2 = np.array([m == "G2" for m in nodes.models])
    assert int(g2.sum()) == 549 and set(nodes.gpu_count[g2].tolist()) == {8}


@needs_mirror
def test_real_all_node_list_allows_cpu_only_nodes():
    nodes = load_nodes(MIRROR / "openb/openb_node_list_all_node.csv")
    assert len(nodes) == 1523
    cpu_only = nodes.gpu_count == 0
    assert int(cpu_only.sum()) == 310
    assert {m for m, c in zip(nodes.models, cpu_only) if c} == {""}


@needs_mirror
def test_real_default_pod_list_counts():
    pods = load_pods(MIRROR / "openb/openb_pod_list_default.csv")
    assert isinstance(pods, PodTable) and len(pods) == 8152
    n, m = pods.num_gpu, pods.gpu_milli
    assert int((n == 0).sum()) == 1088
    assert int(((n == 1) & (m < 1000)).sum()) == 3078
    assert int(((n == 1) & (m == 1000)).sum()) == 3911
    assert [int((n == k).sum()) for k in (2, 4, 8)] == [16, 15, 44]
    assert pods.total_gpu_milli == 6_086_800
    assert all(s == "" for s, k in zip(pods.gpu_spec, n) if k == 0)
    assert int(m[n == 0].max()) == 0
    assert pods.creation_time[:2].tolist() == [0, 427061]
    assert pods.names[0] == "openb-pod-0000"


@needs_mirror
def test_real_multigpu_list_has_five_columns():
    pods = load_pods(MIRROR / "openb/openb_pod_list_multigpu30.csv")
    assert len(pods) == 8508
    assert pods.total_gpu_milli == 8_086_800  # 130.18 % of 6,212,000
    assert set(pods.gpu_spec) == {""}
    assert (pods.creation_time == -1).all() and (pods.scheduled_time == -1).all()


@needs_mirror
def test_published_workloads_match_published_results():
    with open(MIRROR / "fgd-published/analysis_allo_discrete.csv", newline="") as fh:
        published = {row["workload"] for row in csv.DictReader(fh)}
    assert set(PUBLISHED_WORKLOADS) == published
    assert len(PUBLISHED_WORKLOADS) == 17 == len(set(PUBLISHED_WORKLOADS))


@needs_mirror
def test_workload_path_resolves_through_store(monkeypatch):
    monkeypatch.setenv("GPUDEFRAG_MIRROR", str(MIRROR))
    expected = (MIRROR / "openb/openb_pod_list_default.csv").absolute()
    assert workload_path("openb_pod_list_default") == expected
    assert workload_path("default") == expected
    assert workload_path("openb/openb_pod_list_default.csv") == expected
    for name in PUBLISHED_WORKLOADS:
        assert workload_path(name).name == f"{name}.csv"
    with pytest.raises(ConfigError) as info:
        workload_path("gpushare55")
    assert "gpushare55" in str(info.value) and "gpushare40" in str(info.value)
    store.clear_verify_cache()


# --- conversion rules (spec §1.2) ------------------------------------------------------------------


def test_conversion_rules(tmp_path):
    path = _csv(
        tmp_path,
        "\n".join(
            [
                POD_HEADER,
                "cpu-pod,4000,8192,0,500,T4|G2,BE,Running,10,20,15",  # CPU-only: milli/spec cleared
                "big-milli,8000,0,1,1500,,LS,Running,,,",  # > 1000 -> 1000; empty times
                "zero-milli,8000,1024,1,0,|V100M16||V100M32|V100M32|,LS,Pending,5,,",
                "share,6000,12288,1,460,A10,LS,Running,1,2,3",
                "multi,32000,65536,8,1000,G3|G3,LS,Running,1,2,3",
            ]
        )
        + "\n",
    )
    pods = load_pods(path)
    assert len(pods) == 5
    assert pods.names == ("cpu-pod", "big-milli", "zero-milli", "share", "multi")
    assert pods.num_gpu.tolist() == [0, 1, 1, 1, 8]
    assert pods.gpu_milli.tolist() == [0, 1000, 0, 460, 1000]
    assert pods.gpu_spec == ("", "", "V100M16|V100M32|V100M32", "A10", "G3|G3")
    assert pods.memory_mib.tolist() == [8192, 0, 1024, 12288, 65536]
    assert pods.creation_time.tolist() == [10, -1, 5, 1, 1]
    assert pods.deletion_time.tolist() == [20, -1, -1, 2, 2]
    assert pods.cpu_milli.dtype == np.int64
    assert pods.source_path == path


def test_tables_are_immutable(tmp_path):
    pods = load_pods(_csv(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,2,1,3\n"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        pods.names = ("x",)
    with pytest.raises(ValueError):
        pods.cpu_milli[0] = 5
    nodes = load_nodes(_csv(tmp_path, NODE_HEADER + "\nn1,1000,2048,2,T4\n", "nodes.csv"))
    assert len(nodes) == 1 and nodes.gpu_count.tolist() == [2]
    with pytest.raises(ValueError):
        nodes.gpu_count[0] = 1


def test_header_column_order_and_crlf(tmp_path):
    path = _csv(tmp_path, "model,gpu,sn,memory_mib,cpu_milli\r\nG2,8,n1,393216,96000\r\n", "nodes.csv")
    nodes = load_nodes(path)
    assert nodes.names == ("n1",) and nodes.models == ("G2",)
    assert nodes.cpu_milli.tolist() == [96000] and nodes.memory_mib.tolist() == [393216]


# --- bad input ------------------------------------------------------------------------------------

GOOD_POD = "p0,1000,2048,1,500,T4,LS,Running,0,10,0"
SHORT_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli"

POD_CASES = {
    # case: (file text, line, column, message fragment)
    "truncated row": (f"{POD_HEADER}\n{GOOD_POD}\np1,1000,2048\n", 3, "num_gpu", "truncated"),
    "too many fields": (f"{SHORT_HEADER}\np0,1,2,1,500\np1,1,2,1,500,T4\n", 3, None, "too many fields"),
    "non-numeric": (f"{POD_HEADER}\np1,12abc,2048,1,500,,LS,Running,0,0,0\n", 2, "cpu_milli", "non-numeric"),
    "decimal": (f"{SHORT_HEADER}\np0,1,2,1,500\np1,1,2048.5,1,500\n", 3, "memory_mib", "non-numeric"),
    "negative memory": (
        f"{POD_HEADER}\n{GOOD_POD}\np1,1000,-5,1,500,,LS,Running,0,0,0\n",
        3,
        "memory_mib",
        "negative",
    ),
    "negative num_gpu": (f"{SHORT_HEADER}\np1,1000,5,-1,500\n", 2, "num_gpu", "negative"),
    "negative gpu_milli": (f"{SHORT_HEADER}\np0,1,2,1,500\np1,1000,5,1,-500\n", 3, "gpu_milli", "negative"),
    "empty required field": (f"{SHORT_HEADER}\np0,1,2,1,500\np1,,5,1,500\n", 3, "cpu_milli", "empty"),
    "empty name": (f"{SHORT_HEADER}\n,1,2,1,500\n", 2, "name", "empty"),
    "bad time": (f"{POD_HEADER}\np1,1000,5,1,500,,LS,Running,soon,0,0\n", 2, "creation_time", "non-numeric"),
    "unknown GPU model": (
        f"{POD_HEADER}\n{GOOD_POD}\np1,1000,5,1,500,V100M16|H100,LS,Running,0,0,0\n",
        3,
        "gpu_spec",
        "H100",
    ),
    "unknown model on CPU-only pod": (
        f"{POD_HEADER}\np1,1000,5,0,0,t4,LS,Running,0,0,0\n",
        2,
        "gpu_spec",
        "'t4'",
    ),
    "duplicate name": (f"{SHORT_HEADER}\np0,1,2,1,500\np1,1,2,1,500\np0,1,2,1,500\n", 4, "name", "duplicate"),
    "bad header": ("name,cpu,memory_mib,num_gpu,gpu_milli\np0,1,2,1,500\n", 1, "cpu", "unknown column"),
    "missing header column": (
        "name,cpu_milli,memory_mib,num_gpu\np0,1,2,1\n",
        1,
        "gpu_milli",
        "missing required column",
    ),
    "duplicate header column": (f"{SHORT_HEADER},name\np0,1,2,1,500,p\n", 1, "name", "duplicate"),
    "empty file": ("", 1, "name", "empty file"),
    "header only": (f"{POD_HEADER}\n", 1, None, "no data rows"),
    "blank line inside": (f"{SHORT_HEADER}\np0,1,2,1,500\n\np1,1,2,1,500\n", 3, None, "blank line"),
}


@pytest.mark.parametrize("case", sorted(POD_CASES))
def test_bad_pod_input(tmp_path, case):
    text, line, column, fragment = POD_CASES[case]
    path = _csv(tmp_path, text, "bad_pods.csv")
    with pytest.raises(InputError) as info:
        load_pods(path)
    err = info.value
    msg = str(err)
    assert "bad_pods.csv" in msg and err.path == str(path)
    assert f"line {line}" in msg and err.line == line
    if column is not None:
        assert f"column '{column}'" in msg and err.column == column
    assert fragment in msg
    if "model" in case:
        assert all(m in msg for m in KNOWN_GPU_MODELS)


NODE_CASES = {
    "unknown GPU model": (f"{NODE_HEADER}\nn0,1000,2048,2,T4\nn1,1000,2048,2,A100\n", 3, "model", "A100"),
    "GPUs but no model": (f"{NODE_HEADER}\nn0,1000,2048,2,\n", 2, "model", "empty GPU model"),
    "negative gpu": (f"{NODE_HEADER}\nn0,1000,2048,-2,T4\n", 2, "gpu", "negative"),
    "non-numeric cpu": (f"{NODE_HEADER}\nn0,lots,2048,2,T4\n", 2, "cpu_milli", "non-numeric"),
    "truncated row": (f"{NODE_HEADER}\nn0,1000,2048,2,T4\nn1,1000\n", 3, "memory_mib", "truncated"),
    "duplicate sn": (f"{NODE_HEADER}\nn0,1000,2048,2,T4\nn0,1000,2048,2,T4\n", 3, "sn", "first on line 2"),
    "bad header": ("sn,cpu_milli,memory_mib,gpus,model\nn0,1,2,2,T4\n", 1, "gpus", "unknown column"),
    "pod header in node file": (f"{SHORT_HEADER}\np0,1,2,1,500\n", 1, "name", "unknown column"),
    "empty file": ("", 1, "sn", "empty file"),
}


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_bad_node_input(tmp_path, case):
    text, line, column, fragment = NODE_CASES[case]
    path = _csv(tmp_path, text, "bad_nodes.csv")
    with pytest.raises(InputError) as info:
        load_nodes(path)
    msg = str(info.value)
    assert "bad_nodes.csv" in msg and f"line {line}" in msg
    assert f"column '{column}'" in msg and fragment in msg


def test_missing_file_and_trailing_blank_lines(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_pods(tmp_path / "nope.csv")
    pods = load_pods(_csv(tmp_path, f"{SHORT_HEADER}\np0,1,2,1,500\n\n\n"))
    assert len(pods) == 1


def test_non_utf8_file(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(f"{SHORT_HEADER}\np0,1,2,1,500\n".encode() + b"p\xe9,1,2,1,500\n")
    with pytest.raises(InputError) as info:
        load_pods(path)
    assert "latin1.csv" in str(info.value) and "UTF-8" in str(info.value)
    assert info.value.line == 3
