"""Find, download and verify the registered dataset files.

Lookup order for :func:`resolve`:

1. the mirror folder named by the ``GPUDEFRAG_MIRROR`` environment variable (laid out as
   ``openb/``, ``fgd-published/``, ``go-math-rand/``, ``microsoft-itp-elasticflow/``,
   ``philly-pollux/``, e.g. a copy of ``shared/data``);
2. the user cache, ``GPUDEFRAG_CACHE`` or ``~/.cache/gpudefrag`` (same layout);
3. a download from the entry's pinned upstream URL into the cache, or, for a file that upstream
   ships only inside an archive (``entry.archive``/``entry.member``), an extraction of that member
   from the registered archive (itself resolved by these same three steps) into the cache. The
   bytes go to a temporary file next to the target and are renamed into place only after the size
   and SHA-256 match, so an interrupted or bad download or extraction leaves nothing behind.

Every file handed out is checked against the registry's SHA-256. The result is remembered per
process by ``(path, size, mtime)``, so repeated resolves of an unchanged file do not re-hash it.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from gpudefrag.data import registry
from gpudefrag.data.registry import DatasetEntry
from gpudefrag.errors import DataError

__all__ = [
    "CACHE_ENV",
    "DOWNLOAD_TIMEOUT_S",
    "MIRROR_ENV",
    "cache_dir",
    "clear_verify_cache",
    "digest",
    "locate",
    "mirror_dir",
    "resolve",
    "resolve_entry",
]

MIRROR_ENV = "GPUDEFRAG_MIRROR"
CACHE_ENV = "GPUDEFRAG_CACHE"
DEFAULT_CACHE = Path("~/.cache/gpudefrag")
DOWNLOAD_TIMEOUT_S = 60.0
_CHUNK = 1 << 16

STATUS_MIRROR = "in mirror"
STATUS_CACHED = "cached"
STATUS_MISSING = "missing"

_LAYOUT = ", ".join(f"{group}/" for group in registry.GROUPS)
_HOWTO = (
    f"Set {MIRROR_ENV} to a folder laid out as {_LAYOUT} "
    "(for example a copy of shared/data) or run `gpudefrag data fetch`."
)

# (absolute path, size, mtime_ns) -> sha256 hex digest computed in this process.
_VERIFIED: dict[tuple[str, int, int], str] = {}

# Indirection so tests can replace the network without touching urllib.
_urlopen = urllib.request.urlopen


def clear_verify_cache() -> None:
    """Forget the per-process checksum results (the next resolve re-hashes)."""
    _VERIFIED.clear()


def mirror_dir() -> Path | None:
    """The mirror folder from ``GPUDEFRAG_MIRROR``, or ``None`` if unset/empty."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """The user cache folder: ``GPUDEFRAG_CACHE`` or ``~/.cache/gpudefrag`` (not created here)."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return (Path(value) if value else DEFAULT_CACHE).expanduser()


def _mirror_path(entry: DatasetEntry) -> Path | None:
    root = mirror_dir()
    return None if root is None else root / entry.relpath


def _cache_path(entry: DatasetEntry) -> Path:
    return cache_dir() / entry.relpath


def locate(entry: DatasetEntry) -> tuple[Path | None, str]:
    """Where the file is now (mirror first, then cache) and its status; no hashing."""
    mpath = _mirror_path(entry)
    if mpath is not None and mpath.is_file():
        return mpath, STATUS_MIRROR
    cpath = _cache_path(entry)
    if cpath.is_file():
        return cpath, STATUS_CACHED
    return None, STATUS_MISSING


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def digest(path: Path, *, use_cache: bool = True) -> tuple[str, int]:
    """(sha256, size) of a file, remembered per process by (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if use_cache and key in _VERIFIED:
        return _VERIFIED[key], st.st_size
    digest = _sha256_file(path)
    _VERIFIED[key] = digest
    return digest, st.st_size


def _mismatch_error(entry: DatasetEntry, path: Path, actual: str, size: int) -> DataError:
    hint = (
        "delete it and run `gpudefrag data fetch " + entry.name + "`"
        if path == _cache_path(entry)
        else "replace it with the registered file"
    )
    return DataError(
        f"checksum mismatch for {entry.relpath} ({path}): expected sha256 {entry.sha256}, "
        f"got sha256 {actual} (expected {entry.size} bytes, found {size}); {hint}."
    )


def _check(entry: DatasetEntry, path: Path) -> Path:
    actual, size = digest(path)
    if actual != entry.sha256:
        raise _mismatch_error(entry, path, actual, size)
    return path


def _missing_error(entry: DatasetEntry, reason: str) -> DataError:
    mpath = _mirror_path(entry)
    where = f"not in the mirror ({mpath})" if mpath is not None else f"{MIRROR_ENV} is not set"
    howto = (
        _HOWTO
        if entry.url is not None or entry.archive is not None
        else (
            f"Set {MIRROR_ENV} to a folder laid out as {_LAYOUT} "
            f"(for example a copy of shared/data) that contains {entry.relpath}."
        )
    )
    return DataError(
        f"dataset {entry.relpath} is unavailable: {where}, not in the cache "
        f"({_cache_path(entry)}), and {reason}. {howto}"
    )


class _ProgressBar(Protocol):
    """What the download uses of a ``tqdm`` bar."""

    def update(self, n: int) -> object: ...

    def close(self) -> None: ...


def _progress_bar(entry: DatasetEntry, enabled: bool) -> _ProgressBar | None:
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # progress bars are optional
        return None
    return tqdm(
        total=entry.size,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=entry.relpath,
        file=sys.stderr,
        leave=False,
    )


def _download_howto(entry: DatasetEntry) -> str:
    return (
        f"Check the network and retry `gpudefrag data fetch {entry.name}`, or set "
        f"{MIRROR_ENV} to a folder laid out as {_LAYOUT} "
        "(for example a copy of shared/data)."
    )


class _Source(Protocol):
    """What the copy loop uses of an HTTP response or an archive member."""

    def read(self, n: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class _Origin:
    """Where the bytes of a cache file come from, for :func:`_copy_verified`'s messages."""

    open: Callable[[], AbstractContextManager[_Source]]
    verb: str  # "download" / "extract"
    source: str  # "from <url>" / "from <archive> member <name>"
    errors: tuple[type[BaseException], ...]  # failures of ``open``/``read`` to report as DataError
    howto: str


