"""Topology trees, their loaders, jobs' pods and the gang state's all-or-nothing bind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.cluster import ClusterState, PlacementError
from gpudefrag.model.jobs import Constraint, Job, parse_constraint, pod_sizes
from gpudefrag.model.topology import Topology, load_topology, nvl72, superpod


def test_presets_follow_the_issue() -> None:
    sp = superpod(70)
    assert sp.levels == ("leaf", "spine") and sp.max_gpus_per_node == 8
    assert sp.domain_sizes(0).tolist() == [32, 32, 6] and sp.num_domains(1) == 1
    nv = nvl72(18 * 8 * 2)
    assert nv.levels == ("nvlink", "group", "spine") and nv.max_gpus_per_node == 4
    assert nv.domain_sizes(0).tolist() == [18] * 16 and nv.domain_sizes(1).tolist() == [144, 144]


def test_build_rejects_a_domain_under_two_parents() -> None:
    with pytest.raises(ConfigError, match="not a tree"):
        Topology.build([8] * 4, ("rack", "row"), [[0, 0, 1, 1], [0, 1, 1, 1]])
    with pytest.raises(ConfigError, match="densely"):
        Topology.build([8] * 2, ("rack",), [[0, 2]])


def test_toml_and_yaml_give_the_same_tree(tmp_path: Path) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text(
        'levels = ["rack", "spine"]\n'
        + "".join(f'[[nodes]]\nname = "n{i}"\ngpus = 8\nrack = "r{i // 2}"\nspine = "s"\n' for i in range(4))
    )
    yml = tmp_path / "t.yaml"
    yml.write_text(
        "levels: [rack, spine]\nnodes:\n"
        + "".join(f"  - {{name: n{i}, gpus: 8, rack: r{i // 2}, spine: s}}\n" for i in range(4))
    )
    a, b = load_topology(toml), load_topology(yml)
    assert a.domains(0).tolist() == b.domains(0).tolist() == [0, 0, 1, 1]
    assert a.node_names == ("n0", "n1", "n2", "n3")


def test_same_rack_name_under_two_spines_is_two_domains(tmp_path: Path) -> None:
    f = tmp_path / "t.toml"
    f.write_text(
        'levels = ["rack", "spine"]\n'
        '[[nodes]]\ngpus = 8\nrack = "r1"\nspine = "a"\n'
        '[[nodes]]\ngpus = 8\nrack = "r1"\nspine = "b"\n'
    )
    assert load_topology(f).domains(0).tolist() == [0, 1]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('levels = ["rack"]\n[[nodes]]\ngpus = 8\n', "nodes[0].rack"),
        ('levels = ["rack"]\n[[nodes]]\ngpus = 0\nrack = "a"\n', "nodes[0].gpus"),
        ("nodes = []\n", "levels"),
        ("levels = [\n", None),
    ],
)
def test_bad_topology_file_names_the_field(tmp_path: Path, text: str, where: str | None) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_topology(f)
    assert str(f) in str(e.value)
    if where:
        assert f"column '{where}'" in str(e.value)


def test_pods_and_constraints() -> None:
    assert pod_sizes(4, 8) == [4] and pod_sizes(16, 8) == [8, 8] and pod_sizes(12, 8) == [8, 4]
    assert parse_constraint("none") is None
    assert parse_constraint("required:leaf") == Constraint("required", "leaf")
    with pytest.raises(ConfigError):
        parse_constraint("sometimes:leaf")


def test_bind_is_all_or_nothing() -> None:
    st = ClusterState.for_topology(superpod(3))
    st.bind_job(Job(1, 0, 10, 4), [0])
    before = (st.gpu_milli_left.copy(), st.free_gpus.copy())
    with pytest.raises(PlacementError):
        st.bind_job(Job(2, 0, 10, 24), [1, 2, 0])  # the third pod does not fit on node 0
    assert np.array_equal(st.gpu_milli_left, before[0]) and np.array_equal(st.free_gpus, before[1])
    assert 2 not in st.placements
    st.bind_job(Job(3, 0, 10, 1, gpu_milli=300), [0])
    st.bind_job(Job(4, 0, 10, 1, gpu_milli=500), [0])  # best fit: shares job 3's GPU
    assert st.placements[4][0].gpu_indices == st.placements[3][0].gpu_indices
    st.unbind_job(3)
    st.unbind_job(4)
    st.unbind_job(1)
    assert st.free_gpus.tolist() == [8, 8, 8] and st.used_gpus() == 0


def test_bad_yaml_topology_is_an_input_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("levels: [rack\nnodes: 3\n")
    with pytest.raises(InputError, match="not valid YAML") as e:
        load_topology(f)
    assert str(f) in str(e.value)
