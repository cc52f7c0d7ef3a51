"""Quantities and pod requests: one table per rule, each row worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from gpudefrag.k8s.nodes import ModelRegistry
from gpudefrag.k8s.quantity import QuantityError, cpu_milli, memory_mib
from gpudefrag.k8s.requests import (
    ObjectError,
    gpu_assignment,
    gpu_index_value,
    kai_gpus,
    openb_gpus,
    pod_request,
    whole_gpus,
)
from gpudefrag.model.constants import ANY_GPU_MODEL
from gpudefrag.model.gpu_models import MODEL_ID
from gpudefrag.model.jobs import Constraint


@pytest.mark.parametrize(
    ("q", "milli"),
    [
        ("500m", 500),
        ("2", 2000),
        ("1.5", 1500),
        (".5", 500),
        ("0.0001", 1),  # rounded up to whole millicores
        ("1e3", 1_000_000),  # 1000 cores
        ("2k", 2_000_000),
        (3, 3000),
        (0.25, 250),
        (0.1, 100),  # the decimal written, not the float's binary expansion (which would round up to 101)
        ("+1", 1000),
    ],
)
def test_cpu_milli(q: str | int | float, milli: int) -> None:
    assert cpu_milli(q) == milli


@pytest.mark.parametrize(
    ("q", "mib"),
    [
        ("4Gi", 4096),
        ("512Mi", 512),
        ("1G", 953),  # 10^9 / 2^20 = 953.67 -> floor
        ("1048576", 1),  # bytes
        ("1048575", 0),
        ("1Ti", 1 << 20),
        ("2048Ki", 2),
        ("1e9", 953),
        ("1E", 953_674_316_406),  # exa: 10^18 bytes
        ("1000k", 0),  # 10^6 bytes < 1 MiB
        ("2000000k", 1907),  # 2 * 10^9 / 2^20 = 1907.3
        ("1048576000m", 1),  # milli-bytes: 1048576000 / 1000 = 1048576 bytes = 1 MiB
        ("1048575999m", 0),  # one milli-byte short of 1 MiB
        (1 << 30, 1024),
    ],
)
def test_memory_mib(q: str | int, mib: int) -> None:
    assert memory_mib(q) == mib


@pytest.mark.parametrize(
    "q", ["", "abc", "1.2.3", "5 Gi", "1Xi", "-1", "1e", "Gi", True, None, float("inf"), "1e99"]
)
def test_bad_quantities(q: Any) -> None:
    with pytest.raises(QuantityError):
        cpu_milli(q)
    with pytest.raises(QuantityError):
        memory_mib(q)


# ----------------------------------------------------------------------------- pods
def pod(
    annotations: dict[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": "foo",
            "namespace": "default",
            "uid": "u1",
            "creationTimestamp": "2024-05-01T12:00:00Z",
            "annotations": annotations or {},
            "labels": labels or {},
        },
        "spec": {
            "containers": containers if containers is not None else [res(cpu="1", memory="1Gi")],
            **({"initContainers": init} if init else {}),
            **spec,
        },
    }


def res(kind: str = "requests", **values: str) -> dict[str, Any]:
    """A container with ``values`` (``nvidia_gpu`` -> ``nvidia.com/gpu``) as its requests or limits."""
    return {
        "name": "c",
        "resources": {kind: {k.replace("nvidia_gpu", "nvidia.com/gpu"): v for k, v in values.items()}},
    }


def request(obj: dict[str, Any], models: ModelRegistry | None = None) -> tuple[int, int, int, int]:
    s = pod_request(obj, models or ModelRegistry()).spec
    return s.cpu_milli, s.memory_mib, s.num_gpu, s.gpu_milli


FRACTION = "gpu-fraction"
MILLI = "alibabacloud.com/gpu-milli"
COUNT = "alibabacloud.com/gpu-count"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # CPU only
        (pod(), (1000, 1024, 0, 0)),
        # whole GPUs: limits, summed over containers (2 + 1)
        (
            pod(containers=[res("limits", cpu="1", nvidia_gpu="2"), res("limits", cpu="1", nvidia_gpu="1")]),
            (2000, 0, 3, 1000),
        ),
        # whole GPUs given as requests only
        (pod(containers=[res(cpu="1", nvidia_gpu="1")]), (1000, 0, 1, 1000)),
        (pod(containers=[res(cpu="1", nvidia_gpu="0")]), (1000, 0, 0, 0)),
        # openb: milli per GPU, count default 1
        (pod({MILLI: "500"}), (1000, 1024, 1, 500)),
        (pod({MILLI: "1000", COUNT: "4"}), (1000, 1024, 4, 1000)),
        (pod({MILLI: "250", COUNT: "1"}), (1000, 1024, 1, 250)),
        # KAI: round(f * 1000)
        (pod({FRACTION: "0.5"}), (1000, 1024, 1, 500)),
        (pod({FRACTION: "1"}), (1000, 1024, 1, 1000)),
        (pod({FRACTION: "0.3333"}), (1000, 1024, 1, 333)),
    ],
)
def test_gpu_conventions(obj: dict[str, Any], expected: tuple[int, int, int, int]) -> None:
    assert request(obj) == expected


@pytest.mark.parametrize(
    ("obj", "field", "reason"),
    [
        (pod({MILLI: "abc"}), f"annotation '{MILLI}'", "'abc' is not an integer in 1..1000"),
        (pod({MILLI: "0"}), f"annotation '{MILLI}'", "'0' is not an integer in 1..1000"),
        (pod({MILLI: "1001"}), f"annotation '{MILLI}'", "'1001' is not an integer in 1..1000"),
        (pod({MILLI: "-5"}), f"annotation '{MILLI}'", "'-5' is not an integer in 1..1000"),
        (
            pod({MILLI: "500", COUNT: "2"}),
            f"annotation '{MILLI}'",
            "a 2-GPU pod must ask whole GPUs (1000), got 500",
        ),
        (pod({MILLI: "500", COUNT: "9"}), f"annotation '{COUNT}'", "'9' is not an integer in 1..8"),
        (pod({COUNT: "2"}), f"annotation '{COUNT}'", f"needs '{MILLI}' too"),
        (pod({FRACTION: "0"}), f"annotation '{FRACTION}'", "'0' is not a fraction in (0, 1] (>= 0.001)"),
        (pod({FRACTION: "1.5"}), f"annotation '{FRACTION}'", "'1.5' is not a fraction in (0, 1] (>= 0.001)"),
        (
            pod({FRACTION: "half"}),
            f"annotation '{FRACTION}'",
            "'half' is not a fraction in (0, 1] (>= 0.001)",
        ),
        (pod({FRACTION: "nan"}), f"annotation '{FRACTION}'", "'nan' is not a fraction in (0, 1] (>= 0.001)"),
        (
            pod(containers=[res("limits", nvidia_gpu="9")]),
            "resources 'nvidia.com/gpu'",
            "9 GPUs on one pod; a node has at most 8 (use a gang of pods)",
        ),
        (
            pod(containers=[res("limits", nvidia_gpu="1.5")]),
            "spec.containers[0].resources.limits['nvidia.com/gpu']",
            "'1.5' is not a whole number of GPUs",
        ),
        (
            pod({MILLI: "500"}, containers=[res("limits", nvidia_gpu="1")]),
            f"annotation '{MILLI}'",
            f"more than one GPU convention on one pod (resources 'nvidia.com/gpu', annotation '{MILLI}')",
        ),
        (
            pod({MILLI: "500", FRACTION: "0.5"}),
            f"annotation '{FRACTION}'",
            f"more than one GPU convention on one pod (annotation '{MILLI}', annotation '{FRACTION}')",
        ),
        (pod(containers=[res(cpu="-1")]), "spec.containers[0].resources.requests['cpu']", "'-1' is negative"),
        (
            pod(containers=[res(memory="lots")]),
            "spec.containers[0].resources.requests['memory']",
            "'lots' is not a quantity",
        ),
        (pod(priority="high"), "spec.priority", "'high' is not an integer"),
        (
            pod({"kueue.x-k8s.io/podset-required-topology": " "}),
            "annotation 'kueue.x-k8s.io/podset-required-topology'",
            "' ' is not a node label key",
        ),
    ],
)
def test_malformed_requests_name_the_field(obj: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ObjectError) as e:
        pod_request(obj, ModelRegistry())
    assert (e.value.obj, e.value.field, e.value.reason) == ("pods/default/foo", field, reason)
    assert str(e.value) == f"pods/default/foo: {field}: {reason}"


def test_the_documented_error_text() -> None:
    with pytest.raises(ObjectError) as e:
        pod_request(pod({MILLI: "abc"}), ModelRegistry())
    assert (
        str(e.value)
        == "pods/default/foo: annotation 'alibabacloud.com/gpu-milli': 'abc' is not an integer in 1..1000"
    )


def test_each_convention_alone() -> None:
    ref = "pods/x/y"
    assert whole_gpus(ref, {"containers": [res("limits", nvidia_gpu="2")]}) == (2, 1000)
    assert whole_gpus(ref, {"containers": [res(cpu="1")]}) is None
    assert openb_gpus(ref, {MILLI: "300"}) == (1, 300)
    assert openb_gpus(ref, {}) is None
    assert kai_gpus(ref, {FRACTION: "0.25"}) == (1, 250)
    assert kai_gpus(ref, {}) is None


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "cpu"),
    [
        # sum over containers: 1 + 0.5
        ([res(cpu="1"), res(cpu="500m")], None, None, 1500),
        # limits when requests are absent
        ([res("limits", cpu="2")], None, None, 2000),
        # a request wins over a limit
        ([{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "4"}}}], None, None, 1000),
        # a regular init container larger than the app containers: max(1, 3) = 3
        ([res(cpu="1")], [res(cpu="3")], None, 3000),
        # a smaller init container: max(2, 1) = 2
        ([res(cpu="2")], [res(cpu="1")], None, 2000),
        # a sidecar (restartPolicy Always) adds to the app containers: 1 + 0.5; the regular init
        # after it runs beside it: 2 + 0.5 = 2.5 -> max(1.5, 2.5)
        ([res(cpu="1")], [{**res(cpu="500m"), "restartPolicy": "Always"}, res(cpu="2")], None, 2500),
        # pod overhead is added: 1 + 0.25
        ([res(cpu="1")], None, {"cpu": "250m"}, 1250),
    ],
)
def test_cpu_as_kubernetes_computes_it(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None,
    overhead: dict[str, str] | None,
    cpu: int,
) -> None:
    extra = {"overhead": overhead} if overhead else {}
    assert request(pod(containers=containers, init=init, **extra))[0] == cpu


def test_pod_fields() -> None:
    models = ModelRegistry()
    obj = pod(
        {
            "alibabacloud.com/gpu-card-model": "V100M16|NewCard",
            MILLI: "500",
            "kueue.x-k8s.io/podset-required-topology": "example.com/rack",
            "kueue.x-k8s.io/podset-preferred-topology": "example.com/block",
        },
        labels={"scheduling.x-k8s.io/pod-group": "g1"},
        priority=7,
    )
    r = pod_request(obj, models)
    assert (r.namespace, r.name, r.uid, r.key, r.spec.name) == (
        "default",
        "foo",
        "u1",
        "default/foo",
        "default/foo",
    )
    assert r.pod_group == "g1"
    assert r.constraint == Constraint("required", "example.com/rack")  # required wins
    assert r.priority == 7
    assert r.created_s == 1714564800.0
    new_id = len(MODEL_ID)  # the first model gpudefrag does not know gets the next id
    assert r.spec.gpu_model_mask == (1 << MODEL_ID["V100M16"]) | (1 << new_id)
    assert models.id_of("NewCard") == new_id


def test_defaults() -> None:
    obj = pod()
    del obj["metadata"]["namespace"], obj["metadata"]["creationTimestamp"]
    obj["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-preferred-topology": "example.com/block"}
    r = pod_request(obj, ModelRegistry())
    assert (r.namespace, r.priority, r.created_s, r.pod_group) == ("default", 0, 0.0, None)
    assert r.spec.gpu_model_mask == ANY_GPU_MODEL
    assert r.constraint == Constraint("preferred", "example.com/block")


@pytest.mark.parametrize(
    ("value", "gpus"),
    [(None, None), ("0", (0,)), ("2,3", (2, 3)), (" 1 , 7 ", (1, 7)), ("", ())],
)
def test_gpu_assignment(value: str | None, gpus: tuple[int, ...] | None) -> None:
    ann = {} if value is None else {"alibabacloud.com/gpu-index": value}
    assert gpu_assignment(pod(ann)) == gpus
    if gpus is not None:
        assert gpu_assignment(pod({"alibabacloud.com/gpu-index": gpu_index_value(gpus)})) == gpus


@pytest.mark.parametrize("value", ["a", "1,1", "-1", "8", "1,,2", "1.5"])
def test_bad_gpu_assignment(value: str) -> None:
    with pytest.raises(ObjectError) as e:
        gpu_assignment(pod({"alibabacloud.com/gpu-index": value}))
    assert e.value.field == "annotation 'alibabacloud.com/gpu-index'"
    assert str(e.value).startswith("pods/default/foo: ")
