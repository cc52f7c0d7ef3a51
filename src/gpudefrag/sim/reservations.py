"""Reservations: nodes held for pending pods while migrations free them.

While a reservation holds, every session first tries its pod on its node and otherwise masks
the node in the snapshot the scheduler sees (:mod:`gpudefrag.sim.sessions`), and a decision
that lands another pod on it is refused.  A reservation ends when its pod binds (anywhere),
when it expires (``timeout_s`` after it was made) or when it is released; its node is then
open to everybody again, which counts as freeing it (``on_ended(node)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class Reservation(NamedTuple):
    pod: int
    expiry_s: float
    res_id: int


class Reservations:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.by_node: dict[int, Reservation] = {}
        self.node_of_pod: dict[int, int] = {}
        self.on_ended: Callable[[int], None] = lambda node: None

    def __contains__(self, node: int) -> bool:
        return node in self.by_node

    def make(self, node: int, pod: int, now_s: float, res_id: int) -> float:
        """Reserve ``node`` for ``pod``; returns the expiry time."""
        expiry = now_s + self.timeout_s
        self.by_node[node] = Reservation(pod, expiry, res_id)
        self.node_of_pod[pod] = node
        return expiry

    def end(self, node: int) -> None:
        pod = self.by_node.pop(node).pod
        del self.node_of_pod[pod]
        self.on_ended(node)

    def why_not(self, node: int, pod: int) -> str | None:
        """Why ``node`` cannot be reserved for ``pod`` now (``None`` if it can, or already is)."""
        if self.by_node.get(node, Reservation(pod, 0.0, 0)).pod != pod:
            return "node_reserved_for_another_pod"
        if self.node_of_pod.get(pod, node) != node:
            return "pod_reserved_elsewhere"
        return None
