"""A cluster's network topology as a tree of levels: GPU -> node -> domains ... -> top.

The levels above the node are named bottom-up (for example ``("nvlink", "leaf", "spine")``).
``domain_of[level][node]`` is the index of the node's domain at that level; domains are
numbered 0..k-1 per level, and every domain of level i lies inside exactly one domain of level
i + 1 (a tree).  Level names are what topology constraints refer to; ``"node"`` is the implicit
level 0.

Two presets follow the issue: an H100 SuperPOD-like fabric (8 GPUs per node, 32 nodes per leaf
group, a spine above) and an NVL72-like one (4 GPUs per node, 18 nodes per NVLink domain, 8
domains per group, a spine above).  :func:`load_topology` reads a TOML or YAML file; see its
docstring for the format.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gpudefrag.errors import ConfigError, InputError

IntArray = npt.NDArray[np.int64]

NODE_LEVEL = "node"

__all__ = [
    "NODE_LEVEL",
    "PRESETS",
    "Topology",
    "from_node_labels",
    "load_topology",
    "nvl72",
    "superpod",
    "uniform",
]


@dataclass(frozen=True, eq=False)
class Topology:
    """Nodes (``gpus_per_node``, ``node_names``) and the domains above them.

    ``levels`` are the level names above the node, bottom-up; ``domain_of[i]`` maps each node
    to its domain at ``levels[i]``.  Build with :meth:`build`, which checks the tree property.
    """

    gpus_per_node: IntArray
    node_names: tuple[str, ...]
    levels: tuple[str, ...]
    domain_of: tuple[IntArray, ...]

    @staticmethod
    def build(
        gpus_per_node: list[int] | IntArray,
        levels: tuple[str, ...],
        domain_of: list[list[int]] | list[IntArray],
        node_names: tuple[str, ...] | None = None,
    ) -> Topology:
        """A checked topology: every level maps every node, domains are numbered densely from
        0, and each domain sits inside one domain of the level above."""
        gpn = np.asarray(gpus_per_node, dtype=np.int64)
        n = int(gpn.size)
        if n == 0:
            raise ConfigError("a topology needs at least one node")
        if (gpn <= 0).any():
            raise ConfigError("every node needs at least one GPU")
        if len(domain_of) != len(levels):
            raise ConfigError("one domain map per level")
        if len(set(levels)) != len(levels) or NODE_LEVEL in levels:
            raise ConfigError(f"level names must be unique and not '{NODE_LEVEL}': {levels}")
        maps = tuple(np.asarray(d, dtype=np.int64) for d in domain_of)
        for name, d in zip(levels, maps):
            if d.shape != (n,):
                raise ConfigError(f"level '{name}' maps {d.size} nodes, the topology has {n}")
            if d.min() < 0 or set(np.unique(d).tolist()) != set(range(int(d.max()) + 1)):
                raise ConfigError(f"level '{name}': domains must be numbered 0..k-1 densely")
        for lo in range(len(maps) - 1):
            lower, upper = maps[lo], maps[lo + 1]
            for dom in range(int(lower.max()) + 1):
                if np.unique(upper[lower == dom]).size != 1:
                    raise ConfigError(
                        f"domain {dom} of level '{levels[lo]}' spans several domains of "
                        f"'{levels[lo + 1]}' (not a tree)"
                    )
        names = node_names or tuple(f"node-{i:05d}" for i in range(n))
        if len(names) != n:
            raise ConfigError("one name per node")
        return Topology(gpn, tuple(names), tuple(levels), maps)

    # A topology's arrays are never written after it is built, so its totals are kept once.
    @functools.cached_property
    def num_nodes(self) -> int:
        return int(self.gpus_per_node.size)

    @functools.cached_property
    def total_gpus(self) -> int:
        return int(self.gpus_per_node.sum())

    @functools.cached_property
    def max_gpus_per_node(self) -> int:
        return int(self.gpus_per_node.max())

    @functools.cached_property
    def _domain_counts(self) -> tuple[int, ...]:
        return tuple(int(d.max()) + 1 for d in self.domain_of)

    def level_index(self, level: str) -> int:
        """Index of ``level`` in :attr:`levels`; -1 for ``"node"``.  Unknown -> ConfigError."""
        if level == NODE_LEVEL:
            return -1
        try:
            return self.levels.index(level)
        except ValueError:
            known = ", ".join((NODE_LEVEL, *self.levels))
            raise ConfigError(f"unknown topology level '{level}' (known: {known})") from None

    def domains(self, level: int) -> IntArray:
        """Domain index of every node at level index ``level`` (-1 = each node its own)."""
        if level < 0:
            return np.arange(self.num_nodes, dtype=np.int64)
        return self.domain_of[level]

    def num_domains(self, level: int) -> int:
        """Domains at level index ``level`` (-1: one per node)."""
        return self.num_nodes if level < 0 else self._domain_counts[level]

    def domain_sizes(self, level: int) -> IntArray:
        """Nodes per domain at level index ``level``."""
        return np.bincount(self.domains(level), minlength=self.num_nodes if level < 0 else 0)


def _grouped(n: int, size: int) -> IntArray:
    return np.arange(n, dtype=np.int64) // size


def uniform(num_nodes: int, gpus_per_node: int, group_sizes: list[tuple[str, int]]) -> Topology:
    """Nodes in order, grouped bottom-up: ``[("leaf", 32)]`` puts nodes 0-31 in leaf 0, ...;
    each later size counts domains of the level below (``[("nvlink", 18), ("group", 8)]``).
    A level named ``"spine"`` of size 0 (or any size 0) holds everything."""
    levels: list[str] = []
    maps: list[IntArray] = []
    below = np.arange(num_nodes, dtype=np.int64)
    for name, size in group_sizes:
        cur = np.zeros(num_nodes, dtype=np.int64) if size <= 0 else below // size
        levels.append(name)
        maps.append(cur)
        below = cur
    return Topology.build([gpus_per_node] * num_nodes, tuple(levels), maps)


def superpod(num_nodes: int, leaf_nodes: int = 32) -> Topology:
    """H100 SuperPOD-like: 8 GPUs per node, ``leaf_nodes`` nodes per leaf group, one spine."""
    return uniform(num_nodes, 8, [("leaf", leaf_nodes), ("spine", 0)])


def nvl72(num_nodes: int) -> Topology:
    """NVL72-like: 4 GPUs per node, 18 nodes per NVLink domain, 8 domains per group, a spine."""
    return uniform(num_nodes, 4, [("nvlink", 18), ("group", 8), ("spine", 0)])


PRESETS = {"superpod": superpod, "nvl72": nvl72}


def _field(path: Path, data: dict[str, Any], key: str, kind: type) -> Any:
    if key not in data:
        raise InputError(path, f"missing field '{key}'", column=key)
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(path, f"field '{key}' must be {kind.__name__}", column=key)
    return value


def load_topology(path: str | Path) -> Topology:
    """Read a topology file (``.toml``, ``.yaml`` or ``.yml``)::

        levels = ["leaf", "spine"]          # above the node, bottom-up
        [[nodes]]
        name = "n0"
        gpus = 8
        leaf = "leaf-a"                     # one key per level: the domain's name
        spine = "s"

    Domain names are numbered in order of first appearance.  Every problem is an
    :class:`~gpudefrag.errors.InputError` naming the file and the field.
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror}") from None
    if p.suffix not in (".toml", ".yaml", ".yml"):
        raise InputError(p, "a topology file must end in .toml, .yaml or .yml")
    try:
        if p.suffix == ".toml":
            import tomllib  # loaded for a topology file only, not at start-up

            data: Any = tomllib.loads(text)
        else:
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                raise ValueError(str(e)) from None
    except ValueError as e:  # tomllib.TOMLDecodeError is one; YAML's errors are turned into one
        raise InputError(p, f"not valid {p.suffix[1:].upper()}: {e}") from None
    if not isinstance(data, dict):
        raise InputError(p, "expected a table with 'levels' and 'nodes'")
    levels = _field(p, data, "levels", list)
    if not all(isinstance(x, str) for x in levels):
        raise InputError(p, "'levels' must list names", column="levels")
    nodes = _field(p, data, "nodes", list)
    labels: list[dict[str, str]] = []
    gpus: list[int] = []
    names: list[str] = []
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        if not isinstance(node, dict):
            raise InputError(p, f"{where} must be a table", column=where)
        names.append(str(node.get("name", f"node-{i:05d}")))
        g = node.get("gpus")
        if not isinstance(g, int) or isinstance(g, bool) or g <= 0:
            raise InputError(p, f"{where}: 'gpus' must be a positive integer", column=f"{where}.gpus")
        gpus.append(g)
        lab: dict[str, str] = {}
        for level in levels:
            if level not in node:
                raise InputError(p, f"{where}: missing level '{level}'", column=f"{where}.{level}")
            lab[level] = str(node[level])
        labels.append(lab)
    try:
        return from_node_labels(names, gpus, levels, labels)
    except ConfigError as e:
        raise InputError(p, str(e)) from None


def from_node_labels(
    names: list[str], gpus: list[int], levels: list[str], labels: list[dict[str, str]]
) -> Topology:
    """A topology from per-node labels (``labels[i][level]`` = domain name), as Kubernetes
    node labels give it.  A domain name is scoped by its parent's, so two racks called
    ``r1`` under different spines are different domains."""
    maps: list[list[int]] = []
    for li in range(len(levels)):
        ids: dict[tuple[str, ...], int] = {}
        col = []
        for lab in labels:
            key = tuple(lab[levels[j]] for j in range(li, len(levels)))
            col.append(ids.setdefault(key, len(ids)))
        maps.append(col)
    return Topology.build(gpus, tuple(levels), maps, tuple(names))
