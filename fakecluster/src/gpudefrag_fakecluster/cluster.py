"""A whole fake cluster in one object: store, API server (HTTP on 127.0.0.1), kubelet, job
controller, auditor, and a kubeconfig pointing at it, all on one scaled clock."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpudefrag_fakecluster.apiserver import FakeApiServer
from gpudefrag_fakecluster.audit import Auditor
from gpudefrag_fakecluster.clock import ScaledClock
from gpudefrag_fakecluster.kubelet import FakeKubelet
from gpudefrag_fakecluster.store import Store
from gpudefrag_fakecluster.workloads import JobController, Replayer, WorkItem


class FakeCluster:
    """Start with :meth:`start` (or ``with``); nodes are created by the caller (``make_nodes``
    or ``node_manifest``) through :attr:`store`."""

    def __init__(
        self, scale: float = 1.0, seed: int = 0, workdir: Path | None = None, heartbeat_s: float = 60.0
    ) -> None:
        self.clock = ScaledClock(scale)
        self.store = Store(clock=self.clock.now_s, seed=seed)
        self.auditor = Auditor(self.store)
        self.server = FakeApiServer(self.store)
        self.kubelet = FakeKubelet(self.store, self.clock, heartbeat_s=heartbeat_s)
        self.jobs = JobController(self.store, self.clock)
        self._tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="gpudefrag-fake-")
        self.workdir = workdir if workdir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.kubeconfig = self.workdir / "kubeconfig.yaml"

    def start(self) -> FakeCluster:
        self.server.start()
        self.server.write_kubeconfig(self.kubeconfig)
        self.kubelet.start()
        self.jobs.start()
        return self

    def stop(self) -> None:
        self.jobs.stop()
        self.kubelet.stop()
        self.server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def replay(self, items: Iterable[WorkItem], progress: bool = False) -> Replayer:
        r = Replayer(self.store, self.clock, items, self.jobs, progress=progress)
        r.start()
        return r

    def pods(self) -> list[dict[str, Any]]:
        return self.store.list("pods")[0]

    def wait(self, cond: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> bool:
        """Wait (wall-clock) until ``cond()`` holds; returns whether it did."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if cond():
                return True
            time.sleep(poll_s)
        return cond()
