"""``gpudefrag plan`` through ``gpudefrag.cli.main``: text, JSON, a live cluster, clear errors.

The snapshot is ``test_whatif.scenario()`` (worked out in that module's docstring): big is
blocked by fragmentation, the plan frees n2 by moving w3 and w4 for 380 GPU-seconds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_k8s_snapshot import write_list
from test_whatif import scenario

from gpudefrag.cli import main

NOW = ["--now", "2024-05-01T12:00:00Z"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code (a usage error exits through argparse), stdout, stderr."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_text_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_list(tmp_path / "snap.json", scenario())
    code, out, err = run(["plan", "--snapshot", str(f), *NOW], capsys)
    assert code == 0 and err == ""
    assert "8.00 of 12 GPUs (66.67 %)" in out
    assert "FGD fragmentation  1.75 GPUs = 43.8 % of the 4.00 unallocated GPUs" in out
    assert "blocked by fragmentation (1): default/big" in out
    assert "not enough free capacity (1): default/cpuhog" in out
    assert "for default/big: free node n2" in out
    assert "move default/w3  n2 -> n1  GPUs 2,3  cost 280.0 GPU-s" in out
    assert "total: 2 move(s), cost 380.0 GPU-s" in out
    lines = {line.split("%")[0].strip() for line in out.splitlines() if line.startswith("  (")}
    assert lines == {
        "(a) pending pods placed now     75.00",
        "(b) the same after the plan    100.00",
        "(c) every pod re-placed        100.00",
    }


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_list(tmp_path / "snap.json", scenario())
    code, out, _ = run(["plan", "--snapshot", str(f), "--json", "--restart-s", "0", *NOW], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["now"] == "2024-05-01T12:00:00Z" and doc["policy"] == "fgd"
    assert (doc["nodes"], doc["running"], doc["pending"]) == (3, 5, 3)
    assert doc["fragmentation"]["frag_gpus"] == 1.75 and doc["fragmentation"]["allocation_pct"] == 66.667
    assert doc["pending_pods"] == {
        "fits_now": ["default/small"],
        "blocked_by_fragmentation": ["default/big"],
        "no_capacity": ["default/cpuhog"],
    }
    # restart 0: w3 2 x (50 + 30) = 160, w4 1 x (10 + 30) = 40
    plan = doc["plan"]
    assert plan["total_cost_gpu_s"] == 200.0 and plan["moves"] == 2 and plan["unplanned"] == []
    assert {m["pod"]: m["gpus"] for m in plan["plans"][0]["moves"]} == {
        "default/w3": [2, 3],
        "default/w4": [3],
    }
    placement = doc["placement"]
    assert [
        placement[k]["allocation_pct"] for k in ("current", "pending_placed", "after_plan", "repacked")
    ] == [
        66.667,
        75.0,
        100.0,
        100.0,
    ]
    assert placement["repacked"]["unplaced"] == ["default/small", "default/cpuhog"]
    assert doc["topology"] is None


def test_topology_domains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # n1, n2 in rack r0 and n3 in r1, one block: free whole GPUs 2 + 1 = 3 and 1
    items = scenario()
    for obj, rack in zip(items[:3], ("r0", "r0", "r1")):
        obj["metadata"]["labels"].update({"example.com/block": "b", "example.com/rack": rack})
    f = write_list(tmp_path / "snap.json", items)
    levels = tmp_path / "topo.yaml"
    levels.write_text(
        "kind: Topology\nspec:\n  levels:\n  - nodeLabel: example.com/block\n  - nodeLabel: example.com/rack\n"
        "  - nodeLabel: kubernetes.io/hostname\n"
    )
    code, out, _ = run(
        ["plan", "--snapshot", str(f), "--topology-levels", str(levels), "--json", *NOW], capsys
    )
    assert code == 0
    assert json.loads(out)["topology"] == [
        {"level": "example.com/block", "domain": "b", "nodes": 3, "gpus": 12, "free_gpus": 4},
        {"level": "example.com/rack", "domain": "b/r0", "nodes": 2, "gpus": 8, "free_gpus": 3},
        {"level": "example.com/rack", "domain": "b/r1", "nodes": 1, "gpus": 4, "free_gpus": 1},
    ]


def _bad_gpu_milli(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items[-1]["metadata"]["annotations"]["alibabacloud.com/gpu-milli"] = "abc"
    return items


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (
            None,
            "pods/default/cpuhog: annotation 'alibabacloud.com/gpu-milli': 'abc' is not an integer in 1..1000",
        ),
        ("{oops", "not valid JSON"),
    ],
)
def test_a_malformed_snapshot_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, needle: str
) -> None:
    f = tmp_path / "snap.json"
    if content is None:
        write_list(f, _bad_gpu_milli(scenario()))
    else:
        f.write_text(content)
    code, out, err = run(["plan", "--snapshot", str(f), *NOW], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gpudefrag: error: {f}") and needle in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--restart-s", "-1"], "must be a finite number >= 0"),
        (["--now", "someday"], "not an RFC 3339 time"),
        (["--kubeconfig", "x"], "not allowed with argument --snapshot"),
    ],
)
def test_bad_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    f = write_list(tmp_path / "snap.json", scenario())
    code, _, err = run(["plan", "--snapshot", str(f), *argv], capsys)
    assert code == 2 and needle in err and "Traceback" not in err


def test_a_source_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan"], capsys)
    assert code == 2 and "one of the arguments --snapshot --kubeconfig is required" in err


# ----------------------------------------------------------------------------- a live cluster
class _Lists(BaseHTTPRequestHandler):
    """Answers the two list calls ``plan`` makes; ``server.objects`` holds the scenario."""

    def do_GET(self) -> None:
        objects = self.server.objects  # type: ignore[attr-defined]
        path = self.path.split("?")[0]
        kind = {"/api/v1/nodes": "Node", "/api/v1/pods": "Pod"}.get(path)
        if kind is None or self.server.status != 200:  # type: ignore[attr-defined]
            code = 404 if kind is None else self.server.status  # type: ignore[attr-defined]
            body = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "code": code,
                "message": "forbidden",
            }
        else:
            code = 200
            items = [o for o in objects if o["kind"] == kind]
            body = {
                "kind": f"{kind}List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "1"},
                "items": items,
            }
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ThreadingHTTPServer, Path]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Lists)
    server.daemon_threads = True
    server.objects = scenario()  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp_path / "kubeconfig"
    url = f"http://127.0.0.1:{server.server_address[1]}"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
                "current-context": "x",
            }
        )
    )
    try:
        yield server, config
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_kubeconfig_lists_the_cluster(
    cluster: tuple[ThreadingHTTPServer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, config = cluster
    code, out, _ = run(["plan", "--kubeconfig", str(config), "--json", *NOW], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["source"] == str(config) and (doc["nodes"], doc["running"], doc["pending"]) == (3, 5, 3)
    assert doc["plan"]["total_cost_gpu_s"] == 380.0


def test_kubeconfig_errors_exit_2(
    cluster: tuple[ThreadingHTTPServer, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server, config = cluster
    server.status = 403  # type: ignore[attr-defined]
    code, _, err = run(["plan", "--kubeconfig", str(config), *NOW], capsys)
    assert code == 2 and f"{config}: the API server answered 403" in err and "Traceback" not in err
    code, _, err = run(["plan", "--kubeconfig", str(tmp_path / "none"), *NOW], capsys)
    assert code == 2 and "no such kubeconfig file" in err
    server.status = 200  # type: ignore[attr-defined]
    server.objects[-1]["metadata"]["annotations"]["gpu-fraction"] = "2"  # type: ignore[attr-defined]
    code, _, err = run(["plan", "--kubeconfig", str(config), *NOW], capsys)
    assert code == 2 and f"{config}: pods/default/cpuhog: annotation 'gpu-fraction'" in err
