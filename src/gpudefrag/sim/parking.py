"""Pod shapes for the simulator's wait queue: which parked pods a node fits now.

Parked pods are grouped by shape (:attr:`gpudefrag.model.pods.PodSpec.fit_key`); when
resources are freed on a node, one kernel call finds the shapes with parked pods that now fit
it (the "fits now" rule of :mod:`gpudefrag.model.fit`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.fit import fits_empty_mask, node_fits
from gpudefrag.model.pods import PodSpec

IntArray = npt.NDArray[np.int64]


@njit(cache=True)
def _shapes_fitting(
    node: int,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    shapes: IntArray,
    parked: IntArray,
) -> IntArray:
    """Indices of the shapes (columns of ``shapes``: a fit key each) with parked pods that
    fit ``node`` now."""
    out = np.empty(parked.shape[0], dtype=np.int64)
    k = 0
    for s in range(parked.shape[0]):
        if parked[s] == 0:
            continue
        if node_fits(
            node, cpu_left, mem_left, gpu_left, gpu_count, model, pod_count,
            shapes[0, s], shapes[1, s], shapes[2, s], shapes[3, s], shapes[4, s],
        ):  # fmt: skip
            out[k] = s
            k += 1
    return out[:k]


class Shapes:
    """Distinct pod shapes: their fit keys (one column each), the parked pods of each, and
    whether each fits an empty node of the cluster at all."""

    def __init__(self, state: ClusterState) -> None:
        self.ids: dict[tuple[int, ...], int] = {}
        self.arr: IntArray = np.zeros((5, 64), dtype=np.int64)
        self.parked: IntArray = np.zeros(64, dtype=np.int64)
        self.members: list[dict[int, None]] = []
        self.feasible: list[bool] = []
        self._state = state

    def id_of(self, pod: PodSpec) -> int:
        key = pod.fit_key
        sid = self.ids.get(key)
        if sid is None:
            sid = self.ids[key] = len(self.members)
            if sid >= self.arr.shape[1]:
                self.arr = np.concatenate([self.arr, np.zeros_like(self.arr)], axis=1)
                self.parked = np.concatenate([self.parked, np.zeros_like(self.parked)])
            self.arr[:, sid] = key
            self.members.append({})
            self.feasible.append(bool(fits_empty_mask(self._state, pod).any()))
        return sid

    def fitting(self, state: ClusterState, node: int) -> IntArray:
        n = len(self.members)
        result: IntArray = _shapes_fitting(
            node, state.cpu_milli_left, state.memory_mib_left, state.gpu_milli_left, state.gpu_count,
            state.model_id, state.pod_count, self.arr[:, :n], self.parked[:n],
        )  # fmt: skip
        return result
