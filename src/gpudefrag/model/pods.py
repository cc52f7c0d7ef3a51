"""Pods as values (``PodSpec``) and as arrays (``PodBatch``), in the units of the openb columns.

A pod asks for ``cpu_milli`` CPU, ``memory_mib`` memory and ``num_gpu`` GPUs of ``gpu_milli``
each (1000 = a whole GPU).  Shapes the placement code understands:

* CPU-only: ``num_gpu == 0`` and ``gpu_milli == 0``;
* sharing: ``num_gpu == 1`` and ``0 < gpu_milli < 1000`` (may share a GPU with other pods);
* exclusive: ``gpu_milli == 1000`` and ``num_gpu >= 1`` (whole GPUs).

Other combinations (a multi-GPU pod asking part of each GPU, or GPUs with zero milli) do not occur
in openb and are rejected by :func:`check_pod_shape`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpudefrag.model.constants import ANY_GPU_MODEL, GPU_MILLI_PER_GPU, MAX_GPUS_PER_NODE

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class PodSpec:
    """One pod's request.  ``gpu_model_mask`` is a bitmask over GPU model ids (-1 = any)."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_model_mask: int = ANY_GPU_MODEL
    name: str = ""

    @property
    def total_gpu_milli(self) -> int:
        """GPU milli the pod occupies in total (per-GPU milli times GPU count)."""
        return self.gpu_milli * self.num_gpu

    @property
    def is_sharing(self) -> bool:
        """A single fractional GPU: may land on a partly used GPU."""
        return self.num_gpu == 1 and 0 < self.gpu_milli < GPU_MILLI_PER_GPU

    @property
    def is_gpu(self) -> bool:
        return self.gpu_milli > 0

    @property
    def key(self) -> tuple[int, int, int, int]:
        """What every score depends on: (cpu_milli, gpu_milli, num_gpu, gpu_model_mask)."""
        return (self.cpu_milli, self.gpu_milli, self.num_gpu, self.gpu_model_mask)

    @property
    def fit_key(self) -> tuple[int, int, int, int, int]:
        """What fitting a node depends on: (cpu_milli, memory_mib, num_gpu, gpu_milli,
        gpu_model_mask).  Pods with equal keys fit exactly the same nodes."""
        return (self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.gpu_model_mask)


def check_pod_shape(cpu_milli: int, memory_mib: int, num_gpu: int, gpu_milli: int) -> tuple[str, str] | None:
    """``(column, reason)`` when a request is not a supported shape, ``None`` when it is."""
    for column, value in (
        ("cpu_milli", cpu_milli),
        ("memory_mib", memory_mib),
        ("num_gpu", num_gpu),
        ("gpu_milli", gpu_milli),
    ):
        if value < 0:
            return column, f"{column} must be non-negative, got {value}"
    if num_gpu > MAX_GPUS_PER_NODE:
        return "num_gpu", f"num_gpu {num_gpu} exceeds {MAX_GPUS_PER_NODE} GPUs per node"
    if num_gpu == 0 and gpu_milli != 0:
        return "gpu_milli", "a CPU-only pod (num_gpu 0) must have gpu_milli 0"
    if num_gpu > 0 and gpu_milli == 0:
        return "gpu_milli", "a GPU pod must ask for gpu_milli > 0"
    if gpu_milli > GPU_MILLI_PER_GPU:
        return "gpu_milli", f"gpu_milli {gpu_milli} exceeds one GPU ({GPU_MILLI_PER_GPU})"
    if num_gpu > 1 and gpu_milli != GPU_MILLI_PER_GPU:
        return "gpu_milli", "a multi-GPU pod must ask for whole GPUs (gpu_milli 1000)"
    return None


@dataclass(frozen=True)
class PodBatch:
    """Many pods as parallel arrays (int64), plus names and constraint strings."""

    names: tuple[str, ...]
    cpu_milli: IntArray
    memory_mib: IntArray
    num_gpu: IntArray
    gpu_milli: IntArray
    gpu_model_mask: IntArray
    gpu_spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    def requests(self) -> list[tuple[int, int, int, int, int]]:
        """The distinct requests of the pods (their ``fit_key``), in first-seen order."""
        rows = zip(
            self.cpu_milli.tolist(),
            self.memory_mib.tolist(),
            self.num_gpu.tolist(),
            self.gpu_milli.tolist(),
            self.gpu_model_mask.tolist(),
        )
        return list(dict.fromkeys(rows))

    def first_of_request(self, start: int, count: int) -> npt.NDArray[np.bool_]:
        """For pods ``start .. start + count - 1``: whether each is the first among them with its
        request (``fit_key``); ValueError when fewer than ``count`` pods are left."""
        if start + count > len(self):
            raise ValueError(
                f"only {len(self) - start} pods are left after {start} for {count}: ask for fewer"
            )
        seen: set[tuple[int, ...]] = set()
        out = np.zeros(count, dtype=bool)
        for k in range(count):
            key = self.pod(start + k).fit_key
            if key not in seen:
                seen.add(key)
                out[k] = True
        return out

    def pod(self, i: int) -> PodSpec:
        """The i-th pod as a value."""
        return PodSpec(
            int(self.cpu_milli[i]),
            int(self.memory_mib[i]),
            int(self.num_gpu[i]),
            int(self.gpu_milli[i]),
            int(self.gpu_model_mask[i]),
            self.names[i],
        )

    @property
    def total_gpu_milli(self) -> IntArray:
        total: IntArray = self.gpu_milli * self.num_gpu
        return total

    def take(self, order: np.ndarray | list[int], names: list[str] | None = None) -> PodBatch:
        """Pods in the given index order (indices may repeat: clones), optionally renamed."""
        idx = np.asarray(order, dtype=np.int64)
        return PodBatch(
            names=tuple(names) if names is not None else tuple(self.names[i] for i in idx),
            cpu_milli=self.cpu_milli[idx],
            memory_mib=self.memory_mib[idx],
            num_gpu=self.num_gpu[idx],
            gpu_milli=self.gpu_milli[idx],
            gpu_model_mask=self.gpu_model_mask[idx],
            gpu_spec=tuple(self.gpu_spec[i] for i in idx),
        )


def pod_batch(pods: list[PodSpec], gpu_specs: list[str] | None = None) -> PodBatch:
    """Build a batch from values (used by tests and small examples)."""
    return PodBatch(
        names=tuple(p.name or f"pod-{i}" for i, p in enumerate(pods)),
        cpu_milli=np.array([p.cpu_milli for p in pods], dtype=np.int64),
        memory_mib=np.array([p.memory_mib for p in pods], dtype=np.int64),
        num_gpu=np.array([p.num_gpu for p in pods], dtype=np.int64),
        gpu_milli=np.array([p.gpu_milli for p in pods], dtype=np.int64),
        gpu_model_mask=np.array([p.gpu_model_mask for p in pods], dtype=np.int64),
        gpu_spec=tuple(gpu_specs) if gpu_specs is not None else tuple("" for _ in pods),
    )
