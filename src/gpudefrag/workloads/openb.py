"""Strict loaders for the Alibaba openb node and pod lists (cluster-trace-gpu-v2023 CSVs).

* :func:`load_nodes` reads ``sn,cpu_milli,memory_mib,gpu,model`` into a :class:`NodeTable`.
* :func:`load_pods` reads ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` plus the optional
  ``gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`` into a :class:`PodTable`.

Pod conversion follows the simulator's ``data/pod_csv_to_yaml.py`` (``fgd-spec.md`` §1.2):
``gpu_milli`` is per GPU; when ``num_gpu != 0`` it is kept if in 1..1000, becomes 1000 if larger and
0 if ``<= 0``; when ``num_gpu == 0`` both ``gpu_milli`` and ``gpu_spec`` are cleared. ``gpu_spec`` is
split on ``|``, empty parts dropped and re-joined with ``|`` (duplicates kept). ``qos`` and
``pod_phase`` are ignored; the three time columns are kept as int64 arrays (-1 when absent/empty).

Every problem raises :class:`~gpudefrag.errors.InputError` naming the file, the 1-based line (the
header is line 1) and the column: bad or missing header columns, short or long rows, empty required
fields, non-integer or negative resources, unknown GPU models (node ``model`` and every part of
``gpu_spec``, also for CPU-only pods), duplicate names, and files without data rows.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.workloads.gpu_models import KNOWN_GPU_MODELS
from gpudefrag.workloads.strict_csv import iter_rows, open_rows, read_header, uint_field

__all__ = [
    "GPU_MILLI",
    "NODE_COLUMNS",
    "NODE_LIST",
    "POD_OPTIONAL_COLUMNS",
    "POD_REQUIRED_COLUMNS",
    "PUBLISHED_WORKLOADS",
    "NodeTable",
    "PodTable",
    "load_node_list",
    "load_nodes",
    "load_pods",
    "load_workload",
    "workload_path",
]

GPU_MILLI = 1000  # capacity of one GPU in milli-GPU

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_REQUIRED_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_OPTIONAL_COLUMNS = ("gpu_spec", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")

#: The node list every published FGD experiment uses (mirror-relative path).
NODE_LIST = "openb/openb_node_list_gpu_node.csv"

#: The 17 pod lists of the published grid (distinct ``workload`` values of
#: ``fgd-published/analysis_allo_discrete.csv``; 6 policies x seeds 42-51 each).
PUBLISHED_WORKLOADS: tuple[str, ...] = (
    "openb_pod_list_default",
    "openb_pod_list_cpu050",
    "openb_pod_list_cpu100",
    "openb_pod_list_cpu200",
    "openb_pod_list_cpu250",
    "openb_pod_list_gpushare40",
    "openb_pod_list_gpushare60",
    "openb_pod_list_gpushare80",
    "openb_pod_list_gpushare100",
    "openb_pod_list_gpuspec10",
    "openb_pod_list_gpuspec20",
    "openb_pod_list_gpuspec25",
    "openb_pod_list_gpuspec33",
    "openb_pod_list_multigpu20",
    "openb_pod_list_multigpu30",
    "openb_pod_list_multigpu40",
    "openb_pod_list_multigpu50",
)

_KNOWN_MODELS = frozenset(KNOWN_GPU_MODELS)
_KNOWN_LIST = ", ".join(KNOWN_GPU_MODELS)


# ---------------------------------------------------------------------------------------------
# Tables


def _int_array(values: ArrayLike, name: str) -> NDArray[np.int64]:
    arr = np.array(values, dtype=np.int64).reshape(-1)
    arr.setflags(write=False)
    return arr


def _check_lengths(kind: str, n: int, **columns: Sized) -> None:
    for name, col in columns.items():
        if len(col) != n:
            raise ValueError(f"{kind}: column {name} has {len(col)} entries, expected {n}")


@dataclass(frozen=True, eq=False)
class NodeTable:
    """Nodes, one entry per CSV row in file order. Arrays are read-only int64."""

    names: tuple[str, ...]
    cpu_milli: NDArray[np.int64]
    memory_mib: NDArray[np.int64]
    gpu_count: NDArray[np.int64]
    models: tuple[str, ...]
    source_path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "models", tuple(self.models))
        for name in ("cpu_milli", "memory_mib", "gpu_count"):
            object.__setattr__(self, name, _int_array(getattr(self, name), name))
        if self.source_path is not None:
            object.__setattr__(self, "source_path", Path(self.source_path))
        _check_lengths(
            "NodeTable",
            len(self.names),
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            gpu_count=self.gpu_count,
            models=self.models,
        )

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_gpus(self) -> int:
        return int(self.gpu_count.sum())

    def __repr__(self) -> str:
        return (
            f"NodeTable({len(self)} nodes, {self.total_gpus} GPUs, "
            f"source_path={str(self.source_path) if self.source_path else None!r})"
        )


@dataclass(frozen=True, eq=False)
class PodTable:
    """Pods, one entry per CSV row in file order. Arrays are read-only int64.

    ``gpu_milli`` is per GPU (total request = ``gpu_milli * num_gpu``); ``gpu_spec`` is the
    normalised ``|``-joined model list or ``""``. Time columns are -1 where absent or empty.
    """

    names: tuple[str, ...]
    cpu_milli: NDArray[np.int64]
    memory_mib: NDArray[np.int64]
    num_gpu: NDArray[np.int64]
    gpu_milli: NDArray[np.int64]
    gpu_spec: tuple[str, ...]
    creation_time: NDArray[np.int64] | None = None
    deletion_time: NDArray[np.int64] | None = None
    scheduled_time: NDArray[np.int64] | None = None
    source_path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "gpu_spec", tuple(self.gpu_spec))
        for name in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
            object.__setattr__(self, name, _int_array(getattr(self, name), name))
        for name in ("creation_time", "deletion_time", "scheduled_time"):
            value = getattr(self, name)
            object.__setattr__(self, name, _int_array(np.full(n, -1) if value is None else value, name))
        if self.source_path is not None:
            object.__setattr__(self, "source_path", Path(self.source_path))
        _check_lengths(
            "PodTable",
            n,
            cpu_milli=self.cpu_milli,
            memory_mib=self.memory_mib,
            num_gpu=self.num_gpu,
            gpu_milli=self.gpu_milli,
            gpu_spec=self.gpu_spec,
            # The loop above replaced a ``None`` time column by an array of -1.
            creation_time=cast("NDArray[np.int64]", self.creation_time),
            deletion_time=cast("NDArray[np.int64]", self.deletion_time),
            scheduled_time=cast("NDArray[np.int64]", self.scheduled_time),
        )

    def __len__(self) -> int:
        return len(self.names)

    @property
    def total_gpu_milli(self) -> int:
        """Sum over pods of ``gpu_milli * num_gpu``."""
        return int((self.gpu_milli * self.num_gpu).sum())

    def __repr__(self) -> str:
        return (
            f"PodTable({len(self)} pods, {self.total_gpu_milli} GPU milli, "
            f"source_path={str(self.source_path) if self.source_path else None!r})"
        )


# ---------------------------------------------------------------------------------------------
# Field parsing


def _unknown_model(path: str, line: int, column: str, model: str) -> InputError:
    return InputError(path, f"unknown GPU model {model!r}; known models: {_KNOWN_LIST}", line, column)


def _no_rows(path: str) -> InputError:
    return InputError(path, "no data rows after the header", 1)


def load_nodes(path: str | os.PathLike[str]) -> NodeTable:
    """Load an openb node list (``sn,cpu_milli,memory_mib,gpu,model``; any column order).

    ``model`` must be a known GPU model; it may be empty only for a node with ``gpu == 0``.
    """
    src = Path(path)
    spath = str(src)
    names: list[str] = []
    cpu: list[int] = []
    mem: list[int] = []
    gpus: list[int] = []
    models: list[str] = []
    seen: dict[str, int] = {}
    with open_rows(src) as fh:
        reader = csv.reader(fh, strict=True)
        pos = read_header(reader, spath, NODE_COLUMNS, ())
        header = sorted(pos, key=pos.__getitem__)
        i_sn, i_cpu, i_mem, i_gpu, i_model = (pos[c] for c in NODE_COLUMNS)
        for line, row in iter_rows(reader, spath, len(header), header):
            sn = row[i_sn]
            if not sn:
                raise InputError(spath, "empty required field", line, "sn")
            if sn in seen:
                raise InputError(spath, f"duplicate node name {sn!r} (first on line {seen[sn]})", line, "sn")
            seen[sn] = line
            gpu = uint_field(row[i_gpu], spath, line, "gpu")
            model = row[i_model]
            if model not in _KNOWN_MODELS:  # noqa: SIM102
                if model or gpu:
                    if not model:
                        raise InputError(
                            spath,
                            f"empty GPU model for a node with {gpu} GPU(s); known models: {_KNOWN_LIST}",
                            line,
                            "model",
                        )
                    raise _unknown_model(spath, line, "model", model)
            names.append(sn)
            cpu.append(uint_field(row[i_cpu], spath, line, "cpu_milli"))
            mem.append(uint_field(row[i_mem], spath, line, "memory_mib"))
            gpus.append(gpu)
            models.append(model)
    if not names:
        raise _no_rows(spath)
    return NodeTable(
        tuple(names),
        np.array(cpu, dtype=np.int64),
        np.array(mem, dtype=np.int64),
        np.array(gpus, dtype=np.int64),
        tuple(models),
        source_path=src,
    )


def load_pods(path: str | os.PathLike[str]) -> PodTable:
    """Load an openb pod list and apply the simulator's conversion (module docstring)."""
    src = Path(path)
    spath = str(src)
    names: list[str] = []
    cpu: list[int] = []
    mem: list[int] = []
    ngpu: list[int] = []
    milli: list[int] = []
    specs: list[str] = []
    times: tuple[list[int], list[int], list[int]] = ([], [], [])
    time_cols = ("creation_time", "deletion_time", "scheduled_time")
    seen: dict[str, int] = {}
    spec_cache: dict[str, str] = {"": ""}
    spec: str | None  # a row's normalised gpu_spec (None only while a cache lookup missed)
    with open_rows(src) as fh:
        reader = csv.reader(fh, strict=True)
        pos = read_header(reader, spath, POD_REQUIRED_COLUMNS, POD_OPTIONAL_COLUMNS)
        header = sorted(pos, key=pos.__getitem__)
        i_name, i_cpu, i_mem, i_ngpu, i_milli = (pos[c] for c in POD_REQUIRED_COLUMNS)
        i_spec = pos.get("gpu_spec")
        time_idx = [(pos[c], c, out) for c, out in zip(time_cols, times) if c in pos]
        for line, row in iter_rows(reader, spath, len(header), header):
            name = row[i_name]
            if not name:
                raise InputError(spath, "empty required field", line, "name")
            if name in seen:
                raise InputError(
                    spath, f"duplicate pod name {name!r} (first on line {seen[name]})", line, "name"
                )
            seen[name] = line
            n = uint_field(row[i_ngpu], spath, line, "num_gpu")
            m = uint_field(row[i_milli], spath, line, "gpu_milli")
            spec = ""
            if i_spec is not None:
                raw = row[i_spec]
                spec = spec_cache.get(raw)
                if spec is None:
                    parts = [p for p in raw.split("|") if p]
                    for part in parts:
                        if part not in _KNOWN_MODELS:
                            raise _unknown_model(spath, line, "gpu_spec", part)
                    spec = spec_cache[raw] = "|".join(parts)
            if n == 0:
                m = 0
                spec = ""
            elif m > GPU_MILLI:
                m = GPU_MILLI
            names.append(name)
            cpu.append(uint_field(row[i_cpu], spath, line, "cpu_milli"))
            mem.append(uint_field(row[i_mem], spath, line, "memory_mib"))
            ngpu.append(n)
            milli.append(m)
            specs.append(spec)
            for idx, col, out in time_idx:
                text = row[idx]
                out.append(uint_field(text, spath, line, col) if text else -1)
    if not names:
        raise _no_rows(spath)
    creation, deletion, scheduled = (np.array(t, dtype=np.int64) if t else None for t in times)
    return PodTable(
        tuple(names),
        np.array(cpu, dtype=np.int64),
        np.array(mem, dtype=np.int64),
        np.array(ngpu, dtype=np.int64),
        np.array(milli, dtype=np.int64),
        tuple(specs),
        creation,
        deletion,
        scheduled,
        source_path=src,
    )


