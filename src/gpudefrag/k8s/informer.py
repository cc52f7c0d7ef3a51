"""Informers: list, then watch from the listed resourceVersion; on 410 Gone, list again.

Each informer runs in its own daemon thread and puts plain-dict events on one queue that a
single consumer applies, so the cache is changed by one thread only:

* ``("LIST", kind, [objects...])`` after every (re)list: the full set, which replaces the
  consumer's view (objects not in it are gone);
* ``(event_type, kind, object)`` for each watch event (ADDED, MODIFIED, DELETED).

A watch that ends (server timeout, dropped connection) resumes from the last version seen
(lightkube does this); a 410 (the version is too old) or any other error leads to a relist
after ``retry_s``.  A resource the server does not serve (404 on list, e.g. no PodGroup CRD)
stops that informer after one warning.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
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
        while not self.stop.is_set():
            try:
                version = self._list()
                self._watch(version)
            except ApiError as e:
                code = e.status.code
                if code == 404 and self.relists == 0:
                    log.warning("%s: not served by the API server (404); informer stopped", self.kind)
                    return
                if code != 410:
                    log.warning("%s: watch failed (%s); listing again", self.kind, e.status.message)
            except TRANSPORT_ERRORS as e:
                if self.stop.is_set():
                    return
                log.warning("%s: connection failed (%s); listing again", self.kind, e)
                time.sleep(self.retry_s)
