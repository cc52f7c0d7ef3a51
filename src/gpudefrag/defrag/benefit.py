"""What a defragmentation plan is worth, in GPU-seconds: the time the room it frees early
would otherwise have stayed out of reach, for the pod it is freed for or the queue behind it.

*Natural fit time* of a node: running pods are released in order of remaining run time until
the blocked pod fits; the node's time is the remaining time of the last pod released (0 if
it fits now, ``inf`` if it never does from the pods listed).

The freed room on node X would have come anyway at X's natural fit time ``t_X``.  Until
then it is worth its GPUs for as long as some pending pod would otherwise wait for such room.
``competing`` pending pods (the blocked one included) can use room of this size; the
naturally freed rooms serve them in the order the nodes reach their fit times, so the queue
still wants extra room until the ``competing``-th smallest fit time ``t_D`` over the other
nodes (``inf`` if fewer nodes ever fit).  With the blocked pod alone (``competing = 1``) this
is its own natural wait; with a backlog of pods wanting the same room it reaches ``t_X``.

With a plan the room is ready after ``start_delay_s`` (the eviction grace period), so
benefit = the pod's GPUs x ``max(0, min(t_D, t_X) - start_delay_s)``.  This ignores
arrivals that may take naturally freed room first, which only makes the waits longer.

Fit times from expected remaining run times make ``t_D`` a minimum of means; for heavy-tailed
run times it is far longer than the expected wait.  :mod:`gpudefrag.defrag.natural_wait`
averages the same quantity over draws instead (the planner's ``wait_draws``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from gpudefrag.defrag.cost import MovablePod
from gpudefrag.model.cluster import ClusterState
from gpudefrag.model.constants import GPU_MILLI_PER_GPU
from gpudefrag.model.fit import NodeView, fits_on_view, node_view, place_on_view
from gpudefrag.model.pods import PodSpec


def release(view: NodeView, p: MovablePod) -> None:
    """Give ``p``'s resources back to the scratch node ``view``."""
    spec = p.spec
    view.cpu_milli += spec.cpu_milli
    view.memory_mib += spec.memory_mib
    view.pods -= 1
    for g in p.gpus:
        view.gpu_left[g] += spec.gpu_milli


def occupy(view: NodeView, p: MovablePod) -> None:
    """Take ``p``'s resources from the scratch node ``view`` again (undoes :func:`release`)."""
    spec = p.spec
    view.cpu_milli -= spec.cpu_milli
    view.memory_mib -= spec.memory_mib
    view.pods += 1
    for g in p.gpus:
        view.gpu_left[g] -= spec.gpu_milli


def node_natural_wait_s(
    state: ClusterState,
    node: int,
    pods_on_node: list[MovablePod],
    pod: PodSpec,
    give_up_at_s: float = math.inf,
) -> float:
    """Seconds until ``pod`` fits on ``node`` if its pods finish in ``remaining_s`` order
    (0 if it fits now, ``inf`` if it never does, or as soon as the wait reaches ``give_up_at_s``)."""
    view = node_view(state, node)
    if fits_on_view(view, pod):
        return 0.0
    for p in sorted(pods_on_node, key=lambda q: (q.remaining_s, q.pod_id)):
        if p.remaining_s >= give_up_at_s:
            return math.inf
        release(view, p)
        if fits_on_view(view, pod):
            return max(p.remaining_s, 0.0)
    return math.inf


def plan_benefit_gpu_s(
    state: ClusterState,
    running: Iterable[MovablePod],
    pod: PodSpec,
    target_node: int,
    nodes: Iterable[int],
    start_delay_s: float,
    competing: int = 1,
) -> float:
    """Benefit of freeing ``target_node`` for ``pod`` now (module docstring): its GPUs x
    ``max(0, min(t_D, t_X) - start_delay_s)``, with ``t_D`` the ``competing``-th smallest
    natural fit time over ``nodes`` other than the target."""
    if competing < 1:
        raise ValueError(f"competing must be at least 1, got {competing}")
    by_node: dict[int, list[MovablePod]] = {}
    for p in running:
        by_node.setdefault(p.node, []).append(p)
    t_x = node_natural_wait_s(state, target_node, by_node.get(target_node, []), pod)
    smallest: list[float] = []  # the ``competing`` smallest fit times so far, ascending
    for n in nodes:
        if n == target_node:
            continue
        give_up = smallest[-1] if len(smallest) == competing else t_x
        t = node_natural_wait_s(state, n, by_node.get(n, []), pod, give_up)
        if t < give_up:
            smallest.append(t)
            smallest.sort()
            del smallest[competing:]
    t_d = smallest[-1] if len(smallest) == competing else math.inf
    gpus = pod.num_gpu * max(pod.gpu_milli, 0) / GPU_MILLI_PER_GPU
    return gpus * max(min(t_d, t_x) - start_delay_s, 0.0)


def queue_harm_gpu_s(
    state: ClusterState,
    node: int,
    pods_on_node: list[MovablePod],
    moved: list[MovablePod],
    pod: PodSpec,
    duration_s: float,
) -> float:
    """GPU-seconds of room the queue loses when ``pod`` (running ``duration_s``) takes ``node``
    once ``moved`` have left.

    Without the plan each GPU ``g`` the pod takes would be free for the queue from its natural
    free time ``r_g`` (the longest remaining time of the listed pods on it; ``inf`` if it holds
    a pod not listed); with the plan the pod holds it until ``duration_s``.  Harm = sum over
    those GPUs of ``gpu_milli / 1000 x max(0, duration_s - r_g)``.  The moved pods' own room
    is not counted: they take it with them.
    """
    view = node_view(state, node)
    for p in moved:
        release(view, p)
    gpus = place_on_view(view, pod)
    if gpus is None:
        raise ValueError(f"pod does not fit on node {node} once the moved pods have left")
    harm = 0.0
    for g in gpus:
        listed = [p for p in pods_on_node if g in p.gpus]
        used = GPU_MILLI_PER_GPU - int(state.gpu_milli_left[node, g])
        if sum(p.spec.gpu_milli for p in listed) < used:
            continue  # a pod we know nothing about holds it: never free for the queue
        free_at = max((p.remaining_s for p in listed), default=0.0)
        harm += pod.gpu_milli / GPU_MILLI_PER_GPU * max(duration_s - free_at, 0.0)
    return harm
