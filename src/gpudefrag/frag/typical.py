"""Typical pods: the target workload FGD measures fragmentation against (spec §4.1).

Rule (the reference's ``GetTypicalPods`` with the published configuration):

1. Key each pod of the *original* trace by ``(cpu_milli, gpu_milli, num_gpu, gpu_spec)``;
   memory is not part of the key; CPU-only pods are included.
2. Weight = pod count.  Sort by count descending; ties by the key descending
   (larger CPU first, then larger GPU milli, GPU count, constraint string).
3. Keep keys while the cumulative count is below ``95 * total / 100``: the smallest prefix
   whose cumulative count reaches 95 %.
4. Frequency = ``(count / total) / (cum / total)`` (renormalised over the kept prefix).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from gpudefrag.model.gpu_models import gpu_model_mask
from gpudefrag.model.pods import PodBatch

POPULARITY_THRESHOLD_PERCENT = 95

TypicalArrays: TypeAlias = tuple[
    NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]
]
"""``(cpu_milli, gpu_milli, num_gpu, gpu_model_mask, freq)`` of :class:`TypicalPods`: the trailing
``tp_*`` arguments of the fragmentation kernels."""


@dataclass(frozen=True)
class TypicalPods:
    """Typical pods as arrays, in the reference's list order (the order sums are taken in)."""

    cpu_milli: NDArray[np.int64]
    gpu_milli: NDArray[np.int64]
    num_gpu: NDArray[np.int64]
    gpu_model_mask: NDArray[np.int64]
    freq: NDArray[np.float64]
    count: NDArray[np.int64]
    gpu_spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.freq)

    @property
    def kernel_args(self) -> TypicalArrays:
        """The trailing ``tp_*`` arguments of the fragmentation kernels (:data:`TypicalArrays`)."""
        return (self.cpu_milli, self.gpu_milli, self.num_gpu, self.gpu_model_mask, self.freq)

    def requests(self) -> list[tuple[int, int, int, int]]:
        """The distinct requests ``(cpu_milli, num_gpu, gpu_milli, gpu_model_mask)`` of the
        typical pods, in list order (a CPU-only pod's GPU part is ``(0, 0, mask)``): what a
        score index can build ahead of the first pod of each."""
        seen: dict[tuple[int, int, int, int], None] = {}
        for cpu, num, milli, mask in zip(
            self.cpu_milli.tolist(),
            self.num_gpu.tolist(),
            self.gpu_milli.tolist(),
            self.gpu_model_mask.tolist(),
        ):
            seen.setdefault((cpu, num if milli > 0 else 0, milli, mask), None)
        return list(seen)

    def rows(self) -> list[tuple[int, int, int, str, int, float]]:
        """(cpu_milli, gpu_milli, num_gpu, gpu_spec, count, freq) per typical pod."""
        return [
            (
                int(self.cpu_milli[i]),
                int(self.gpu_milli[i]),
                int(self.num_gpu[i]),
                self.gpu_spec[i],
                int(self.count[i]),
                float(self.freq[i]),
            )
            for i in range(len(self))
        ]


def typical_pods(
    pods: PodBatch,
    threshold_percent: int = POPULARITY_THRESHOLD_PERCENT,
    mask_of: Callable[[str], int] = gpu_model_mask,
) -> TypicalPods:
    """Typical pods of an original (untuned) workload, as the module docstring states.
    ``mask_of`` turns a ``gpu_spec`` into a model bitmask (the openb models by default; the
    Kubernetes driver passes its registry of the models its nodes carry)."""
    counts: Counter[tuple[int, int, int, str]] = Counter(
        zip(pods.cpu_milli.tolist(), pods.gpu_milli.tolist(), pods.num_gpu.tolist(), pods.gpu_spec)
    )
    total = float(len(pods))
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    expected = threshold_percent * total / 100
    kept: list[tuple[tuple[int, int, int, str], int]] = []
    cum = 0.0
    for key, count in ordered:
        if cum >= expected:
            break
        cum += count
        kept.append((key, count))
    freqs = [count / total for _, count in kept]
    if len(kept) < len(ordered):
        freqs = [f / (cum / total) for f in freqs]
    return TypicalPods(
        cpu_milli=np.array([k[0] for k, _ in kept], dtype=np.int64),
        gpu_milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
        num_gpu=np.array([k[2] for k, _ in kept], dtype=np.int64),
        gpu_model_mask=np.array([mask_of(k[3]) for k, _ in kept], dtype=np.int64),
        freq=np.array(freqs, dtype=np.float64),
        count=np.array([c for _, c in kept], dtype=np.int64),
        gpu_spec=tuple(k[3] for k, _ in kept),
    )
