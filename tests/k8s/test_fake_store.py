"""The fake API server's store, used directly: CRUD and its errors, optimistic concurrency,
binding, graceful deletion, eviction against PodDisruptionBudgets, watches, listeners, the
audit, and the selectors."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from gpudefrag_fakecluster.selectors import (
    field_value,
    fields_match,
    label_selector_matches,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from gpudefrag_fakecluster.store import ApiError, Store, merge_patch

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


class Clock:
    def __init__(self) -> None:
        self.t_s = T0

    def __call__(self) -> float:
        return self.t_s


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    node: str | None = None,
    phase: str | None = None,
    ready: bool = False,
    grace_s: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}], "schedulerName": "gpudefrag"}
    if node:
        spec["nodeName"] = node
    if grace_s is not None:
        spec["terminationGracePeriodSeconds"] = grace_s
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


def running(store: Store, name: str, labels: dict[str, str] | None = None, ready: bool = True) -> None:
    store.create("pods", "default", pod(name, labels, node="n1", phase="Running", ready=ready))


def pdb(name: str, selector: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": selector, **spec}}


def code_of(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args, **kwargs)
    return info.value


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> Store:
    return Store(clock=clock, seed=7)


# ---- CRUD ----------------------------------------------------------------------------------
def test_create_sets_server_fields_and_get_returns_a_copy(store: Store) -> None:
    created = store.create("pods", "default", pod("a"))
    meta = created["metadata"]
    assert (created["apiVersion"], created["kind"], meta["namespace"]) == ("v1", "Pod", "default")
    assert meta["resourceVersion"] == "1" and store.resource_version == 1
    assert meta["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert len(meta["uid"]) == 36 and created["status"]["phase"] == "Pending"
    got = store.get("pods", "default", "a")
    got["metadata"]["labels"]["x"] = "changed"
    assert store.get("pods", "default", "a")["metadata"]["labels"] == {}
    node = store.create("nodes", "ignored", {"metadata": {"name": "n1"}})
    assert "namespace" not in node["metadata"] and store.get("nodes", None, "n1")["kind"] == "Node"


def test_generate_name_and_uids_follow_the_seed(clock: Clock) -> None:
    def names(seed: int) -> list[tuple[str, str]]:
        s = Store(clock=clock, seed=seed)
        made = [s.create("pods", "default", {"metadata": {"generateName": "job-"}}) for _ in range(3)]
        return [(p["metadata"]["name"], p["metadata"]["uid"]) for p in made]

    first = names(1)
    assert first == names(1) and first != names(2)
    assert all(n.startswith("job-") and len(n) == 9 for n, _ in first)
    assert len({n for n, _ in first}) == 3


def test_create_errors(store: Store) -> None:
    store.create("pods", "default", pod("a"))
    err = code_of(store.create, "pods", "default", pod("a"))
    assert (err.code, err.reason) == (409, "AlreadyExists")
    assert code_of(store.create, "pods", "default", {"metadata": {}}).code == 422
    assert code_of(store.create, "pods", "other", {"metadata": {"name": "b", "namespace": "x"}}).code == 400
    assert code_of(store.create, "widgets", "default", pod("a")).code == 404
    missing = code_of(store.get, "pods", "default", "nope")
    assert (missing.code, missing.reason, missing.details) == (
        404,
        "NotFound",
        {"name": "nope", "kind": "pods"},
    )
    status = missing.status()
    assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", 404)


def test_list_namespaces_and_resource_version(store: Store) -> None:
    store.create("pods", "b", pod("x"))
    store.create("pods", "a", pod("y"))
    store.create("pods", "a", pod("x"))
    items, rv = store.list("pods")
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items] == [
        ("a", "x"),
        ("a", "y"),
        ("b", "x"),
    ]
    assert rv == "3"
    assert [p["metadata"]["name"] for p in store.list("pods", "b")[0]] == ["x"]


def test_list_with_selectors(store: Store) -> None:
    store.create("pods", "default", pod("a", {"app": "web", "tier": "1"}))
    store.create("pods", "default", pod("b", {"app": "db"}))
    store.bind("default", "b", "n1")
    assert [p["metadata"]["name"] for p in store.list("pods", label_selector="app in (web,db),!tier")[0]] == [
        "b"
    ]
    assert [p["metadata"]["name"] for p in store.list("pods", field_selector="spec.nodeName=")[0]] == ["a"]
    assert code_of(store.list, "pods", label_selector="app in (").code == 400
    assert code_of(store.list, "pods", field_selector="spec.image=x").code == 400


def test_stale_replace_is_a_conflict_and_unconditional_replace_is_not(store: Store) -> None:
    first = store.create(
        "leases", "kube-system", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}
    )
    second = store.replace("leases", "kube-system", "l", {**first, "spec": {"holderIdentity": "b"}})
    assert second["metadata"]["resourceVersion"] == "2"
    err = code_of(store.replace, "leases", "kube-system", "l", {**first, "spec": {"holderIdentity": "c"}})
    assert err.code == 409 and "the object has been modified" in err.message
    unconditional = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "d"}}
    third = store.replace("leases", "kube-system", "l", unconditional)
    assert third["spec"] == {"holderIdentity": "d"} and third["metadata"]["uid"] == first["metadata"]["uid"]
    stale_patch = {"metadata": {"resourceVersion": "1"}, "spec": {"holderIdentity": "e"}}
    assert code_of(store.patch, "leases", "kube-system", "l", stale_patch).code == 409
    assert code_of(store.replace, "leases", "kube-system", "zz", unconditional).code == 404


def test_status_changes_only_through_the_status_subresource(store: Store) -> None:
    created = store.create("pods", "default", pod("a", node="n1"))
    body = {
        **created,
        "metadata": {**created["metadata"], "labels": {"k": "v"}},
        "status": {"phase": "Failed"},
    }
    replaced = store.replace("pods", "default", "a", body)
    assert replaced["status"]["phase"] == "Pending" and replaced["metadata"]["labels"] == {"k": "v"}
    patched = store.patch("pods", "default", "a", {"status": {"phase": "Running"}}, subresource="status")
    assert patched["status"]["phase"] == "Running" and patched["metadata"]["labels"] == {"k": "v"}
    ignored = store.patch(
        "pods", "default", "a", {"status": {"phase": "Failed"}, "metadata": {"labels": None}}
    )
    assert ignored["status"]["phase"] == "Running" and "labels" not in ignored["metadata"]


def test_node_name_changes_only_through_binding(store: Store) -> None:
    store.create("pods", "default", pod("a"))
    err = code_of(store.patch, "pods", "default", "a", {"spec": {"nodeName": "n1"}})
    assert (err.code, err.reason) == (422, "Invalid")


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}}, {"a": 1, "b": {"d": 3, "e": 4}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),  # lists are replaced, not merged
        ({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}),
        ({"a": {"b": 1}}, {"a": 5}, {"a": 5}),
        ({}, {"a": {"b": None}}, {"a": {}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: dict[str, Any], patch: dict[str, Any], expected: Any) -> None:
    before = json.dumps(target)
    assert merge_patch(target, patch) == expected
    assert json.dumps(target) == before  # the target is not modified


# ---- binding and deletion ------------------------------------------------------------------
def test_bind_sets_node_annotations_and_condition_once(store: Store) -> None:
    store.create("pods", "default", {**pod("a"), "metadata": {"name": "a", "annotations": {"keep": "1"}}})
    store.bind("default", "a", "n1", {"alibabacloud.com/gpu-index": "0,1"})
    bound = store.get("pods", "default", "a")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["metadata"]["annotations"] == {"keep": "1", "alibabacloud.com/gpu-index": "0,1"}
    assert [(c["type"], c["status"]) for c in bound["status"]["conditions"]] == [("PodScheduled", "True")]
    again = code_of(store.bind, "default", "a", "n2")
    assert again.code == 409 and "already assigned to node" in again.message
    assert code_of(store.bind, "default", "ghost", "n1").code == 404
    assert [r["verb"] for r in store.audit] == ["create", "bind"] and store.audit[1]["node"] == "n1"


def test_bind_of_a_pod_being_deleted_is_a_conflict(store: Store) -> None:
    store.create("pods", "default", pod("a", node="n1"))
    store.delete("pods", "default", "a")
    err = code_of(store.bind, "default", "a", "n2")
    assert err.code == 409 and "being deleted" in err.message


def test_graceful_deletion_keeps_a_bound_pod_until_a_grace_0_delete(store: Store, clock: Clock) -> None:
    store.create("pods", "default", pod("a", node="n1", phase="Running", grace_s=10))
    requested = store.delete("pods", "default", "a")
    assert requested["metadata"]["deletionGracePeriodSeconds"] == 10
    assert requested["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:30Z"
    assert store.get("pods", "default", "a")["metadata"]["deletionTimestamp"]
    clock.t_s += 5
    shorter = store.delete("pods", "default", "a", grace_period_s=2)
    assert shorter["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:27Z"
    rv = store.resource_version
    store.delete("pods", "default", "a", grace_period_s=30)  # longer: no change
    assert store.resource_version == rv
    store.delete("pods", "default", "a", grace_period_s=0)
    assert code_of(store.get, "pods", "default", "a").code == 404
    assert [r["verb"] for r in store.audit] == ["create", "delete-request", "delete-request", "delete"]
    assert store.audit[-1]["node"] == "n1"


@pytest.mark.parametrize(
    ("node", "phase", "grace_s", "removed_now"),
    [
        (None, None, None, True),  # not bound
        ("n1", "Succeeded", None, True),
        ("n1", "Failed", None, True),
        ("n1", "Running", 0, True),
        ("n1", "Running", None, False),
        ("n1", "Pending", None, False),
    ],
)
def test_which_pod_deletions_are_immediate(
    store: Store, node: str | None, phase: str | None, grace_s: int | None, removed_now: bool
) -> None:
    store.create("pods", "default", pod("a", node=node, phase=phase))
    store.delete("pods", "default", "a", grace_period_s=grace_s)
    assert (not store.list("pods")[0]) == removed_now
    assert store.audit[-1]["verb"] == ("delete" if removed_now else "delete-request")


def test_default_grace_is_30_s(store: Store) -> None:
    store.create("pods", "default", pod("a", node="n1", phase="Running"))
    assert store.delete("pods", "default", "a")["metadata"]["deletionGracePeriodSeconds"] == 30


def test_other_kinds_are_removed_at_once(store: Store) -> None:
    store.create("nodes", None, {"metadata": {"name": "n1"}})
    store.delete("nodes", None, "n1", grace_period_s=60)
    assert store.list("nodes")[0] == []


# ---- eviction ------------------------------------------------------------------------------
def test_eviction_without_budget_or_of_unbound_pod_deletes(store: Store) -> None:
    running(store, "a")
    store.create("pods", "default", pod("b", {"app": "x"}))
    store.create("poddisruptionbudgets", "default", pdb("all", {}, minAvailable=5))
    store.evict("default", "b")  # not bound: no budget check
    assert code_of(store.get, "pods", "default", "b").code == 404
    assert [r["verb"] for r in store.audit if r["name"] == "b"] == ["create", "evict", "delete"]
    assert code_of(store.evict, "default", "ghost").code == 404


def test_eviction_respects_min_available_then_allows_when_more_are_healthy(store: Store) -> None:
    store.create(
        "poddisruptionbudgets", "default", pdb("web", {"matchLabels": {"app": "web"}}, minAvailable=2)
    )
    running(store, "w1", {"app": "web"})
    running(store, "w2", {"app": "web"})
    running(store, "w3", {"app": "web"}, ready=False)
    err = code_of(store.evict, "default", "w1")
    assert (err.code, err.reason) == (429, "TooManyRequests")
    assert err.message == "Cannot evict pod as it would violate the pod's disruption budget."
    assert err.details is not None and err.details["causes"][0]["reason"] == "DisruptionBudget"
    status = store.get("poddisruptionbudgets", "default", "web")["status"]
    assert status == {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3}
    assert store.get("pods", "default", "w1")["metadata"].get("deletionTimestamp") is None
    store.patch(
        "pods", "default", "w3", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "status"
    )
    store.evict("default", "w1")
    assert store.get("pods", "default", "w1")["metadata"]["deletionTimestamp"]
    assert store.get("poddisruptionbudgets", "default", "web")["status"]["disruptionsAllowed"] == 0
    assert code_of(store.evict, "default", "w2").code == 429  # w1 being deleted is no longer healthy


@pytest.mark.parametrize(
    ("spec", "healthy", "allowed"),
    [
        ({"minAvailable": "50%"}, 4, 2),  # desired = ceil(50 % of 4) = 2
        ({"minAvailable": "60%"}, 4, 1),  # ceil(2.4) = 3
        ({"maxUnavailable": 1}, 4, 1),
        ({"maxUnavailable": "30%"}, 4, 2),  # ceil(1.2) = 2 unavailable
        ({"maxUnavailable": 0}, 4, 0),
        ({}, 4, 4),
    ],
)
def test_budget_arithmetic(store: Store, spec: dict[str, Any], healthy: int, allowed: int) -> None:
    store.create("poddisruptionbudgets", "default", pdb("b", {"matchExpressions": []}, **spec))
    for i in range(healthy):
        running(store, f"p{i}", {"app": "x"})
    if allowed == 0:
        assert code_of(store.evict, "default", "p0").code == 429
    else:
        store.evict("default", "p0")
    status = store.get("poddisruptionbudgets", "default", "b")["status"]
    assert status["disruptionsAllowed"] == max(0, allowed - 1)
    assert status["expectedPods"] == healthy


def test_eviction_with_two_budgets_is_an_internal_error(store: Store) -> None:
    running(store, "a", {"app": "x"})
    store.create(
        "poddisruptionbudgets", "default", pdb("one", {"matchLabels": {"app": "x"}}, maxUnavailable=1)
    )
    store.create("poddisruptionbudgets", "default", pdb("two", {}, maxUnavailable=1))
    err = code_of(store.evict, "default", "a")
    assert err.code == 500 and "more than one PodDisruptionBudget" in err.message
    store.create("poddisruptionbudgets", "other", pdb("elsewhere", {}, maxUnavailable=1))  # another namespace
    store.delete("poddisruptionbudgets", "default", "two")
    store.evict("default", "a")


# ---- watches -------------------------------------------------------------------------------
def drain(w: Any) -> list[tuple[str, str, str]]:
    out = []
    while (item := w.next(0.05)) is not None:
        out.append((item[0], item[1]["metadata"]["name"], item[1]["metadata"]["resourceVersion"]))
    return out


def raw_events(w: Any) -> list[tuple[str, dict[str, Any]]]:
    """The queued events (a live watch is not waited on: bounded, unlike iterating it)."""
    out = []
    while (item := w.next(0.05)) is not None:
        out.append(item)
    return out


def test_watch_from_a_listed_version_sees_exactly_the_later_events_in_order(store: Store) -> None:
    store.create("pods", "default", pod("a"))
    store.create("pods", "default", pod("b"))
    _, rv = store.list("pods")
    store.bind("default", "a", "n1")
    store.create("nodes", None, {"metadata": {"name": "n1"}})  # another kind: not seen
    store.delete("pods", "default", "b")
    w = store.watch("pods", resource_version=rv)
    store.create("pods", "default", pod("c"))
    assert drain(w) == [("MODIFIED", "a", "3"), ("DELETED", "b", "5"), ("ADDED", "c", "6")]
    w.close()
    store.create("pods", "default", pod("d"))
    assert w.next(0.01) is None and w.finished


def test_watch_without_version_starts_with_the_current_objects(store: Store) -> None:
    store.create("pods", "default", pod("a"))
    store.create("pods", "other", pod("b"))
    assert drain(store.watch("pods", "default")) == [("ADDED", "a", "1")]
    assert [e[1] for e in drain(store.watch("pods", resource_version="0"))] == ["a", "b"]


def test_watch_from_a_compacted_version_gets_410(store: Store) -> None:
    store.create("pods", "default", pod("a"))
    store.create("pods", "default", pod("b"))
    store.compact()
    store.create("pods", "default", pod("c"))
    expired = store.watch("pods", resource_version="1")
    events = raw_events(expired)
    assert [(t, o["code"], o["reason"]) for t, o in events] == [("ERROR", 410, "Expired")]
    assert events[0][1]["message"] == "too old resource version: 1 (2)"
    assert expired.finished and expired.next(0.01) is None
    assert drain(store.watch("pods", resource_version="2")) == [("ADDED", "c", "3")]
    assert [e[1] for e in drain(store.watch("pods"))] == ["a", "b", "c"]


def test_a_window_overflow_expires_old_versions(clock: Clock) -> None:
    store = Store(clock=clock, watch_window=3)
    for i in range(5):
        store.create("pods", "default", pod(f"p{i}"))
    events = raw_events(store.watch("pods", resource_version="1"))
    assert len(events) == 1 and events[0][0] == "ERROR"
    status = events[0][1]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith("too old resource version: 1 (")
    assert [e[1] for e in drain(store.watch("pods", resource_version="2"))] == ["p2", "p3", "p4"]


def test_selector_transitions_are_added_and_deleted(store: Store) -> None:
    store.create("pods", "default", pod("a", {"app": "x"}))
    w = store.watch("pods", resource_version="1", field_selector="spec.nodeName=")
    l_w = store.watch("pods", resource_version="1", label_selector="app=y")
    store.bind("default", "a", "n1")  # stops matching spec.nodeName=
    store.patch("pods", "default", "a", {"metadata": {"labels": {"app": "y"}}})  # starts matching app=y
    store.patch("pods", "default", "a", {"metadata": {"labels": {"app": "y", "more": "1"}}})
    store.delete("pods", "default", "a", grace_period_s=0)
    deleted = drain(w)
    assert deleted == [("DELETED", "a", "2")]
    assert drain(l_w) == [("ADDED", "a", "3"), ("MODIFIED", "a", "4"), ("DELETED", "a", "5")]


def test_watch_blocks_until_an_event_arrives_and_ends_on_close(store: Store) -> None:
    w = store.watch("pods", resource_version="0")
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(e[1]["metadata"]["name"] for e in w))
    reader.start()
    store.create("pods", "default", pod("a"))
    store.create("pods", "default", pod("b"))
    for _ in range(100):
        if len(seen) == 2:
            break
        threading.Event().wait(0.01)
    w.close()
    reader.join(timeout=2)
    assert not reader.is_alive() and seen == ["a", "b"]


# ---- listeners and audit -------------------------------------------------------------------
def test_listeners_see_every_write_in_order_even_writes_they_make(store: Store) -> None:
    seen: list[tuple[str, str, str]] = []

    def listener(event_type: str, kind: str, obj: dict[str, Any]) -> None:
        seen.append((event_type, kind, obj["metadata"]["resourceVersion"]))
        obj["metadata"]["name"] = "scribbled"  # a private copy
        if kind == "pods" and event_type == "ADDED":
            store.create("events", "default", {"metadata": {"generateName": "ev-"}, "reason": "Seen"})

    store.add_listener(listener)
    store.create("pods", "default", pod("a"))
    store.bind("default", "a", "n1")
    assert seen == [("ADDED", "pods", "1"), ("ADDED", "events", "2"), ("MODIFIED", "pods", "3")]
    assert store.get("pods", "default", "a")["metadata"]["name"] == "a"


def test_audit_records_every_write_and_goes_to_the_file(clock: Clock, tmp_path: Any) -> None:
    path = tmp_path / "audit.jsonl"
    store = Store(clock=clock, audit_path=path)
    store.create("pods", "default", pod("a", phase="Running"))
    store.bind("default", "a", "n1")
    store.evict("default", "a")
    store.delete("pods", "default", "a", grace_period_s=0)
    store.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == store.audit
    assert [(r["verb"], r["rv"], r["node"]) for r in lines] == [
        ("create", 1, None),
        ("bind", 2, "n1"),
        ("evict", 2, "n1"),
        ("delete-request", 3, "n1"),
        ("delete", 4, "n1"),
    ]
    assert {r["uid"] for r in lines} == {lines[0]["uid"]} and all(r["t"] == T0 for r in lines)


# ---- selectors -----------------------------------------------------------------------------
LABELS = {"app": "web", "tier": "front", "gpu": ""}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),  # no requirement
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),  # != holds when the key is absent
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app in (db, web)", True),
        ("app in (db)", False),
        ("missing in (x)", False),
        ("app notin (db,cache)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("app=web,tier=front", True),  # comma is AND
        ("app=web,tier=back", False),
        ("app in (web,db),tier notin (back),!missing", True),
        ("gpu=", True),  # an empty value
    ],
)
def test_label_selector_table(selector: str, matches: bool) -> None:
    assert labels_match(parse_label_selector(selector), LABELS) == matches


@pytest.mark.parametrize("bad", ["app in (", "app in ()", "=x", "a b", "app=web,,tier", "app in (a b)"])
def test_malformed_label_selectors_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_label_selector(bad)


OBJ = {"metadata": {"name": "a", "namespace": "ns"}, "spec": {"schedulerName": "gpudefrag"}, "status": {}}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("metadata.name=a", True),
        ("metadata.name==a", True),
        ("metadata.name!=a", False),
        ("metadata.namespace=ns,spec.schedulerName=gpudefrag", True),
        ("spec.nodeName=", True),  # missing field reads as ""
        ("spec.nodeName!=", False),
        ("status.phase=Running", False),
        ("metadata.name=a,status.phase!=Pending", True),
    ],
)
def test_field_selector_table(selector: str, matches: bool) -> None:
    assert fields_match(parse_field_selector(selector), OBJ) == matches


def test_field_selector_paths_are_limited_and_values_read_as_strings() -> None:
    with pytest.raises(ValueError):
        parse_field_selector("spec.containers=x")
    with pytest.raises(ValueError):
        parse_field_selector("metadata.name")
    assert field_value({"spec": {"priority": 5}}, "spec.priority") == "5"
    assert field_value({"spec": None}, "spec.nodeName") == ""


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        (None, False),  # no selector selects nothing
        ({}, True),  # an empty one selects everything
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "x"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, False),
        (
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}],
            },
            True,
        ),
    ],
)
def test_structured_selector_table(selector: dict[str, Any] | None, matches: bool) -> None:
    assert label_selector_matches(selector, LABELS) == matches
