"""``import pods``: hand-made ``kubectl get pods -A -o json`` dumps taken over time load to the jobs
worked out below (gangs, shared GPUs, pods never started, still running, clock skew), and every
malformed pod is one error naming the file, the item and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudefrag.cli import main
from gpudefrag.errors import InputError
from gpudefrag.k8s.history import import_pod_dumps
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.jobtrace import load_job_trace


def _t(hms: str) -> str:
    return f"2026-11-01T{hms}Z"


def pod(
    name: str,
    created: str,
    gpus: int = 0,
    ann: dict[str, str] | None = None,
    group: str | None = None,
    phase: str = "Running",
    started: str | None = None,
    finished: str | None = None,
    start_time: str | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    """A v1 Pod as the API returns it, with one container."""
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
    if started and finished:
        state = {"terminated": {"startedAt": _t(started), "finishedAt": _t(finished), "exitCode": 0}}
    elif started:
        state = {"running": {"startedAt": _t(started)}}
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"name": "main", "state": state}]}
    if start_time:
        status["startTime"] = _t(start_time)
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": _t(created),
            "labels": {"scheduling.x-k8s.io/pod-group": group} if group else {},
            "annotations": ann or {},
        },
        "spec": spec,
        "status": status,
    }


def _dump(tmp_path: Path, name: str, pods: list[dict[str, Any]]) -> Path:
    f = tmp_path / name
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}, indent=2))
    return f


MILLI = {"alibabacloud.com/gpu-milli": "500"}
EARLY = [
    pod("p-a", "00:00:00", 2, started="00:00:30"),
    pod("p-b", "00:10:00", ann=MILLI, start_time="00:10:05"),  # no container start yet
    pod("p-c", "00:20:00", 1, phase="Pending"),
    pod("train-0", "00:30:00", 8, group="train", started="00:31:00", priority=1000),
    pod("train-1", "00:30:01", 8, group="train", started="00:32:00", priority=1000),
    pod("web", "00:00:00", started="00:00:01"),  # no GPU
]
LATE = [
    pod("p-a", "00:00:00", 2, phase="Succeeded", started="00:00:30", finished="02:00:30"),
    pod("p-b", "00:10:00", ann=MILLI, started="00:10:07", start_time="00:10:05"),
    pod("p-c", "00:20:00", 1, phase="Pending"),
    pod(
        "train-0",
        "00:30:00",
        8,
        group="train",
        phase="Succeeded",
        started="00:31:00",
        finished="02:31:00",
        priority=1000,
    ),
    pod(
        "train-1",
        "00:30:01",
        8,
        group="train",
        phase="Succeeded",
        started="00:32:00",
        finished="02:32:00",
        priority=1000,
    ),
    # KAI's fraction; its node's clock runs 2 s behind the API server's
    pod("p-d", "02:50:00", ann={"gpu-fraction": "0.25"}, started="02:49:58"),
    pod("eval-0", "01:00:00", 4, group="eval", started="01:00:10"),
    pod("eval-1", "01:00:00", 4, group="eval", phase="Pending"),
    pod("web", "00:00:00", started="00:00:01"),
]


def test_dumps_over_time_load_to_the_expected_jobs(tmp_path: Path) -> None:
    got = import_pod_dumps([_dump(tmp_path, "early.json", EARLY), _dump(tmp_path, "late.json", LATE)])
    # origin 00:00:00; the latest time in the dumps is p-d's creation, 02:50:00 = 10,200 s, when
    # the pods still running end
    assert got.jobs == [
        Job(0, 0.0, 7200.0, 2, 1000, 0, None, "default/p-a"),
        # started at the earliest start any dump shows: status.startTime 00:10:05 in the early
        # dump (the late one shows its container start, 00:10:07)
        Job(1, 600.0, 10_200.0 - 605.0, 1, 500, 0, None, "default/p-b"),
        # the gang: first member created 00:30:00, last started 00:32:00, last ended 02:32:00
        Job(2, 1800.0, 7200.0, 16, 1000, 1000, None, "default/train"),
        # started 2 s before it was created: moved to its creation, running until 02:50:00
        Job(3, 10_200.0, 1.0, 1, 250, 0, None, "default/p-d"),
    ]
    assert got.notes == {
        "pods without GPUs": 1,
        "never started": 1,
        "gangs with a member that never started": 1,
        "still running (ended at the dump time: a lower bound)": 2,
        "start before submission (moved to the submission)": 1,
        "ran under 1 s (ran 1 s)": 1,  # p-d: started at 02:50:00, the latest time in the dumps
    }


def test_a_later_dump_given_first_still_wins(tmp_path: Path) -> None:
    late, early = _dump(tmp_path, "late.json", LATE), _dump(tmp_path, "early.json", EARLY)
    a = import_pod_dumps([early, late]).jobs
    assert import_pod_dumps([late, early]).jobs == a


def test_the_command_writes_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.csv"
    late = _dump(tmp_path, "late.json", LATE)
    assert main(["import", "pods", str(late), "--out", str(out), "--now", "2026-11-01T03:00:00Z"]) == 0
    assert "wrote 4 jobs" in capsys.readouterr().out
    jobs = load_job_trace(out)
    assert [(j.gpus, j.gpu_milli) for j in jobs] == [(2, 1000), (1, 500), (16, 1000), (1, 250)]
    assert jobs[1].duration_s == 3 * 3600.0 - 607.0  # running until --now (this dump alone)


@pytest.mark.parametrize(
    ("broken", "field"),
    [
        ({"metadata": {"creationTimestamp": "yesterday"}}, "metadata.creationTimestamp"),
        ({"metadata": {"creationTimestamp": None}}, "metadata.creationTimestamp"),
        ({"spec": {"priority": "high"}}, "spec.priority"),
        (
            {"metadata": {"annotations": {"alibabacloud.com/gpu-milli": "1500"}}},
            "annotation 'alibabacloud.com/gpu-milli'",
        ),
        (
            {"status": {"containerStatuses": [{"state": {"running": {"startedAt": "soon"}}}]}},
            "status.containerStatuses[0].state.running.startedAt",
        ),
    ],
)
def test_a_malformed_pod_names_file_item_and_field(
    tmp_path: Path, broken: dict[str, Any], field: str
) -> None:
    bad = pod("bad", "00:00:00", 1, started="00:00:01")
    for part, values in broken.items():
        bad[part].update(values)
    f = _dump(tmp_path, "d.json", [EARLY[0], bad])
    with pytest.raises(InputError) as e:
        import_pod_dumps([f])
    assert e.value.path == str(f) and e.value.column == field
    assert e.value.message.startswith("item 1 (pods/default/bad)")


def test_not_json_or_not_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"items": [\n  {"kind": "Pod",\n')
    with pytest.raises(InputError, match="not valid JSON") as e:
        import_pod_dumps([broken])
    assert e.value.line is not None
    nodes = _dump(tmp_path, "nodes.json", [{"kind": "Node", "metadata": {"name": "n1"}}])
    with pytest.raises(InputError, match="item 0: a Node, not a Pod"):
        import_pod_dumps([nodes])
    out = tmp_path / "trace.csv"
    assert main(["import", "pods", str(nodes), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()


def test_pods_gone_or_ended_without_a_finish_and_gangs_recreated(tmp_path: Path) -> None:
    first = [
        pod("gone", "00:00:00", 1, started="00:00:10"),  # running, then deleted before the next dump
        pod("evicted", "00:00:00", 1, started="00:00:20"),
        pod("w-0", "00:00:00", 8, group="g", started="00:01:00"),
        pod("w-1", "00:00:00", 8, group="g", started="00:01:00"),
        pod("clock", "01:00:00"),  # no GPU: only sets this dump's time (01:00:00)
    ]
    second = [
        pod("evicted", "00:00:00", 1, phase="Failed", start_time="00:00:20"),  # no finishedAt
        # the gang recreated after a failure: the same names, new pods (new uids)
        {
            **pod("w-0", "02:00:00", 8, group="g", started="02:01:00"),
            "metadata": {**pod("w-0", "02:00:00", 8, group="g")["metadata"], "uid": "uid-w-0-b"},
        },
        {
            **pod("w-1", "02:00:00", 8, group="g", started="02:02:00"),
            "metadata": {**pod("w-1", "02:00:00", 8, group="g")["metadata"], "uid": "uid-w-1-b"},
        },
        pod("clock", "03:00:00"),
    ]
    got = import_pod_dumps([_dump(tmp_path, "1.json", first), _dump(tmp_path, "2.json", second)])
    by_name = {(j.name, j.submit_s): j for j in got.jobs}
    assert by_name[("default/gone", 0.0)].duration_s == 3600.0 - 10.0  # ends at the last dump it was in
    assert (
        by_name[("default/evicted", 0.0)].duration_s == 3 * 3600.0 - 20.0
    )  # at the dump that shows it ended
    gangs = sorted((j.submit_s, j.gpus) for j in got.jobs if j.name == "default/g")
    assert gangs == [(0.0, 16), (7200.0, 16)]  # two incarnations of 16 GPUs, not one of 32
    assert got.notes["gone from a later dump (ended at the last dump it was in: a lower bound)"] == 3
    assert got.notes["ended without a finish time (ended at its dump's time)"] == 1
    assert got.notes["gangs recreated (one job per incarnation)"] == 1
