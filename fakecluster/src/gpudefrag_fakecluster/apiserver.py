"""The fake API server over HTTP: the real paths, verbs, status codes and watch streams for the
subset of Kubernetes the driver uses, on a :class:`~gpudefrag_fakecluster.store.Store`.

Run ``python -m gpudefrag_fakecluster.apiserver [--port N] [--kubeconfig PATH]`` for a foreground
server (it prints its URL); tests use :class:`FakeApiServer` (``start()``/``stop()`` or ``with``).

Responses carry ``Content-Length`` (keep-alive); a watch (``?watch=true``) is a chunked stream
of one JSON event per line, ended by ``timeoutSeconds``, by the end of the watch (an ERROR
event) or by the server stopping.  Errors are ``Status`` objects with their HTTP code.
"""

from __future__ import annotations

import argparse
import contextlib
import select
import socket
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import parse_qs

import msgspec
import yaml

from gpudefrag_fakecluster.api import KINDS, STATUS_SUBRESOURCE_KINDS, ApiError
from gpudefrag_fakecluster.store import Store
from gpudefrag_fakecluster.watch import Watch

MERGE_PATCH_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
VERSION = {"major": "1", "minor": "30", "gitVersion": "v1.30.0-gpudefrag-fake", "platform": "linux/amd64"}
_VERSION_JSON = msgspec.json.encode(VERSION)
WATCH_POLL_S = 0.5
"""How often an idle watch stream checks for its deadline, a gone client or a stopping server."""
WATCH_BATCH_S = 0.002
"""After each write a watch stream pauses this long, so a burst of events goes out in one chunk
(far fewer wake-ups for the server and the watcher; at most this much added latency)."""
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS.update({409: "Conflict", 410: "Gone", 415: "Unsupported Media Type", 422: "Unprocessable Entity"})
_REASONS.update({429: "Too Many Requests", 500: "Internal Server Error"})


