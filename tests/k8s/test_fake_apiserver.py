"""The fake API server over HTTP, driven with lightkube (as the scheduler and the controller
will be): CRUD and its status codes, optimistic concurrency, the binding and eviction
subresources, graceful deletion, chunked watches (from a version, and 410 once compacted),
generic resources, and the raw protocol details (framing, errors, kubeconfig)."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod
from lightkube.resources.policy_v1 import PodDisruptionBudget
from lightkube.types import PatchType

from gpudefrag.k8s.client import bind_pod, evict_pod
from gpudefrag_fakecluster.apiserver import FakeApiServer, parse_route

PodGroup = create_namespaced_resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")


def pod_body(name: str, labels: dict[str, str] | None = None) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
                "schedulerName": "gpudefrag",
            },
        }
    )


def binding(name: str, node: str, annotations: dict[str, str] | None = None) -> Any:
    return Pod.Binding(
        metadata=ObjectMeta(name=name, annotations=annotations),
        target=ObjectReference(kind="Node", name=node),
    )


def eviction(name: str) -> Any:
    return Pod.Eviction(metadata=ObjectMeta(name=name))


def status_code(fn: Any, *args: Any, **kwargs: Any) -> int:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return int(info.value.status.code or 0)


def make_running(client: Client, name: str, ns: str, ready: bool = True) -> None:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    patch = {"status": {"phase": "Running", "conditions": conditions}}
    client.patch(Pod.Status, name, patch, namespace=ns, patch_type=PatchType.MERGE)


@pytest.fixture
def raw(fake_api: FakeApiServer) -> Iterator[http.client.HTTPConnection]:
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    yield conn
    conn.close()


def request(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"Content-Type": content_type})
    resp = conn.getresponse()
    text = resp.read()
    return resp.status, json.loads(text) if resp.getheader("Content-Type") == "application/json" else text


# ---- CRUD ----------------------------------------------------------------------------------
def test_crud_and_errors_through_lightkube(kube_client: Client, kube_namespace: str) -> None:
    ns = kube_namespace
    created = kube_client.create(pod_body("a", {"app": "web"}), namespace=ns)
    assert created.metadata.uid and created.status.phase == "Pending"
    assert status_code(kube_client.create, pod_body("a"), namespace=ns) == 409
    assert status_code(kube_client.get, Pod, "ghost", namespace=ns) == 404
    kube_client.create(pod_body("b"), namespace=ns)
    pods = kube_client.list(Pod, namespace=ns, labels={"app": "web"})
    assert [p.metadata.name for p in pods] == ["a"] and int(pods.resourceVersion) > 0
    patched = kube_client.patch(
        Pod, "a", {"metadata": {"labels": {"x": "1"}}}, namespace=ns, patch_type=PatchType.MERGE
    )
    assert patched.metadata.labels == {"app": "web", "x": "1"}
    kube_client.delete(Pod, "b", namespace=ns)
    assert [p.metadata.name for p in kube_client.list(Pod, namespace=ns)] == ["a"]


def test_missing_name_is_422(kube_client: Client, kube_namespace: str) -> None:
    body = Pod.from_dict({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    assert status_code(kube_client.create, body, namespace=kube_namespace) == 422


def test_stale_replace_is_409(kube_client: Client, kube_namespace: str) -> None:
    lease = Lease.from_dict({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}})
    first = kube_client.create(lease, namespace=kube_namespace)
    first.spec.holderIdentity = "b"
    second = kube_client.replace(first)
    assert second.spec.holderIdentity == "b"
    first.spec.holderIdentity = "c"  # still carries the first resourceVersion
    assert status_code(kube_client.replace, first) == 409


def test_pod_group_as_a_generic_resource(kube_client: Client, fake_api: FakeApiServer) -> None:
    made = kube_client.create(PodGroup.from_dict({"metadata": {"name": "g"}, "spec": {"minMember": 4}}))
    assert made.spec == {"minMember": 4}
    kube_client.patch(PodGroup.Status, "g", {"status": {"phase": "Running"}}, patch_type=PatchType.MERGE)
    got = kube_client.get(PodGroup, "g")
    assert got.status == {"phase": "Running"} and got.spec == {"minMember": 4}
    assert fake_api.store.get("podgroups", "default", "g")["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert [g.metadata.name for g in kube_client.list(PodGroup, namespace="*")] == ["g"]


def test_nodes_are_cluster_scoped(kube_client: Client, fake_api: FakeApiServer) -> None:
    kube_client.create(Node.from_dict({"metadata": {"name": "n1", "labels": {"gpu": "v100"}}}))
    kube_client.patch(
        Node.Status, "n1", {"status": {"allocatable": {"nvidia.com/gpu": "8"}}}, patch_type=PatchType.MERGE
    )
    node = kube_client.get(Node, "n1")
    assert node.status.allocatable == {"nvidia.com/gpu": "8"} and node.metadata.namespace is None


# ---- binding, eviction, deletion -----------------------------------------------------------
@pytest.mark.fake_only
def test_bind_201_then_409_then_409_while_deleting(kube_client: Client, fake_api: FakeApiServer) -> None:
    kube_client.create(pod_body("a"))
    bind_pod(kube_client, "default", "a", "n1", {"alibabacloud.com/gpu-index": "2,3"})
    bound = kube_client.get(Pod, "a")
    assert bound.spec.nodeName == "n1" and bound.metadata.annotations == {"alibabacloud.com/gpu-index": "2,3"}
    assert status_code(bind_pod, kube_client, "default", "a", "n2") == 409
    kube_client.delete(Pod, "a", grace_period=30)
    with pytest.raises(ApiError) as info:
        bind_pod(kube_client, "default", "a", "n2")
    assert info.value.status.code == 409 and "being deleted" in (info.value.status.message or "")
    assert status_code(bind_pod, kube_client, "default", "ghost", "n1") == 404
    assert [(r["verb"], r["node"]) for r in fake_api.store.audit] == [
        ("create", None),
        ("bind", "n1"),
        ("delete-request", "n1"),
    ]


@pytest.mark.fake_only
def test_graceful_deletion_keeps_the_pod_until_grace_0(kube_client: Client) -> None:
    kube_client.create(pod_body("a"))
    bind_pod(kube_client, "default", "a", "n1")
    make_running(kube_client, "a", "default")
    kube_client.delete(Pod, "a", grace_period=20)
    deleting = kube_client.get(Pod, "a")
    assert (
        deleting.metadata.deletionTimestamp is not None and deleting.metadata.deletionGracePeriodSeconds == 20
    )
    kube_client.delete(Pod, "a", grace_period=0)
    assert status_code(kube_client.get, Pod, "a") == 404


@pytest.mark.fake_only
def test_eviction_201_429_then_201_500_and_404(kube_client: Client) -> None:
    pdb = {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
    }
    kube_client.create(PodDisruptionBudget.from_dict(pdb))
    for name, ready in (("w1", True), ("w2", True), ("w3", False)):
        kube_client.create(pod_body(name, {"app": "web"}))
        bind_pod(kube_client, "default", name, "n1")
        make_running(kube_client, name, "default", ready)
    with pytest.raises(ApiError) as info:
        evict_pod(kube_client, "default", "w1")
    status = info.value.status
    assert (status.code, status.reason) == (429, "TooManyRequests")
    assert status.details.causes[0].reason == "DisruptionBudget"
    assert kube_client.get(PodDisruptionBudget, "web").status.currentHealthy == 2
    make_running(kube_client, "w3", "default", ready=True)
    evict_pod(kube_client, "default", "w1")
    assert kube_client.get(Pod, "w1").metadata.deletionTimestamp is not None
    other = {"metadata": {"name": "all"}, "spec": {"maxUnavailable": 1, "selector": {}}}
    kube_client.create(PodDisruptionBudget.from_dict(other))
    assert status_code(kube_client.create, eviction("w2"), name="w2", namespace="default") == 500
    assert status_code(kube_client.create, eviction("ghost"), name="ghost", namespace="default") == 404


def test_eviction_of_a_pending_pod_deletes_it(kube_client: Client, kube_namespace: str) -> None:
    kube_client.create(pod_body("a"), namespace=kube_namespace)
    evict_pod(kube_client, kube_namespace, "a")
    assert status_code(kube_client.get, Pod, "a", namespace=kube_namespace) == 404


# ---- watches -------------------------------------------------------------------------------
def collect(client: Client, n: int, out: list[tuple[str, str]], **kwargs: Any) -> threading.Thread:
    def run() -> None:
        for event_type, obj in client.watch(Pod, **kwargs):
            out.append((event_type, obj.metadata.name))
            if len(out) == n:
                return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_watch_from_a_listed_version_sees_the_later_events_in_order(
    kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    kube_client.create(pod_body("before"), namespace=ns)
    listed = kube_client.list(Pod, namespace=ns)
    assert [p.metadata.name for p in listed] == ["before"]
    kube_client.create(pod_body("a"), namespace=ns)
    bind_pod(kube_client, ns, "a", "n1")
    seen: list[tuple[str, str]] = []
    thread = collect(kube_client, 4, seen, namespace=ns, resource_version=listed.resourceVersion)
    kube_client.create(pod_body("b"), namespace=ns)
    kube_client.delete(Pod, "b", namespace=ns)
    thread.join(timeout=10)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b")]


def test_watch_from_a_compacted_version_raises_410(kube_client: Client, fake_api: FakeApiServer) -> None:
    kube_client.create(pod_body("a"))
    listed = kube_client.list(Pod)
    assert len(list(listed)) == 1
    kube_client.create(pod_body("b"))
    fake_api.store.compact()
    raised: list[BaseException] = []

    def first_event() -> None:
        try:
            next(iter(kube_client.watch(Pod, resource_version=listed.resourceVersion)))
        except ApiError as e:
            raised.append(e)

    thread = threading.Thread(target=first_event, daemon=True)  # a live watch would block: bounded
    thread.start()
    thread.join(timeout=5)
    assert raised and isinstance(raised[0], ApiError)
    assert raised[0].status.code == 410 and raised[0].status.reason == "Expired"


def test_watch_with_selectors_over_http(kube_client: Client, fake_api: FakeApiServer) -> None:
    kube_client.create(pod_body("a"))
    seen: list[tuple[str, str]] = []
    listed = kube_client.list(Pod)
    assert len(list(listed)) == 1
    rv = listed.resourceVersion
    thread = collect(kube_client, 2, seen, namespace="*", fields={"spec.nodeName": ""}, resource_version=rv)
    kube_client.create(pod_body("b"))
    bind_pod(kube_client, "default", "a", "n1")
    thread.join(timeout=10)
    assert seen == [("ADDED", "b"), ("DELETED", "a")]


def read_chunks(resp: http.client.HTTPResponse) -> list[dict[str, Any]]:
    return [json.loads(line) for line in resp.read().splitlines()]


def test_chunked_watch_stream_framing_order_and_timeout(
    fake_api: FakeApiServer, raw: http.client.HTTPConnection
) -> None:
    for name in ("a", "b", "c"):
        fake_api.store.create("pods", "default", {"metadata": {"name": name}})
    raw.request("GET", "/api/v1/namespaces/default/pods?watch=1&resourceVersion=1&timeoutSeconds=1")
    resp = raw.getresponse()
    assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
    fake_api.store.delete("pods", "default", "a")
    events = read_chunks(resp)  # returns when the server ends the stream after 1 s
    got = [
        (e["type"], e["object"]["metadata"]["name"], e["object"]["metadata"]["resourceVersion"])
        for e in events
    ]
    assert got == [("ADDED", "b", "2"), ("ADDED", "c", "3"), ("DELETED", "a", "4")]
    assert events[0]["object"]["kind"] == "Pod"
    assert request(raw, "GET", "/healthz") == (200, b"ok")  # the connection stays usable


def test_stopping_the_server_ends_watch_streams_cleanly(fake_api: FakeApiServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=10)
    conn.request("GET", "/api/v1/pods?watch=true")
    resp = conn.getresponse()
    fake_api.store.create("pods", "ns", {"metadata": {"name": "a"}})
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(read_chunks(resp)), daemon=True)
    reader.start()
    fake_api.stop()
    reader.join(timeout=5)
    assert [e["object"]["metadata"]["name"] for e in result[0]] == ["a"]  # a complete chunked body
    conn.close()


# ---- protocol ------------------------------------------------------------------------------
def test_errors_are_status_objects(fake_api: FakeApiServer, raw: http.client.HTTPConnection) -> None:
    code, body = request(raw, "GET", "/api/v1/widgets")
    assert (code, body["kind"], body["reason"], body["code"]) == (404, "Status", "NotFound", 404)
    assert request(raw, "POST", "/api/v1/namespaces/default/pods", b"{not json")[0] == 400
    assert request(raw, "POST", "/api/v1/namespaces/default/pods", b"[1]")[0] == 400
    fake_api.store.create("pods", "default", {"metadata": {"name": "a"}})
    json_patch = [{"op": "add", "path": "/metadata/labels", "value": {}}]
    assert (
        request(raw, "PATCH", "/api/v1/namespaces/default/pods/a", json_patch, "application/json-patch+json")[
            0
        ]
        == 415
    )
    assert request(raw, "DELETE", "/api/v1/namespaces/default/pods")[0] == 405
    assert request(raw, "GET", "/api/v1/namespaces/default/pods?labelSelector=a+in+(")[0] == 400
    code, body = request(
        raw, "POST", "/api/v1/namespaces/default/pods/a/binding", {"target": {"kind": "Node"}}
    )
    assert code == 422
    code, body = request(raw, "GET", "/api/v1/namespaces/default/pods")
    assert (body["kind"], body["apiVersion"], body["items"][0]["kind"]) == ("PodList", "v1", "Pod")
    assert body["metadata"]["resourceVersion"] == str(fake_api.store.resource_version)


def test_binding_and_eviction_answer_success_status(
    fake_api: FakeApiServer, raw: http.client.HTTPConnection
) -> None:
    fake_api.store.create("pods", "default", {"metadata": {"name": "a"}})
    target = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "a"},
        "target": {"kind": "Node", "name": "n"},
    }
    code, body = request(raw, "POST", "/api/v1/namespaces/default/pods/a/binding", target)
    assert (code, body["status"], body["code"]) == (201, "Success", 201)
    code, body = request(
        raw, "POST", "/api/v1/namespaces/default/pods/a/eviction", {"metadata": {"name": "a"}}
    )
    assert (code, body["status"]) == (201, "Success")
    deleting = fake_api.store.get("pods", "default", "a")["metadata"]
    assert deleting["deletionGracePeriodSeconds"] == 30
    code, _ = request(raw, "DELETE", "/api/v1/namespaces/default/pods/a", {"gracePeriodSeconds": 0})
    assert code == 200 and fake_api.store.list("pods")[0] == []


def test_version_kubeconfig_and_routes(fake_api: FakeApiServer, raw: http.client.HTTPConnection) -> None:
    code, body = request(raw, "GET", "/version")
    assert code == 200 and body["major"] == "1"
    assert fake_api.kubeconfig_path is not None and fake_api.url in fake_api.kubeconfig_path.read_text()
    assert parse_route("/api/v1/namespaces/ns/pods/p/eviction") == ("pods", "ns", "p", "eviction")
    assert parse_route("/api/v1/nodes/n/status") == ("nodes", None, "n", "status")
    assert parse_route("/apis/policy/v1/poddisruptionbudgets") == ("poddisruptionbudgets", None, None, None)
    assert parse_route("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/n/podgroups/g/status") is not None
    for bad in ("/api/v1/namespaces/ns/nodes", "/api/v1/pods/p", "/api/v2/pods", "/apis/policy/v1/pods"):
        assert parse_route(bad) is None, bad
    assert parse_route("/api/v1/namespaces/ns/leases") is None  # leases are coordination.k8s.io
    assert parse_route("/api/v1/nodes/n/binding") is None
