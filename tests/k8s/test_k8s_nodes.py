"""Nodes -> NodeInfo and ClusterState; GPU model ids; Kueue topology levels -> Topology."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.k8s.nodes import MAX_MODELS, ModelRegistry, cluster_state, node_info
from gpudefrag.k8s.requests import ObjectError
from gpudefrag.k8s.topology_config import load_topology_levels, topology_from_nodes
from gpudefrag.model.constants import ANY_GPU_MODEL
from gpudefrag.model.gpu_models import KNOWN_GPU_MODELS, MODEL_ID


def node(
    name: str = "n1",
    allocatable: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    conditions: list[dict[str, str]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}, "annotations": {"a": "b"}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}
            if allocatable is None
            else allocatable,
            "capacity": capacity or {},
            "conditions": [{"type": "Ready", "status": "True"}] if conditions is None else conditions,
        },
    }


def test_registry_keeps_known_ids_and_numbers_new_names() -> None:
    models = ModelRegistry()
    for name in KNOWN_GPU_MODELS:
        assert models.id_of(name) == MODEL_ID[name]
    first = len(KNOWN_GPU_MODELS)
    assert models.id_of("NVIDIA-A100-SXM4-80GB") == first
    assert models.id_of("H100") == first + 1
    assert models.id_of("NVIDIA-A100-SXM4-80GB") == first  # stable
    assert models.mask_of("") == ANY_GPU_MODEL
    assert models.mask_of("T4|H100") == (1 << MODEL_ID["T4"]) | (1 << (first + 1))
    assert models.mask_of("B200") == 1 << (first + 2)  # a name never seen gets an id now
    assert models.names[first : first + 3] == ("NVIDIA-A100-SXM4-80GB", "H100", "B200")


def test_registry_refuses_a_63rd_model() -> None:
    models = ModelRegistry()
    for i in range(MAX_MODELS - len(KNOWN_GPU_MODELS)):
        models.id_of(f"m{i}")
    assert models.id_of(f"m{MAX_MODELS - len(KNOWN_GPU_MODELS) - 1}") == MAX_MODELS - 1
    with pytest.raises(ValueError, match="more than 62 GPU models"):
        models.id_of("one-too-many")
    with pytest.raises(ValueError):
        models.mask_of("another")


def test_node_info_reads_allocatable_and_labels() -> None:
    info = node_info(node(labels={"alibabacloud.com/gpu-card-model": "A10", "nvidia.com/gpu.product": "X"}))
    assert (info.name, info.cpu_milli, info.memory_mib, info.gpu_count, info.gpu_model) == (
        "n1",
        8000,
        32768,
        4,
        "A10",
    )
    assert info.ready and info.schedulable and info.usable
    assert info.annotations == {"a": "b"}


def test_node_info_fallbacks() -> None:
    # allocatable lacks memory and GPUs: capacity gives them; the model from GPU feature discovery
    obj = node(
        allocatable={"cpu": "7500m"},
        capacity={"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "2"},
        labels={"nvidia.com/gpu.product": "NVIDIA-H100"},
    )
    info = node_info(obj)
    assert (info.cpu_milli, info.memory_mib, info.gpu_count, info.gpu_model) == (
        7500,
        16384,
        2,
        "NVIDIA-H100",
    )
    cpu_only = node_info(node(allocatable={"cpu": "4", "memory": "8Gi"}))
    assert (cpu_only.gpu_count, cpu_only.gpu_model) == (0, "")


@pytest.mark.parametrize(
    ("conditions", "spec", "ready", "schedulable"),
    [
        ([{"type": "Ready", "status": "False"}], {}, False, True),
        ([{"type": "Ready", "status": "Unknown"}], {}, False, True),
        ([], {}, False, True),
        ([{"type": "Ready", "status": "True"}], {"unschedulable": True}, True, False),
        # taints do not make a node unschedulable: they are matched against each pod's tolerations
        (
            [{"type": "Ready", "status": "True"}],
            {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            True,
            True,
        ),
        (
            [{"type": "Ready", "status": "True"}],
            {"taints": [{"key": "k", "effect": "NoExecute"}]},
            True,
            True,
        ),
        (
            [{"type": "Ready", "status": "True"}],
            {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]},
            True,
            True,
        ),
    ],
)
def test_ready_and_schedulable(
    conditions: list[dict[str, str]], spec: dict[str, Any], ready: bool, schedulable: bool
) -> None:
    info = node_info(node(conditions=conditions, **spec))
    assert (info.ready, info.schedulable, info.usable) == (ready, schedulable, ready and schedulable)
    blocking = [t for t in spec.get("taints", []) if t["effect"] != "PreferNoSchedule"]
    assert info.taints == tuple((t["key"], "", t["effect"]) for t in blocking)


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (node(allocatable={"memory": "1Gi"}), "status.allocatable['cpu']"),
        (node(allocatable={"cpu": "x", "memory": "1Gi"}), "status.allocatable['cpu']"),
        (
            node(allocatable={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1.5"}),
            "status.allocatable['nvidia.com/gpu']",
        ),
        (
            node(allocatable={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "-2"}),
            "status.allocatable['nvidia.com/gpu']",
        ),
        (node(name=""), "metadata.name"),
    ],
)
def test_node_errors_name_the_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ObjectError) as e:
        node_info(obj)
    assert e.value.field == field and str(e.value).startswith("nodes/")


def test_cluster_state_in_the_given_order() -> None:
    models = ModelRegistry()
    infos = [
        node_info(node("b", labels={"alibabacloud.com/gpu-card-model": "T4"})),
        node_info(node("a", labels={"nvidia.com/gpu.product": "H100"})),
        node_info(node("c", allocatable={"cpu": "2", "memory": "1Gi"})),  # CPU-only, no model: id 0
        node_info(node("d")),  # GPUs, no model label: the id of "" (accepted by no constraint)
    ]
    state = cluster_state(infos, models)
    assert state.names == ("b", "a", "c", "d")
    assert state.model_id.tolist() == [MODEL_ID["T4"], len(MODEL_ID), 0, len(MODEL_ID) + 1]
    assert state.gpu_count.tolist() == [4, 4, 0, 4]
    assert state.tie_rank.tolist() == [0, 1, 2, 3]
    with pytest.raises(ObjectError, match=r"nodes/big: status.allocatable\['nvidia.com/gpu'\]: 16 GPUs"):
        cluster_state(
            [node_info(node("big", allocatable={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "16"}))],
            models,
        )


# ----------------------------------------------------------------------------- topology
KUEUE_YAML = """\
apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata:
  name: default
