"""What "fits" means, defined once: on a node now, on a node when empty, on a scratch node.

* **Fits now** (:func:`node_fits`, compiled; :func:`feasible_mask` over every node): CPU,
  memory and the pod-count limit fit and, for a GPU pod (``gpu_milli > 0``), the node has GPUs
  of an accepted model and at least ``num_gpu`` of them have ``left >= gpu_milli`` (multi-GPU
  pods ask whole GPUs, so these are wholly free GPUs).  This is the reference simulator's
  filter (spec §3.2); :meth:`ClusterState.why_not_fits` checks one concrete placement against it.
* **Fits when empty** (:func:`fits_empty_mask`): the node's capacity (not what is free) could
  hold the pod: CPU, memory and, for a GPU pod, GPU count and an accepted GPU model.
* **Scratch node** (:class:`NodeView`): a mutable copy of one node's free resources for
  what-ifs; :func:`fits_on_view` is "fits now" on it and :func:`place_on_view` places a pod
  with the canonical GPU choice (tightest GPU for a sharing pod, lowest free GPUs for whole
  GPUs).

Requests enter the compiled kernels as :attr:`PodSpec.fit_key`
``(cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_model_mask)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

from gpudefrag.jit import njit_no_nrt
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU, MAX_PODS_PER_NODE
from gpudefrag.model.gpu_models import mask_accepts
from gpudefrag.model.pods import PodSpec

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@njit_no_nrt
def node_fits(
    n: int,
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
) -> bool:
    """ "Fits now" for node ``n`` of the per-node arrays (module docstring)."""
    if cpu_left[n] < pod_cpu or mem_left[n] < pod_mem or pod_count[n] + 1 > MAX_PODS_PER_NODE:
        return False
    if pod_milli <= 0:
        return True
    if gpu_count[n] == 0 or ((pod_mask >> model[n]) & 1) == 0:
        return False
    fits = 0
    for g in range(gpu_count[n]):
        if gpu_left[n, g] >= pod_milli:
            fits += 1
    return fits >= pod_num


@njit(cache=True)
def feasible_mask(
    cpu_left: IntArray,
    mem_left: IntArray,
    gpu_left: IntArray,
    gpu_count: IntArray,
    model: IntArray,
    pod_count: IntArray,
    pod_cpu: int,
    pod_mem: int,
    pod_num: int,
    pod_milli: int,
    pod_mask: int,
) -> BoolArray:
    """Boolean array: which nodes the pod fits now."""
    n_nodes = cpu_left.shape[0]
    out = np.zeros(n_nodes, dtype=np.bool_)
    for n in range(n_nodes):
        out[n] = node_fits(
            n, cpu_left, mem_left, gpu_left, gpu_count, model, pod_count,
            pod_cpu, pod_mem, pod_num, pod_milli, pod_mask,
        )  # fmt: skip
    return out


def fits_now_mask(state: ClusterState, pod: PodSpec) -> BoolArray:
    """Which nodes of ``state`` ``pod`` fits now."""
    result: BoolArray = feasible_mask(
        state.cpu_milli_left, state.memory_mib_left, state.gpu_milli_left, state.gpu_count,
        state.model_id, state.pod_count, *pod.fit_key,
    )  # fmt: skip
    return result


def fits_empty_mask(state: ClusterState, pod: PodSpec) -> BoolArray:
    """Which nodes of ``state`` could host ``pod`` when empty (module docstring): a read-only
    array, memoised by the pod's fit key on the state (and its copies, which share the
    capacities)."""
    key = pod.fit_key
    ok = state.empty_fit_memo.get(key)
    if ok is None:
        ok = (state.cpu_capacity_milli >= pod.cpu_milli) & (state.memory_capacity_mib >= pod.memory_mib)
        if pod.gpu_milli > 0:
            ok &= (state.gpu_count >= pod.num_gpu) & (((pod.gpu_model_mask >> state.model_id) & 1) == 1)
        ok.setflags(write=False)
        state.empty_fit_memo[key] = ok
    return ok


@dataclass
class NodeView:
    """Mutable scratch copy of one node's free resources."""

    cpu_milli: int
    memory_mib: int
    pods: int
    gpu_left: list[int]
    model: int

    def copy(self) -> NodeView:
        return NodeView(self.cpu_milli, self.memory_mib, self.pods, list(self.gpu_left), self.model)


def node_view(state: ClusterState, node: int) -> NodeView:
    """A scratch copy of ``node``'s free resources on ``state``."""
    count = int(state.gpu_count[node])
    return NodeView(
        int(state.cpu_milli_left[node]),
        int(state.memory_mib_left[node]),
        int(state.pod_count[node]),
        [int(v) for v in state.gpu_milli_left[node, :count]],
        int(state.model_id[node]),
    )


def fits_on_view(view: NodeView, pod: PodSpec) -> bool:
    """Would :func:`place_on_view` place ``pod`` on the scratch node?  (Without changing it.)

    The rule: CPU, memory and a pod slot free; for a GPU pod, GPUs of an accepted model and
    either one GPU with ``gpu_milli`` left (a sharing pod) or ``num_gpu`` wholly free GPUs."""
    if view.cpu_milli < pod.cpu_milli or view.memory_mib < pod.memory_mib or view.pods >= MAX_PODS_PER_NODE:
        return False
    milli = pod.gpu_milli
    if milli <= 0:
        return True
    left = view.gpu_left
    if not left or not mask_accepts(pod.gpu_model_mask, view.model):
        return False
    if pod.num_gpu == 1 and milli < GPU_MILLI_PER_GPU:  # a sharing pod
        return max(left) >= milli
    return left.count(GPU_MILLI_PER_GPU) >= pod.num_gpu


def place_on_view(view: NodeView, pod: PodSpec) -> tuple[int, ...] | None:
    """Place ``pod`` on the scratch node (mutating it); the GPUs used, or ``None`` if it does not fit.

    A sharing pod takes the tightest GPU with room (the lowest index on ties); whole-GPU pods
    take the lowest wholly free GPUs.
    """
    if not fits_on_view(view, pod):
        return None
    gpus: tuple[int, ...] = ()
    if pod.gpu_milli > 0:
        if pod.is_sharing:
            best = -1  # fits_on_view found a GPU with room, so one is chosen
            for g, left in enumerate(view.gpu_left):
                if left >= pod.gpu_milli and (best < 0 or left < view.gpu_left[best]):
                    best = g
            gpus = (best,)
        else:
            gpus = tuple(g for g, left in enumerate(view.gpu_left) if left == GPU_MILLI_PER_GPU)[
                : pod.num_gpu
            ]
        for g in gpus:
            view.gpu_left[g] -= pod.gpu_milli
    view.cpu_milli -= pod.cpu_milli
    view.memory_mib -= pod.memory_mib
    view.pods += 1
    return gpus
