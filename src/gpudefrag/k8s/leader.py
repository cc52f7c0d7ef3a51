"""Leader election with a ``coordination.k8s.io/v1`` Lease (client-go's rules, simplified).

* A candidate takes the Lease when it does not exist (create; 409 = someone was faster), when
  it already holds it, or when the Lease has not changed for ``leaseDurationSeconds`` of the
  candidate's own clock (the holder's clock is never trusted).
* Every write is a replace carrying the resourceVersion read, so two candidates cannot both
  win: the loser gets 409 Conflict and stays a follower.
* The leader renews every ``renew_s``; if it cannot renew before its own lease would expire it
  stops leading at once (it must not act on a lease another candidate may now hold).

:attr:`LeaderElector.leading` is what the scheduler and the controller check before writing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from lightkube import ApiError, Client
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

from gpudefrag.k8s.timefmt import to_rfc3339
from gpudefrag.k8s.transport import CALL_ERRORS

log = logging.getLogger("gpudefrag.k8s")


class LeaderElector:
    def __init__(
        self,
        client: Client,
        name: str,
        namespace: str,
        identity: str,
        lease_duration_s: int = 15,
        renew_s: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_s = renew_s
        self.clock = clock
        self._valid_until = 0.0
        self.transitions = 0
        self._observed_rv: str | None = None
        self._observed_at = 0.0

    @property
    def leading(self) -> bool:
        return self.clock() < self._valid_until

    def _spec(self, now: float, transitions: int) -> LeaseSpec:
        stamp = to_rfc3339(now, micros=True)  # MicroTime: the API wants the fraction
        return LeaseSpec(
            holderIdentity=self.identity,
            leaseDurationSeconds=self.lease_duration_s,
            acquireTime=stamp,  # type: ignore[arg-type]
            renewTime=stamp,  # type: ignore[arg-type]
            leaseTransitions=transitions,
        )

    def try_acquire(self) -> bool:
        """One attempt to take or renew the Lease; returns whether we lead now."""
        now = self.clock()
        try:
            lease = self.client.get(Lease, self.name, namespace=self.namespace)
        except ApiError as e:
            if e.status.code != 404:
                raise
            obj = Lease(
                metadata=ObjectMeta(name=self.name, namespace=self.namespace), spec=self._spec(now, 0)
            )
            try:
                self.client.create(obj)
            except ApiError as e2:
                if e2.status.code == 409:
                    return False
                raise
            return self._won(now)
        spec = lease.spec
        holder = spec.holderIdentity if spec is not None else None
        if holder != self.identity and spec is not None and not self._expired(lease, now):
            self._valid_until = 0.0
            return False
        transitions = (spec.leaseTransitions or 0) if spec is not None else 0
        if holder != self.identity:
            transitions += 1
        new_spec = self._spec(now, transitions)
        if holder == self.identity and spec is not None and spec.acquireTime is not None:
            new_spec.acquireTime = spec.acquireTime
        lease.spec = new_spec
        try:
            self.client.replace(lease)
        except ApiError as e:
            if e.status.code == 409:
                self._valid_until = 0.0
                return False
            raise
        if holder != self.identity:
            self.transitions += 1
            log.info("leader election: %s now leads %s/%s", self.identity, self.namespace, self.name)
        return self._won(now)

    def _expired(self, lease: Lease, now: float) -> bool:
        """Another holder's lease has expired when it has not changed (same resourceVersion) for
        ``leaseDurationSeconds`` of *our* clock since we first saw it so (client-go's rule: the
        holder's ``renewTime`` is never compared with our clock, so clock skew cannot matter)."""
        rv = lease.metadata.resourceVersion if lease.metadata is not None else None
        if rv != self._observed_rv:
            self._observed_rv, self._observed_at = rv, now
            return False
        duration_s = float((lease.spec.leaseDurationSeconds if lease.spec else None) or self.lease_duration_s)
        return now > self._observed_at + duration_s

    def _won(self, now: float) -> bool:
        # Lead a little less than the lease lasts, so a slow renewal never overlaps a new holder.
        self._valid_until = now + self.lease_duration_s * 0.8
        return True

    def run(self, stop: threading.Event) -> None:
        """Keep trying / renewing until ``stop`` is set (run it in a daemon thread)."""
        while not stop.is_set():
            try:
                self.try_acquire()
            except CALL_ERRORS as e:
                log.warning("leader election: %s", e)
            stop.wait(self.renew_s if self.leading else min(self.renew_s, 1.0))
        self._valid_until = 0.0

    def start(self, stop: threading.Event) -> threading.Thread:
        t = threading.Thread(target=self.run, args=(stop,), name="leader", daemon=True)
        t.start()
        return t
