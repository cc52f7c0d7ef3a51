"""FGD's published per-run curves (``analysis_allo_discrete.csv``), keyed by run."""

from __future__ import annotations

import csv
from functools import lru_cache

import numpy as np

from gpudefrag.data import store
from gpudefrag.errors import ConfigError, InputError

ALLOC_FILE = "fgd-published/analysis_allo_discrete.csv"
FRAG_FILE = "fgd-published/analysis_frag_discrete.csv"
COLUMNS = 131
_KEY_COLUMNS = {
    ALLOC_FILE: ["workload", "sc_policy", "tune", "seed", "total_gpus"],
    FRAG_FILE: ["workload", "sc_policy", "tune", "seed"],
}


@lru_cache(maxsize=2)
def published_curves(relpath: str = ALLOC_FILE) -> dict[tuple[str, str, int], np.ndarray]:
    """``{(workload, policy_label, seed): curve[0..130]}``; an empty cell is NaN.

    ``ALLOC_FILE``: allocated GPU % per arrival bucket; ``FRAG_FILE``: fragmented GPU %.
    """
    if relpath not in _KEY_COLUMNS:
        raise ConfigError(f"not a published-curves file: {relpath!r}; known: {', '.join(_KEY_COLUMNS)}")
    path = store.resolve(relpath)
    out: dict[tuple[str, str, int], np.ndarray] = {}
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        keys = _KEY_COLUMNS[relpath]
        expected = keys + [str(i) for i in range(COLUMNS)]
        if header != expected:
            raise InputError(path, f"unexpected header (want {','.join(keys)},0..130)", line=1)
        for line, row in enumerate(reader, start=2):
            if len(row) != len(expected):
                raise InputError(path, f"expected {len(expected)} fields, found {len(row)}", line=line)
            try:
                seed = int(row[3])
                curve = np.array([float(v) if v else np.nan for v in row[len(keys) :]], dtype=np.float64)
            except ValueError as exc:
                raise InputError(path, f"not a number ({exc})", line=line) from None
            out[(row[0], row[1], seed)] = curve
    return out
