"""Node lifetimes: how long each node is expected to stay busy, for breaking FGD's score ties.

FGD's node score is an integer (a truncated sigmoid of the fragmentation change), so many nodes
often share the best score; FGD then takes the lowest tie rank, an arbitrary order.  Among those
equally good nodes, the batch placer can instead prefer the node that is expected to stay busy
longest anyway: a pod added there extends the node's busy time the least, and the nodes whose
pods end soon are left to empty, so whole nodes come free for pods that need them.

Rule: a node's *busy time* is the largest expected further run time
(:meth:`~gpudefrag.model.port.RuntimeEstimator.remaining_all_s`) of the pods running on it
(:func:`busy_until_s`), 0 on a node that runs none.  :meth:`NodeLifetimes.bind` records a pod
placed during the cycle: the node's busy time becomes at least that pod's expected run time.
Busy times are computed on first use, node by node (most cycles break few ties), and kept for
the cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

from gpudefrag.model.port import PendingPod, RunningPod, RuntimeEstimator

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def busy_until_s(
    nodes: Sequence[int],
    running_on: Callable[[int], Sequence[RunningPod]],
    runtimes: RuntimeEstimator,
    now_s: float,
) -> FloatArray:
    """The busy time (s) of each of ``nodes`` (module rule), aligned with them: the largest
    expected further run time of the pods ``running_on(node)``, 0 where there are none."""
    pods: list[RunningPod] = []
    owner: list[int] = []
    for k, node in enumerate(nodes):
        on = running_on(node)
        pods.extend(on)
        owner.extend([k] * len(on))
    out = np.zeros(len(nodes), dtype=np.float64)
    if pods:
        remaining = np.maximum(runtimes.remaining_all_s(pods, now_s), 0.0)
        np.maximum.at(out, np.asarray(owner, dtype=np.int64), remaining)
    return out


class NodeLifetimes:
    """Every node's busy time (module docstring): ``busy_of(nodes)`` gives those of several
    nodes at once, asked on first use of each node; pods placed during the cycle raise them."""

    def __init__(
        self,
        busy_of: Callable[[list[int]], FloatArray],
        known: dict[int, float] | None = None,
        floor: dict[int, float] | None = None,
    ) -> None:
        self._busy_of = busy_of
        self._known: dict[int, float] = {} if known is None else known
        self._floor: dict[int, float] = {} if floor is None else floor

    def of_nodes(self, nodes: IntArray) -> FloatArray:
        """The busy times of ``nodes``, as an array aligned with them."""
        known, floor = self._known, self._floor
        ids: list[int] = nodes.tolist()
        missing = [n for n in ids if n not in known]
        if missing:
            for n, b in zip(missing, self._busy_of(missing).tolist()):
                known[n] = max(b, floor.get(n, 0.0))
        return np.array([known[n] for n in ids], dtype=np.float64)

    def copy(self) -> NodeLifetimes:
        """An independent copy (the source of busy times is shared; it never changes)."""
        return NodeLifetimes(self._busy_of, dict(self._known), dict(self._floor))

    def bind(self, node: int, run_s: float) -> None:
        """A pod expected to run ``run_s`` seconds was placed on ``node``: its busy time is at
        least ``run_s`` from now on."""
        if run_s > self._floor.get(node, 0.0):
            self._floor[node] = run_s
        if node in self._known and run_s > self._known[node]:
            self._known[node] = run_s


class ExpectedRunTimes(Sequence[float]):
    """The expected run times (:meth:`~gpudefrag.model.port.RuntimeEstimator.expected_s`) of
    ``pods``, as a sequence aligned with them, each asked of ``runtimes`` only when read (a
    cycle places few of its pending pods) and then kept.  A slice is a view sharing the kept
    values."""

    def __init__(
        self,
        pods: Sequence[PendingPod],
        runtimes: RuntimeEstimator,
        start: int = 0,
        stop: int | None = None,
        kept: dict[int, float] | None = None,
    ) -> None:
        self._pods = pods
        self._runtimes = runtimes
        self._start = start
        self._stop = len(pods) if stop is None else stop
        self._kept: dict[int, float] = {} if kept is None else kept

    def __len__(self) -> int:
        return max(self._stop - self._start, 0)

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> ExpectedRunTimes: ...

    def __getitem__(self, index: int | slice) -> float | ExpectedRunTimes:
        if isinstance(index, slice):
            lo, hi, step = index.indices(len(self))
            if step != 1:
                raise ValueError("ExpectedRunTimes slices must have step 1")
            return ExpectedRunTimes(
                self._pods, self._runtimes, self._start + lo, self._start + max(hi, lo), self._kept
            )
        n = len(self)
        if not -n <= index < n:
            raise IndexError(index)
        i = self._start + (index % n)
        value = self._kept.get(i)
        if value is None:
            value = self._kept[i] = float(self._runtimes.expected_s(self._pods[i]))
        return value