def _download(entry: DatasetEntry, dest: Path, progress: bool) -> Path:
    """Download ``entry.url`` to ``dest`` atomically; DataError on any failure."""
    url = entry.url
    assert url is not None
    origin = _Origin(
        open=lambda: _urlopen(url, timeout=DOWNLOAD_TIMEOUT_S),
        verb="download",
        source=f"from {url}",
        errors=(urllib.error.URLError, http.client.HTTPException, OSError, ValueError),
        howto=_download_howto(entry),
    )
    return _copy_verified(entry, dest, origin, progress)


@contextmanager
def _open_member(archive: DatasetEntry, archive_path: Path, member: str) -> Iterator[IO[bytes]]:
    with tarfile.open(archive_path, "r:*") as tar:
        try:
            info = tar.getmember(member)
        except KeyError:
            raise DataError(f"archive {archive.relpath} ({archive_path}) has no member {member!r}") from None
        fh = tar.extractfile(info) if info.isfile() else None
        if fh is None:
            raise DataError(f"member {member!r} of archive {archive.relpath} is not a regular file")
        with fh:
            yield fh


def _extract(entry: DatasetEntry, dest: Path, progress: bool) -> Path:
    """Extract ``entry.member`` from the registered archive ``entry.archive`` (found in the
    mirror or cache, or downloaded and verified first) to ``dest`` atomically, verifying the
    member's size and SHA-256; DataError on any failure."""
    assert entry.archive is not None and entry.member is not None
    archive = registry.get(entry.archive)
    try:
        archive_path, _ = resolve_entry(archive, progress)
    except DataError as exc:
        raise _missing_error(entry, f"its archive {archive.relpath} is unavailable: {exc}") from exc
    member = entry.member
    origin = _Origin(
        open=lambda: _open_member(archive, archive_path, member),
        verb="extract",
        source=f"from {archive.relpath} member {member}",
        errors=(tarfile.TarError, OSError, EOFError, zlib.error),
        howto=(
            f"Retry `gpudefrag data fetch {entry.name}` (it re-checks the archive {archive.name}), "
            f"or set {MIRROR_ENV} to a folder laid out as {_LAYOUT} (for example a copy of "
            "shared/data)."
        ),
    )
    return _copy_verified(entry, dest, origin, progress)


def _copy_verified(entry: DatasetEntry, dest: Path, origin: _Origin, progress: bool) -> Path:
    """Copy the bytes ``origin`` opens to ``dest`` atomically; DataError on any failure.

    The bytes go to ``.<name>.<random>.part`` next to ``dest``; it is renamed onto ``dest`` only
    after the size and SHA-256 match, and removed on any error (including KeyboardInterrupt).
    """
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    except OSError as exc:
        raise DataError(
            f"cannot write to the cache folder {dest.parent}: {exc}. "
            f"Set {CACHE_ENV} to a writable folder or {MIRROR_ENV} to a mirror."
        ) from exc
    tmp = Path(tmp_name)
    bar = None
    try:
        hasher = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out, origin.open() as src:
                bar = _progress_bar(entry, progress)
                while True:
                    chunk = src.read(_CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > entry.size:
                        raise DataError(
                            f"{origin.verb} of {entry.relpath} {origin.source} is larger than the "
                            f"registered {entry.size} bytes; aborted, nothing was saved. " + origin.howto
                        )
                    hasher.update(chunk)
                    out.write(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
        except origin.errors as exc:
            raise DataError(
                f"cannot {origin.verb} {entry.relpath} {origin.source}: {exc}. " + origin.howto
            ) from exc
        actual = hasher.hexdigest()
        if actual != entry.sha256:
            past = "downloaded" if origin.verb == "download" else "extracted"
            raise DataError(
                f"checksum mismatch for {entry.relpath} {past} {origin.source}: expected "
                f"sha256 {entry.sha256}, got sha256 {actual} (expected {entry.size} bytes, "
                f"got {size}); nothing was saved. " + origin.howto
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    st = dest.stat()
    _VERIFIED[(str(dest.resolve()), st.st_size, st.st_mtime_ns)] = entry.sha256
    return dest


def resolve_entry(entry: DatasetEntry, progress: bool) -> tuple[Path, str]:
    path, status = locate(entry)
    if path is not None:
        return _check(entry, path), status
    if entry.url is not None:
        return _download(entry, _cache_path(entry), progress), "downloaded"
    if entry.archive is not None and entry.member is not None:
        return _extract(entry, _cache_path(entry), progress), "extracted"
    raise _missing_error(entry, f"it has no download URL ({entry.note or 'mirror only'})")


def resolve(relpath: str, *, progress: bool = False) -> Path:
    """Absolute path of a verified registered file (a name or a mirror-relative path).

    Looks in ``GPUDEFRAG_MIRROR``, then the cache, then downloads into the cache (or extracts
    the file from its registered archive into the cache).
    Raises :class:`ConfigError` for an unknown name and :class:`DataError` if the file is missing
    and cannot be downloaded, or if its SHA-256 does not match.
    """
    path, _ = resolve_entry(registry.get(relpath), progress)
    return path.absolute()
