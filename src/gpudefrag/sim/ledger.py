"""The ledger: the only path by which the time-driven simulator binds and unbinds pods.

Beside the cluster state it keeps what the simulator expects each node to hold (the requests
of the pods it bound, plus any load the cluster came with, as background) for the
resource-accounting invariant, and the count of wholly free GPUs (for the idle-capacity
split).  Every unbind is reported to ``on_freed(node)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gpudefrag.model.cluster import ClusterState, Placement
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_GPUS_PER_NODE
from gpudefrag.sim.events import Touched

IntArray = npt.NDArray[np.int64]


class Ledger:
    def __init__(self, cluster: ClusterState, touched: Touched) -> None:
        self.state = s = cluster.copy()
        slots = np.arange(MAX_GPUS_PER_NODE)[None, :]
        self.slot_cap: IntArray = np.where(slots < s.gpu_count[:, None], GPU_MILLI_PER_GPU, 0).astype(
            np.int64
        )
        self.exp_cpu: IntArray = s.cpu_capacity_milli - s.cpu_milli_left
        self.exp_mem: IntArray = s.memory_capacity_mib - s.memory_mib_left
        self.exp_gpu: IntArray = self.slot_cap - s.gpu_milli_left
        self.whole_free_gpus = int((s.gpu_milli_left == GPU_MILLI_PER_GPU).sum())
        self.on_freed: Callable[[int], None] = lambda node: None
        self._touched = touched

    def _whole_free(self, node: int, gpus: tuple[int, ...]) -> int:
        """How many of ``gpus`` on ``node`` are wholly free now."""
        left = self.state.gpu_milli_left
        return sum(1 for g in gpus if left[node, g] == GPU_MILLI_PER_GPU)

    def bind(self, p: Placement) -> None:
        self.whole_free_gpus -= self._whole_free(p.node, p.gpus)
        self.state.bind(p)
        self.whole_free_gpus += self._whole_free(p.node, p.gpus)
        self._expect(p, 1)

    def unbind(self, p: Placement) -> None:
        self.whole_free_gpus -= self._whole_free(p.node, p.gpus)
        self.state.unbind(p)
        self.whole_free_gpus += self._whole_free(p.node, p.gpus)
        self._expect(p, -1)
        self.on_freed(p.node)

    def _expect(self, p: Placement, sign: int) -> None:
        pod, n = p.pod, p.node
        self.exp_cpu[n] += sign * pod.cpu_milli
        self.exp_mem[n] += sign * pod.memory_mib
        for g in p.gpus:
            self.exp_gpu[n, g] += sign * pod.gpu_milli
        self._touched.nodes.add(n)
