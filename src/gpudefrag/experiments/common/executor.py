"""Where a sweep's runs execute: in this process, on a local process pool, or on a Dask cluster.

:class:`RunExecutor` maps a picklable module-level function over run specs and yields
``(spec, result)`` pairs as runs complete, so the order is the completion order: a caller that
needs an order indexes or sorts the results by spec.  The backend is chosen once:

* ``jobs == 1``: in this process, one spec after another (in the order given);
* otherwise, without ``dask_address``: a local ``ProcessPoolExecutor`` of ``jobs`` workers
  (default: all cores), started per :meth:`RunExecutor.map` call and forked, so whatever the
  caller loaded or compiled before is shared with the workers;
* ``dask_address``: a ``distributed.Client`` connected to an existing scheduler (this package
  never starts a cluster).  The workers import ``gpudefrag`` themselves and must see the same
  data (``GPUDEFRAG_MIRROR``).  ``distributed`` is imported only here, so the package works
  without it; a missing package, an unreachable scheduler (within ``connect_timeout_s``) or a
  scheduler without workers is a :class:`~gpudefrag.errors.ConfigError` (exit 2).

A run is a pure function of its spec, so every backend gives the same results.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from gpudefrag.errors import ConfigError

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["DEFAULT_CONNECT_TIMEOUT_S", "RunExecutor"]

S = TypeVar("S")
R = TypeVar("R")

DEFAULT_CONNECT_TIMEOUT_S = 10.0
"""How long to wait for the Dask scheduler to answer, and then for a first worker."""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class RunExecutor:
    """Runs a sweep's specs in-process (``jobs == 1``), on a local pool of ``jobs`` processes
    (default; ``None`` or 0: all cores) or on the existing Dask scheduler at ``dask_address``
    (then ``jobs`` is not used; ``connect_timeout_s`` defaults to
    :data:`DEFAULT_CONNECT_TIMEOUT_S`).

    Use as a context manager (or call :meth:`close`): it holds the Dask connection.
    """

    def __init__(
        self,
        jobs: int | None = None,
        dask_address: str | None = None,
        connect_timeout_s: float | None = None,
    ) -> None:
        if jobs is not None and jobs < 0:
            raise ConfigError(f"jobs must be >= 1 (or 0 for all cores), got {jobs}")
        self.jobs = jobs or os.cpu_count() or 1
        self.dask_address = dask_address
        self._client: Client | None = None
        self._dask_label = ""
        if dask_address is not None:
            timeout_s = DEFAULT_CONNECT_TIMEOUT_S if connect_timeout_s is None else connect_timeout_s
            self._client, self._dask_label = _connect(dask_address, timeout_s)

    @property
    def local(self) -> bool:
        """True when runs execute on this machine (in-process or forked from this process)."""
        return self.dask_address is None

    def describe(self) -> str:
        """One line for reports: ``local process pool, 2 workers``, ``in-process, serial`` or
        ``dask tcp://127.0.0.1:8786, 2 workers`` (worker count when connected)."""
        if self._dask_label:
            return self._dask_label
        if self.jobs == 1:
            return "in-process, serial"
        return f"local process pool, {self.jobs} workers"

    def map(self, fn: Callable[[S], R], specs: Sequence[S]) -> Iterator[tuple[S, R]]:
        """``(spec, fn(spec))`` for every spec, as each completes.  A run's exception is raised
        here; the runs not started yet are then cancelled."""
        if self.dask_address is not None:
            if self._client is None:
                raise ConfigError(f"the connection to the Dask scheduler at {self.dask_address!r} is closed")
            return _map_dask(self._client, fn, specs)
        if self.jobs == 1 or len(specs) <= 1:
            return ((spec, fn(spec)) for spec in specs)
        return _map_pool(min(self.jobs, len(specs)), fn, specs)

    def run_all(self, fn: Callable[[S], R], specs: Sequence[S], desc: str, progress: bool = True) -> list[R]:
        """``fn(spec)`` for every spec (:meth:`map`), returned in the order of ``specs``, with a progress bar named ``desc`` on a terminal (none when
        ``progress`` is False)."""
        from tqdm import tqdm

        out: dict[int, R] = {}
        numbered = list(enumerate(specs))
        with tqdm(total=len(specs), desc=desc, unit="run", disable=None if progress else True) as bar:
            for (i, _), result in self.map(partial(_numbered, fn), numbered):
                out[i] = result
                bar.update()
        if len(out) != len(specs):
            raise RuntimeError(f"{desc}: {len(specs) - len(out)} of {len(specs)} runs returned nothing")
        return [out[i] for i in range(len(specs))]

    def close(self) -> None:
        """Drop the Dask connection (the cluster keeps running)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _map_pool(workers: int, fn: Callable[[S], R], specs: Sequence[S]) -> Iterator[tuple[S, R]]:
    pool = ProcessPoolExecutor(max_workers=workers)
    futures: dict[Future[R], S] = {}
    try:
        futures = {pool.submit(fn, spec): spec for spec in specs}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _map_dask(client: Client, fn: Callable[[S], R], specs: Sequence[S]) -> Iterator[tuple[S, R]]:
    from distributed import as_completed as dask_as_completed

    # pure=False: every spec is its own task (no hashing of large configs, no reuse of results).
    futures: dict[Any, S] = {client.submit(fn, spec, pure=False): spec for spec in specs}
    try:
        for fut in dask_as_completed(list(futures), loop=client.loop):
            yield futures[fut], fut.result()
    finally:
        client.cancel([f for f in futures if not f.done()])


def _connect(address: str, timeout_s: float) -> tuple[Client, str]:
    """A client to the scheduler at ``address`` and its one-line description, or ConfigError."""
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("--dask needs the 'distributed' package: pip install 'gpudefrag[dask]'") from None
    try:
        client = Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"cannot connect to the Dask scheduler at {address!r} (timeout {timeout_s:g} s): {_one_line(exc)}"
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except (OSError, TimeoutError) as exc:
        client.close()
        raise ConfigError(
            f"the Dask scheduler at {address!r} has no workers (waited {timeout_s:g} s): {_one_line(exc)}"
        ) from None
    threads = client.nthreads()
    workers, total = len(threads), sum(threads.values())
    label = f"dask {client.scheduler.address}, {workers} workers"
    if total != workers:
        label += f" ({total} threads)"
    return client, label


def _numbered(fn: Callable[[S], R], item: tuple[int, S]) -> R:
    """``fn`` of a numbered spec (:meth:`RunExecutor.run_all` keeps the numbers)."""
    return fn(item[1])