# ---------------------------------------------------------------------------------------------
# Registered workloads


def _pod_list_names() -> list[str]:
    from gpudefrag.data import registry

    return [e.name for e in registry.DATASETS if e.group == "openb" and e.name.startswith("openb_pod_list_")]


def workload_path(name: str) -> Path:
    """Verified local path of a registered openb pod list (:func:`workload_stem` names it);
    resolved through :func:`gpudefrag.data.store.resolve`."""
    from gpudefrag.data import store

    return store.resolve(f"openb/{workload_stem(name)}.csv")


def workload_stem(name: str) -> str:
    """The registered openb pod list ``name`` means: ``openb_pod_list_default``, ``default``,
    ``openb_pod_list_default.csv`` and ``openb/openb_pod_list_default.csv`` are one; an unknown
    name is a :class:`ConfigError` listing the known ones."""
    stem = str(name).strip().replace("\\", "/")
    if stem.startswith("openb/"):
        stem = stem[len("openb/") :]
    if stem.endswith(".csv"):
        stem = stem[:-4]
    if not stem.startswith("openb_pod_list_"):
        stem = "openb_pod_list_" + stem
    known = _pod_list_names()
    if stem not in known:
        short = ", ".join(k[len("openb_pod_list_") :] for k in known)
        raise ConfigError(
            f"unknown workload {name!r}; known openb pod lists: {short} "
            "(also accepted with the 'openb_pod_list_' prefix)"
        )
    return stem


def load_workload(name: str) -> PodTable:
    """:func:`load_pods` of :func:`workload_path` ``(name)``."""
    return load_pods(workload_path(name))


def load_node_list(name: str = NODE_LIST) -> NodeTable:
    """:func:`load_nodes` of a registered node list (default: the GPU-node list)."""
    from gpudefrag.data import store

    return load_nodes(store.resolve(name))
