"""Dataset registry and store: which files exist, where they come from, and verified local paths.

See :mod:`gpudefrag.data.registry` (the pinned list), :mod:`gpudefrag.data.store`
(mirror / cache / download, SHA-256 checks) and :mod:`gpudefrag.data.catalog` (listing,
fetching and verifying every file).
"""

from gpudefrag.data.catalog import DatasetStatus, FetchResult, VerifyResult, fetch, list_datasets, verify
from gpudefrag.data.registry import DATASETS, DatasetEntry, get
from gpudefrag.data.store import CACHE_ENV, MIRROR_ENV, cache_dir, mirror_dir, resolve

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
