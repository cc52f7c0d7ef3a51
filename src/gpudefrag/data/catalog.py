"""What ``gpudefrag data`` shows and does over the registry (:mod:`gpudefrag.data.registry`) and
the store (:mod:`gpudefrag.data.store`): where every file is, fetching (download and verify),
and re-checking checksums."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gpudefrag.data import registry, store
from gpudefrag.data.registry import DatasetEntry
from gpudefrag.errors import DataError

__all__ = ["DatasetStatus", "FetchResult", "VerifyResult", "fetch", "list_datasets", "verify"]


@dataclass(frozen=True)
class DatasetStatus:
    """One row of :func:`list_datasets`: status is ``in mirror``, ``cached`` or ``missing``
    (existence only; no hashing)."""

    entry: DatasetEntry
    status: str
    path: Path | None


def list_datasets() -> list[DatasetStatus]:
    """Every registered file with where it currently is."""
    out = []
    for entry in registry.DATASETS:
        path, status = store.locate(entry)
        out.append(DatasetStatus(entry, status, path))
    return out


@dataclass(frozen=True)
class FetchResult:
    """Outcome of fetching one file. ``status``: ``in mirror``, ``cached``, ``downloaded``,
    ``extracted`` (from its registered archive), ``skipped`` (mirror-only file, not requested by
    name) or ``failed`` (see ``message``)."""

    entry: DatasetEntry
    status: str
    path: Path | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "failed"


def fetch(
    names: Iterable[str] | str | None = None,
    progress: bool = True,
    *,
    on_result: Callable[[FetchResult], None] | None = None,
) -> list[FetchResult]:
    """Make the named files (all if ``names`` is None) available locally and verified.

    Files already in the mirror or cache are checked, others downloaded into the cache (a tqdm
    progress bar on stderr when ``progress`` and tqdm is installed). When fetching everything,
    mirror-only files that are absent are ``skipped``; named explicitly they fail. Every file is
    attempted; ``on_result`` is called after each. Raises :class:`DataError` at the end, listing
    the failures, if any failed; otherwise returns the results.
    """
    fetch_all = names is None
    entries = registry.select(None if names is None else ([names] if isinstance(names, str) else list(names)))
    results: list[FetchResult] = []
    for entry in entries:
        if fetch_all and entry.url is None and entry.archive is None and store.locate(entry)[0] is None:
            result = FetchResult(
                entry, "skipped", None, f"mirror only, no download URL; set {store.MIRROR_ENV} to get it"
            )
        else:
            try:
                path, status = store.resolve_entry(entry, progress)
                result = FetchResult(entry, status, path.absolute())
            except DataError as exc:
                result = FetchResult(entry, "failed", None, str(exc))
        results.append(result)
        if on_result is not None:
            on_result(result)
    failed = [r for r in results if not r.ok]
    if failed:
        lines = "; ".join(f"{r.entry.name}: {r.message}" for r in failed)
        raise DataError(f"{len(failed)} of {len(results)} dataset(s) could not be fetched: {lines}")
    return results


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of verifying one file. ``status``: ``ok``, ``mismatch`` or ``missing``;
    ``location``: ``in mirror``/``cached``/``missing``."""

    entry: DatasetEntry
    status: str
    location: str
    path: Path | None
    actual_sha256: str | None = None
    actual_size: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        e = self.entry
        if self.status == "ok":
            return f"ok        {e.name} ({self.location}: {self.path})"
        if self.status == "missing":
            return f"missing   {e.name} ({e.relpath} not in mirror or cache)"
        return (
            f"MISMATCH  {e.name} ({self.location}: {self.path}): expected sha256 {e.sha256} "
            f"({e.size} bytes), got sha256 {self.actual_sha256} ({self.actual_size} bytes)"
        )


def verify(names: Iterable[str] | str | None = None) -> list[VerifyResult]:
    """Re-hash the named files (all if None) where :func:`resolve` would find them; never
    downloads. Missing files are reported as ``missing``, not raised."""
    entries = registry.select(None if names is None else ([names] if isinstance(names, str) else list(names)))
    results = []
    for entry in entries:
        path, location = store.locate(entry)
        if path is None:
            results.append(VerifyResult(entry, "missing", location, None))
            continue
        actual, size = store.digest(path, use_cache=False)
        status = "ok" if actual == entry.sha256 else "mismatch"
        results.append(VerifyResult(entry, status, location, path.absolute(), actual, size))
    return results