class Route(NamedTuple):
    kind: str
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_route(path: str) -> Route | None:
    """The resource a URL path names (``/api/v1/namespaces/ns/pods/p/status``...), or
    ``None`` when the path names nothing this server serves."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group_version, rest = "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    info = KINDS.get(rest[0]) if 1 <= len(rest) <= 3 else None
    if info is None or info.api_version != group_version or (namespace is not None and not info.namespaced):
        return None
    if info.namespaced and namespace is None and len(rest) > 1:
        return None
    sub = rest[2] if len(rest) == 3 else None
    allowed = ({"status"} if rest[0] in STATUS_SUBRESOURCE_KINDS else set()) | (
        {"binding", "eviction"} if rest[0] == "pods" else set()
    )
    if sub is not None and sub not in allowed:
        return None
    return Route(rest[0], namespace, rest[1] if len(rest) > 1 else None, sub)


def _decode(body: bytes) -> dict[str, Any]:
    try:
        obj = msgspec.json.decode(body) if body else None
    except msgspec.DecodeError as e:
        raise ApiError(400, "BadRequest", f"malformed JSON body: {e}") from e
    if not isinstance(obj, dict):
        raise ApiError(400, "BadRequest", "the request body must be a JSON object")
    return obj


def _success(code: int, **extra: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code, **extra}


def _grace_s(query: dict[str, str], body: bytes) -> int | None:
    """``gracePeriodSeconds`` from the query, else from a DeleteOptions body."""
    if "gracePeriodSeconds" in query:
        return int(query["gracePeriodSeconds"])
    grace = _decode(body).get("gracePeriodSeconds") if body.strip() else None
    return None if grace is None else int(grace)


def _list_json(kind: str, items: list[dict[str, Any]], rv: str) -> dict[str, Any]:
    info = KINDS[kind]
    return {
        "kind": info.list_kind,
        "apiVersion": info.api_version,
        "metadata": {"resourceVersion": rv},
        "items": items,
    }


def _pod_action(store: Store, route: Route, body: bytes) -> tuple[int, dict[str, Any]]:
    """POST ``/binding`` (a v1 Binding) or ``/eviction`` (a policy/v1 Eviction)."""
    ns, name, obj = route.namespace or "default", route.name or "", _decode(body)
    if route.subresource == "binding":
        target = obj.get("target") or {}
        if not target.get("name") or target.get("kind", "Node") != "Node":
            raise ApiError(422, "Invalid", "Binding is invalid: target: a Node with a name is required")
        store.bind(ns, name, target["name"], (obj.get("metadata") or {}).get("annotations"))
        # The real answer: a Success Status (no ``target``; clients must not decode it as a Binding).
        return 201, _success(201)
    grace = (obj.get("deleteOptions") or {}).get("gracePeriodSeconds")
    store.evict(ns, name, None if grace is None else int(grace))
    return 201, _success(201)


def operate(
    store: Store, method: str, route: Route, query: dict[str, str], body: bytes, content_type: str
) -> tuple[int, Any]:
    """Run one non-watch request on ``store``: (HTTP code, JSON value of the answer)."""
    kind, ns, name, sub = route
    if name is None:
        if method == "GET":
            items, rv = store.list_shared(kind, ns, query.get("labelSelector"), query.get("fieldSelector"))
            return 200, _list_json(kind, items, rv)
        if method == "POST" and (ns is not None or not KINDS[kind].namespaced):
            return 201, store.create(kind, ns, _decode(body))
    elif sub in ("binding", "eviction"):
        if method == "POST":
            return _pod_action(store, route, body)
    elif method == "GET":
        return 200, store.get_shared(kind, ns, name)
    elif method == "PUT":
        return 200, store.replace(kind, ns, name, _decode(body), sub)
    elif method == "PATCH":
        if content_type.split(";")[0].strip() not in MERGE_PATCH_TYPES:
            raise ApiError(415, "UnsupportedMediaType", f"the patch type {content_type!r} is not supported")
        return 200, store.patch(kind, ns, name, _decode(body), sub)
    elif method == "DELETE" and sub is None:
        return 200, store.delete(kind, ns, name, _grace_s(query, body))
    raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on this resource")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _HttpServer
    raw_requestline: bytes
    fields: dict[str, str]
    """The request's headers, by lower-case name."""

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no line per request."""

    def setup(self) -> None:
        super().setup()
        self.server.api.track(self.connection, True)

    def finish(self) -> None:
        self.server.api.track(self.connection, False)
        super().finish()

    def parse_request(self) -> bool:
        """A lean HTTP/1.x request parser (the base's email-based one costs more than a bind):
        request line, headers into :attr:`fields` (lower-case names), keep-alive rule."""
        self.requestline = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
        parts = self.requestline.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self.close_connection = True
            self._send(
                400, msgspec.json.encode(ApiError(400, "BadRequest", "malformed request line").status())
            )
            return False
        self.command, self.path, self.request_version = parts
        self.fields = {}
        for _ in range(100):
            line = self.rfile.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("iso-8859-1").partition(":")
            self.fields[name.strip().lower()] = value.strip()
        connection = self.fields.get("connection", "").lower()
        self.close_connection = connection == "close" or (
            parts[2] == "HTTP/1.0" and connection != "keep-alive"
        )
        if self.fields.get("expect", "").lower() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def _handle(self, method: str) -> None:
        path, _, query_text = self.path.partition("?")
        query = {k: v[-1] for k, v in parse_qs(query_text).items()} if query_text else {}
        try:
            length = int(self.fields.get("content-length") or 0)
        except ValueError:
            length, self.close_connection = 0, True  # the body cannot be skipped: end the connection
        body = self.rfile.read(length)
        try:
            route = parse_route(path)
            if path == "/healthz":
                self._send(200, b"ok", "text/plain")
            elif path == "/version":
                self._send(200, _VERSION_JSON)
            elif route is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            elif method == "GET" and route.name is None and query.get("watch") in ("true", "1"):
                self._watch(route, query)
            else:
                content_type = self.fields.get("content-type", "")
                code, answer = operate(self.server.api.store, method, route, query, body, content_type)
                self._send(code, msgspec.json.encode(answer))
        except ApiError as e:
            self._send(e.code, msgspec.json.encode(e.status()))
        except ValueError as e:  # a malformed number in the query or body
            self._send(400, msgspec.json.encode(ApiError(400, "BadRequest", str(e)).status()))

    def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        head = f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}\r\nContent-Type: {content_type}\r\n"
        close = "Connection: close\r\n" if self.close_connection else ""
        self.wfile.write(f"{head}{close}Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        timeout_s = float(query.get("timeoutSeconds") or 0)
        api = self.server.api
        w = api.store.watch(
            route.kind,
            route.namespace,
            query.get("resourceVersion"),
            query.get("labelSelector"),
            query.get("fieldSelector"),
        )
        api.watch_started(w)
        try:
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            self.wfile.write(head.encode())
            self._stream(w, time.monotonic() + timeout_s if timeout_s > 0 else None)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        finally:
            w.close()
            api.watch_ended(w)

    def _stream(self, w: Watch, deadline: float | None) -> None:
        """Write the watch's events, those queued together in one chunk (see :data:`WATCH_BATCH_S`)."""
        while deadline is None or time.monotonic() < deadline:
            wait_s = WATCH_POLL_S if deadline is None else min(WATCH_POLL_S, deadline - time.monotonic())
            ev = w.next_event(max(wait_s, 0.0))
            if ev is None:
                if w.finished or self._client_gone():
                    return
                continue
            lines = [ev.line()]
            while (more := w.next_event(0)) is not None:
                lines.append(more.line())
            data = b"".join(lines)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            time.sleep(WATCH_BATCH_S)

    def _client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        try:
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: FakeApiServer) -> None:
        self.api = api
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without the base's reverse DNS lookup of the host."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about connections the client (or :meth:`FakeApiServer.stop`) cut."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FakeApiServer:
    """The HTTP front of a :class:`Store` on ``host:port`` (port 0: any free one), served by a
    background daemon thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, store: Store | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = store if store is not None else Store()
        self.host, self.port = host, port
        self.kubeconfig_path: Path | None = None
        self.stopping = False
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._watches: set[Watch] = set()
        self._connections: set[socket.socket] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> FakeApiServer:
        """Listen and serve in a daemon thread; returns ``self``."""
        self._httpd = _HttpServer((self.host, self.port), self)
        self.port = int(self._httpd.server_address[1])
        self.stopping = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-apiserver",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, drain_s: float = 2.0) -> None:
        """End every watch stream cleanly (waiting up to ``drain_s`` for them), stop listening
        and cut the remaining keep-alive connections."""
        if self._httpd is None:
            return
        self.stopping = True
        with self._cond:
            watches = list(self._watches)
        for w in watches:
            w.end()
        with self._cond:
            self._cond.wait_for(lambda: not self._watches, timeout=drain_s)
            connections = list(self._connections)
        self._httpd.shutdown()
        self._httpd.server_close()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=drain_s)
        self._httpd = self._thread = None

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig for this server (plain http, a dummy bearer token); remember it as
        :attr:`kubeconfig_path`."""
        name = "gpudefrag-fake"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": {"token": "fake-token"}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
            "current-context": name,
        }
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig_path = out
        return out

    # ---- bookkeeping for the handlers --------------------------------------------------
    def track(self, conn: socket.socket, open_: bool) -> None:
        with self._cond:
            (self._connections.add if open_ else self._connections.discard)(conn)

    def watch_started(self, w: Watch) -> None:
        with self._cond:
            self._watches.add(w)
        if self.stopping:
            w.end()

    def watch_ended(self, w: Watch) -> None:
        with self._cond:
            self._watches.discard(w)
            self._cond.notify_all()

    def __enter__(self) -> FakeApiServer:
        return self.start() if self._httpd is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve in the foreground until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m gpudefrag_fakecluster.apiserver", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig for the server here")
    parser.add_argument("--audit", type=Path, help="append the audit records here (JSON lines)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    server = FakeApiServer(Store(seed=args.seed, audit_path=args.audit), args.host, args.port).start()
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        server.store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
