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
from dataclasses import dataclass

import numpy as np

from gpudefrag.model.gpu_models import gpu_model_mask
from gpudefrag.model.pods import PodBatch

POPULARITY_THRESHOLD_PERCENT = 95


@dataclass(frozen=True)
class TypicalPods:
    """Typical pods as arrays, in the reference's list order (the order sums are taken in)."""

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    gpu_model_mask: np.ndarray
    freq: np.ndarray
    count: np.ndarray
    gpu_spec: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.freq)

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


def typical_pods(pods: PodBatch, threshold_percent: int = POPULARITY_THRESHOLD_PERCENT) -> TypicalPods:
    """Typical pods of an original (untuned) workload, as the module docstring states."""
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
        gpu_model_mask=np.array([gpu_model_mask(k[3]) for k, _ in kept], dtype=np.int64),
        freq=np.array(freqs, dtype=np.float64),
        count=np.array([c for _, c in kept], dtype=np.int64),
        gpu_spec=tuple(k[3] for k, _ in kept),
    )


def gpu_weighted(typical: TypicalPods) -> TypicalPods:
    """The same classes with frequencies proportional to count x GPU size (``num_gpu * gpu_milli``).

    Fragmentation measured against these counts a GPU that an 8-GPU class cannot use eight
    times as much as one a single-GPU class cannot use; CPU-only classes weigh nothing.
    """
    size = (typical.num_gpu * typical.gpu_milli).astype(np.float64)
    weight = typical.freq * size
    total = weight.sum()
    if total <= 0:
        raise ValueError("no GPU class among the typical pods")
    return TypicalPods(
        typical.cpu_milli,
        typical.gpu_milli,
        typical.num_gpu,
        typical.gpu_model_mask,
        weight / total,
        typical.count,
        typical.gpu_spec,
    )
