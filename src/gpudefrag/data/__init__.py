"""Dataset registry and store: which files exist, where they come from, and verified local paths.

See :mod:`gpudefrag.data.registry` (the pinned list) and :mod:`gpudefrag.data.store`
(mirror / cache / download, SHA-256 checks).
"""

from gpudefrag.data.registry import DATASETS, DatasetEntry, get
from gpudefrag.data.store import (
    CACHE_ENV,
    MIRROR_ENV,
    DatasetStatus,
    FetchResult,
    VerifyResult,
    cache_dir,
    fetch,
    list_datasets,
    mirror_dir,
    resolve,
    verify,
)

__all__ = [
    "CACHE_ENV",
    "DATASETS",
    "MIRROR_ENV",
    "DatasetEntry",
    "DatasetStatus",
    "FetchResult",
    "VerifyResult",
    "cache_dir",
    "fetch",
    "get",
    "list_datasets",
    "mirror_dir",
    "resolve",
    "verify",
]
