"""Informers: list, then watch from the listed resourceVersion; on 410 Gone, list again.

Each informer runs in its own daemon thread and puts plain-dict events on one queue that a
single consumer applies, so the cache is changed by one thread only:

* ``("LIST", kind, [objects...])`` after every (re)list: the full set, which replaces the
  consumer's view (objects not in it are gone);
* ``(event_type, kind, object)`` for each watch event (ADDED, MODIFIED, DELETED).

A watch that ends cleanly is followed by a new list and watch; a 410 (the version is too old)
relists at once; any other error (an error status, a dropped connection, anything unexpected)
is logged and relists after a back-off (``retry_s`` doubling to 30 s), so an informer never
dies silently nor spins.  A resource the server does not serve (404 on the first list, e.g. no
PodGroup CRD) stops that informer after one warning.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from lightkube import ApiError, Client
from lightkube.core.resource import NamespacedResource

from gpudefrag.k8s.transport import TRANSPORT_ERRORS

log = logging.getLogger("gpudefrag.k8s")

Event = tuple[str, str, Any]


class Informer:
    """One resource kind, listed and watched into ``out`` (module docstring)."""

    def __init__(
        self,
        client: Client,
        resource: Any,
        kind: str,
        out: queue.Queue[Event],
        stop: threading.Event,
        retry_s: float = 1.0,
        field_selector: str | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.kind = kind
        self.out = out
        self.stop = stop
        self.retry_s = retry_s
        self.field_selector = field_selector
        self.relists = 0
        self.thread = threading.Thread(target=self._run, name=f"informer-{kind}", daemon=True)

    def start(self) -> Informer:
        self.thread.start()
        return self

    def _namespaced(self) -> bool:
        return issubclass(self.resource, NamespacedResource)

    def _list(self) -> str:
        if self._namespaced():
            items = self.client.list(self.resource, namespace="*", fields=self._fields())
        else:
            items = self.client.list(self.resource, fields=self._fields())
        objs = [o.to_dict() if hasattr(o, "to_dict") else dict(o) for o in items]
        self.out.put(("LIST", self.kind, objs))
        self.relists += 1
        return str(items.resourceVersion)

    def _fields(self) -> dict[str, Any] | None:
        if not self.field_selector:
            return None
        out = {}
        for part in self.field_selector.split(","):
            k, _, v = part.partition("=")
            out[k] = v
        return out

    def _watch(self, version: str) -> None:
        if self._namespaced():
            stream = self.client.watch(
                self.resource, namespace="*", resource_version=version, fields=self._fields()
            )
        else:
            stream = self.client.watch(self.resource, resource_version=version, fields=self._fields())
        for event_type, obj in stream:
            if self.stop.is_set():
                return
            self.out.put((event_type, self.kind, obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)))

    def _run(self) -> None:
        delay_s = self.retry_s
        while not self.stop.is_set():
            try:
                version = self._list()
                delay_s = self.retry_s
                self._watch(version)
                continue  # the stream ended cleanly: list and watch again at once
            except ApiError as e:
                code = e.status.code
                if code == 404 and self.relists == 0:
                    log.warning("%s: not served by the API server (404); informer stopped", self.kind)
                    return
                if code == 410:  # the version is too old: list again at once
                    continue
                log.warning(
                    "%s: %s (%s); listing again in %.0f s", self.kind, code, e.status.message, delay_s
                )
            except TRANSPORT_ERRORS as e:
                if self.stop.is_set():  # the connection was closed because we are stopping
                    return
                log.warning("%s: connection failed (%s); listing again in %.0f s", self.kind, e, delay_s)
            except Exception:  # an informer must never die silently and leave a stale cache
                log.exception("%s: informer error; listing again in %.0f s", self.kind, delay_s)
            if self.stop.wait(delay_s):
                return
            delay_s = min(30.0, 2 * delay_s)
