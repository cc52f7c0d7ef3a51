"""The published curve: columns 0..130 of ``analysis_allo_discrete.csv`` (spec §6.3).

Per event row: ``arrive = round(arrived_gpu_milli / total_gpus / 10, 0)`` and
``alloc = round(used_gpu_milli / total_gpus / 10, 2)`` (Python ``round``: exact, half to even).
Column ``x`` = the mean ``alloc`` over rows with ``arrive == x`` (else ``x-1 <= arrive <= x+1``,
else empty), as a numpy float64 mean (pairwise sum) rounded with numpy's rounding (scale by
100, ``rint``, unscale), as pandas does in the reference pipeline.
"""

from __future__ import annotations

import numpy as np

COLUMNS = 131


def _rows(milli: np.ndarray, total_gpus: int, digits: int) -> np.ndarray:
    return np.array([round(v / total_gpus / 10, digits) for v in milli.tolist()], dtype=np.float64)


def discretize(
    values_milli: np.ndarray, arrived_gpu_milli: np.ndarray, total_gpus: int, columns: int = COLUMNS
) -> np.ndarray:
    """Mean of ``round(value / total_gpus / 10, 2)`` per 1 % arrival bucket; NaN where empty."""
    return _bucket_means(
        _rows(values_milli, total_gpus, 2),
        _rows(arrived_gpu_milli, total_gpus, 0),
        columns,
        lambda mean: np.round(mean, 2),
    )


def discretize_frag(
    frag_milli: np.ndarray, arrived_gpu_milli: np.ndarray, total_gpus: int, columns: int = COLUMNS
) -> np.ndarray:
    """Fragmented GPU as % of capacity: ``round(100 * mean(frag_milli) / 1000 / total_gpus, 2)``
    per arrival bucket (``analysis_frag_discrete.csv``, spec §6.4)."""
    return _bucket_means(
        np.asarray(frag_milli, dtype=np.float64),
        _rows(arrived_gpu_milli, total_gpus, 0),
        columns,
        lambda mean: np.round(100 * mean / 1000 / total_gpus, 2),
    )


def _bucket_means(values: np.ndarray, arrive: np.ndarray, columns: int, finish) -> np.ndarray:
    out = np.full(columns, np.nan)
    for x in range(columns):
        sel = values[arrive == x]
        if sel.size == 0:
            sel = values[(arrive >= x - 1) & (arrive <= x + 1)]
        if sel.size:
            out[x] = finish(np.mean(sel))
    return out
