"""Reservations: nodes held for pending pods while migrations free them.

While a reservation holds, every session first tries its pod on its node and otherwise masks
the node in the snapshot the scheduler sees (:mod:`gpudefrag.sim.sessions`), and a decision
that lands another pod on it is refused.  A reservation ends when its pod binds (anywhere),
when it expires (``timeout_s`` after it was made) or when it is released; its node is then
open to everybody again, which counts as freeing it (``on_ended(node)``).

Every reservation is one executed plan; :attr:`Reservations.log` keeps a
:class:`PlanRecord` of each, in the order they were made: the node it freed, its pod, and how
it ended (one of :data:`OUTCOMES`, ``open`` while it holds), when, and where the pod bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

OUTCOMES = ("fulfilled", "bound_elsewhere", "expired", "released")
"""How a reservation ends: its pod bound on the node, its pod bound on another node first, it
expired, or it was released (a later move of its plan failed, or a Release action)."""


class Reservation(NamedTuple):
    pod: int
    expiry_s: float
    res_id: int


@dataclass
class PlanRecord:
    """One executed plan's reservation: made at ``made_s`` on ``node`` for ``pod``; ``outcome``
    is ``open`` until it ends at ``ended_s``; ``bound_node`` is where the pod bound (-1 if it
    did not bind while the reservation held)."""

    res_id: int
    pod: int
    node: int
    made_s: float
    outcome: str = "open"
    ended_s: float = math.nan
    bound_node: int = -1


class Reservations:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.by_node: dict[int, Reservation] = {}
        self.node_of_pod: dict[int, int] = {}
        self.on_ended: Callable[[int], None] = lambda node: None
        self.log: list[PlanRecord] = []
        self._open: dict[int, PlanRecord] = {}  # node -> its open record

    def __contains__(self, node: int) -> bool:
        return node in self.by_node

    def make(self, node: int, pod: int, now_s: float, res_id: int) -> float:
        """Reserve ``node`` for ``pod``; returns the expiry time."""
        expiry = now_s + self.timeout_s
        self.by_node[node] = Reservation(pod, expiry, res_id)
        self.node_of_pod[pod] = node
        record = PlanRecord(res_id, pod, node, now_s)
        self.log.append(record)
        self._open[node] = record
        return expiry

    def end(self, node: int, outcome: str, now_s: float, bound_node: int = -1) -> None:
        """End ``node``'s reservation with ``outcome`` (one of :data:`OUTCOMES`) at ``now_s``;
        ``bound_node``: where its pod bound, for the outcomes of a bind."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown reservation outcome {outcome!r}")
        pod = self.by_node.pop(node).pod
        del self.node_of_pod[pod]
        record = self._open.pop(node)
        record.outcome, record.ended_s, record.bound_node = outcome, now_s, bound_node
        self.on_ended(node)

    def why_not(self, node: int, pod: int) -> str | None:
        """Why ``node`` cannot be reserved for ``pod`` now (``None`` if it can, or already is)."""
        if self.by_node.get(node, Reservation(pod, 0.0, 0)).pod != pod:
            return "node_reserved_for_another_pod"
        if self.node_of_pod.get(pod, node) != node:
            return "pod_reserved_elsewhere"
        return None
