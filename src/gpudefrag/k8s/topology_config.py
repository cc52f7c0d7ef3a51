"""Topology levels as Kueue writes them, and a :class:`~gpudefrag.model.topology.Topology` from
the nodes' labels.

A levels file (YAML or TOML) is shaped like Kueue's Topology object::

    apiVersion: kueue.x-k8s.io/v1beta1
    kind: Topology
    metadata: {name: default}
    spec:
      levels:                                   # top level first
      - nodeLabel: cloud.provider.com/topology-block
      - nodeLabel: cloud.provider.com/topology-rack
      - nodeLabel: kubernetes.io/hostname

or a bare ``levels:`` list of ``{nodeLabel: ...}`` tables or of label keys.  Kueue lists levels
top-down; :attr:`Topology.levels` are bottom-up, so :func:`topology_from_nodes` reverses them.
A last level ``kubernetes.io/hostname`` is the node itself and is dropped (``"node"`` is the
implicit level 0).  Level names are the node label keys, so a pod's Kueue annotation (a label
key) names a level directly.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.k8s.nodes import NodeInfo
from gpudefrag.model.topology import Topology, from_node_labels

__all__ = ["HOSTNAME_LABEL", "load_topology_levels", "topology_from_nodes"]

HOSTNAME_LABEL = "kubernetes.io/hostname"


def _read(p: Path) -> Any:
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror}") from None
    try:
        return tomllib.loads(text) if p.suffix == ".toml" else yaml.safe_load(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(p, f"not valid TOML: {e}") from None
    except yaml.YAMLError as e:
        raise InputError(p, f"not valid YAML: {' '.join(str(e).split())}") from None


def _levels_list(p: Path, data: Any) -> tuple[list[Any], str]:
    """The raw levels list and the field it came from."""
    if not isinstance(data, dict):
        raise InputError(p, "expected a Kueue Topology (spec.levels) or a 'levels' list")
    if "spec" in data:
        spec = data["spec"]
        if not isinstance(spec, dict) or "levels" not in spec:
            raise InputError(p, "missing field 'spec.levels'", column="spec.levels")
        return spec["levels"], "spec.levels"
    if "levels" not in data:
        raise InputError(p, "missing field 'spec.levels' (or 'levels')", column="spec.levels")
    return data["levels"], "levels"


def load_topology_levels(path: str | Path) -> list[str]:
    """The node label keys of a levels file (module docstring), top level first.  Every problem
    is an :class:`~gpudefrag.errors.InputError` naming the file and the field."""
    p = Path(path)
    raw, field = _levels_list(p, _read(p))
    if not isinstance(raw, list) or not raw:
        raise InputError(p, f"'{field}' must be a non-empty list", column=field)
    levels: list[str] = []
    for i, entry in enumerate(raw):
        where = f"{field}[{i}]"
        label = entry.get("nodeLabel") if isinstance(entry, dict) else entry
        if not isinstance(label, str) or not label.strip():
            raise InputError(
                p, f"{where}: expected a table with a 'nodeLabel' key", column=f"{where}.nodeLabel"
            )
        if label.strip() in levels:
            raise InputError(
                p, f"{where}: level '{label.strip()}' is listed twice", column=f"{where}.nodeLabel"
            )
        levels.append(label.strip())
    return levels


def topology_from_nodes(nodes: Sequence[NodeInfo], levels: Sequence[str]) -> Topology:
    """The nodes' topology: ``levels`` are node label keys, top level first (as Kueue lists
    them); a last ``kubernetes.io/hostname`` is dropped.  A node without a level's label is in
    the domain named ``""`` under its parent.  Every node is kept, in order, so node indices
    match :func:`~gpudefrag.k8s.nodes.cluster_state`'s; a node without GPUs has 0 in
    ``gpus_per_node`` (``Topology.build`` wants GPUs, so it is checked with 1).  A problem
    raises :class:`~gpudefrag.errors.ConfigError`."""
    top_down = list(levels)
    if top_down and top_down[-1] == HOSTNAME_LABEL:
        top_down.pop()
    if not nodes:
        raise ConfigError("a topology needs at least one node")
    bottom_up = top_down[::-1]
    labels = [{level: n.labels.get(level, "") for level in bottom_up} for n in nodes]
    gpus = [n.gpu_count for n in nodes]
    topo = from_node_labels([n.name for n in nodes], [max(g, 1) for g in gpus], bottom_up, labels)
    if min(gpus) > 0:
        return topo
    return replace(topo, gpus_per_node=np.asarray(gpus, dtype=np.int64))
