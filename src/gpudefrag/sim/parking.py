"""Pod shapes for the simulator's unschedulable queue: which parked pods a node fits now.

Parked pods are grouped by shape (:attr:`gpudefrag.model.pods.PodSpec.fit_key`); when
resources are freed on a node, one kernel call finds the shapes with parked pods that now fit it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import MAX_PODS_PER_NODE
from gpudefrag.model.pods import PodSpec


@njit(cache=True)
def _shapes_fitting(
    cpu_left, mem_left, gpu_row, gpu_count, model, pod_count, s_cpu, s_mem, s_num, s_milli, s_mask, parked
):
    """Indices of the shapes with parked pods that fit one node."""
    out = np.empty(s_cpu.shape[0], dtype=np.int64)
    k = 0
    for s in range(s_cpu.shape[0]):
        if parked[s] == 0 or s_cpu[s] > cpu_left or s_mem[s] > mem_left:
            continue
        if pod_count + 1 > MAX_PODS_PER_NODE:
            continue
        if s_milli[s] > 0:
            if gpu_count == 0 or ((s_mask[s] >> model) & 1) == 0:
                continue
            fits = 0
            for g in range(gpu_count):
                if gpu_row[g] >= s_milli[s]:
                    fits += 1
            if fits < s_num[s]:
                continue
        out[k] = s
        k += 1
    return out[:k]


class _Shapes:
    """Distinct pod shapes: arrays for the parked-pod kernel, and whether each fits an empty
    node of the cluster at all."""

    def __init__(self, state: ClusterState) -> None:
        self.ids: dict[tuple[int, ...], int] = {}
        self.arr = np.zeros((5, 64), dtype=np.int64)
        self.parked = np.zeros(64, dtype=np.int64)
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
            self.feasible.append(self._fits_empty(pod))
        return sid

    def _fits_empty(self, pod: PodSpec) -> bool:
        s = self._state
        ok = (s.cpu_capacity_milli >= pod.cpu_milli) & (s.memory_capacity_mib >= pod.memory_mib)
        if pod.gpu_milli > 0:
            ok &= (s.gpu_count >= pod.num_gpu) & (((pod.gpu_model_mask >> s.model_id) & 1) == 1)
        return bool(ok.any())

    def fitting(self, state: ClusterState, node: int) -> np.ndarray:
        n = len(self.members)
        a = self.arr
        return _shapes_fitting(
            int(state.cpu_milli_left[node]),
            int(state.memory_mib_left[node]),
            state.gpu_milli_left[node],
            int(state.gpu_count[node]),
            int(state.model_id[node]),
            int(state.pod_count[node]),
            a[0, :n],
            a[1, :n],
            a[2, :n],
            a[3, :n],
            a[4, :n],
            self.parked[:n],
        )