spec:
  levels:
  - nodeLabel: example.com/block
  - nodeLabel: example.com/rack
  - nodeLabel: kubernetes.io/hostname
"""


def test_load_kueue_topology_and_bare_lists(tmp_path: Path) -> None:
    f = tmp_path / "topo.yaml"
    f.write_text(KUEUE_YAML)
    assert load_topology_levels(f) == ["example.com/block", "example.com/rack", "kubernetes.io/hostname"]
    t = tmp_path / "topo.toml"
    t.write_text('levels = [{nodeLabel = "example.com/block"}, "example.com/rack"]\n')
    assert load_topology_levels(t) == ["example.com/block", "example.com/rack"]


@pytest.mark.parametrize(
    ("name", "text", "needle"),
    [
        ("t.yaml", "spec: {}\n", "column 'spec.levels': missing field 'spec.levels'"),
        ("t.yaml", "kind: Topology\n", "missing field 'spec.levels' (or 'levels')"),
        ("t.yaml", "levels: []\n", "column 'levels': 'levels' must be a non-empty list"),
        ("t.yaml", "spec: {levels: [{label: x}]}\n", "column 'spec.levels[0].nodeLabel'"),
        ("t.yaml", "levels: [a, a]\n", "levels[1]: level 'a' is listed twice"),
        ("t.yaml", "levels: [a\n", "not valid YAML"),
        ("t.toml", "levels = [\n", "not valid TOML"),
        ("t.yaml", "- a\n", "expected a Kueue Topology"),
    ],
)
def test_bad_levels_files_name_the_file_and_field(tmp_path: Path, name: str, text: str, needle: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_topology_levels(f)
    assert str(e.value).startswith(str(f)) and needle in str(e.value)


def test_topology_from_nodes() -> None:
    def info(name: str, block: str, rack: str | None = None, gpus: int = 4) -> Any:
        alloc = {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": str(gpus)}
        labels = {"example.com/block": block, **({"example.com/rack": rack} if rack else {})}
        return node_info(node(name, allocatable=alloc, labels=labels))

    # two blocks; rack "r1" exists in both (different domains); n4 lacks the rack label
    nodes = [
        info("n0", "b0", "r1"),
        info("n1", "b0", "r2"),
        info("n2", "b1", "r1"),
        info("n3", "b1", "r1"),
        info("n4", "b1"),
        info("cpu", "b1", gpus=0),
    ]
    # Kueue lists top-down with the hostname last; Topology.levels is bottom-up without it
    topo = topology_from_nodes(nodes, ["example.com/block", "example.com/rack", "kubernetes.io/hostname"])
    assert topo.levels == ("example.com/rack", "example.com/block")
    assert topo.node_names == ("n0", "n1", "n2", "n3", "n4", "cpu")
    # racks numbered in order of first appearance, scoped by block: (r1,b0) (r2,b0) (r1,b1) ("",b1)
    assert topo.domains(0).tolist() == [0, 1, 2, 2, 3, 3]
    assert topo.domains(1).tolist() == [0, 0, 1, 1, 1, 1]
    assert topo.gpus_per_node.tolist() == [4, 4, 4, 4, 4, 0]  # the CPU node keeps its place with 0
    assert topology_from_nodes(nodes[:2], ["example.com/rack"]).levels == ("example.com/rack",)
    with pytest.raises(ConfigError):
        topology_from_nodes([], ["example.com/rack"])
