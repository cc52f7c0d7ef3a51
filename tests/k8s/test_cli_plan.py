"""``gpudefrag plan`` through ``gpudefrag.cli.main``: text, JSON, a live cluster, clear errors.

The snapshot is ``test_whatif.scenario()`` (worked out in that module's docstring): big is
blocked by fragmentation, the controller's plan frees n2 by moving w3 and w4 for 380 GPU-seconds,
and ``gpudefrag defrag --dry-run`` on the same snapshot prints the same plans.
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
from test_whatif import by_name, scenario

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
    assert "  n4    T4          4     4            -  usable" in out
    assert "8.00 of 16 GPUs (50.00 %)" in out
    assert "FGD fragmentation  2.00 GPUs = 25.0 % of the 8.00 unallocated GPUs" in out
    assert "GPU workload: 7 GPU pods in 4 typical shapes" in out
    assert "  default/big     4 GPUs  blocked by fragmentation" in out
    assert "for default/big: free node n2 by 2 moves, 0.106 GPU-h (380 GPU-s)" in out
    # w3: 50 s since its start + 30 s grace = 80 s = 1.3 min on 2 GPUs = 0.044 GPU-h; + 60 s restart: 0.078
    assert (
        "default/w3  n2 -> n1    2,3                 1.3 min x 2 GPUs = 0.044 GPU-h       0.078 GPU-h" in out
    )
    assert (
        'echo \'{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"w3",'
        '"namespace":"default"}}\' | kubectl create --raw /api/v1/namespaces/default/pods/w3/eviction -f -'
    ) in out
    assert "kubectl annotate node n2 --overwrite gpudefrag.io/reserved-for=default/big" in out
    rows = {
        line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and "GPUs" not in line
    }
    assert "  pending pods placed now       9.00   7.00        1.57        9.8 %" in out
    assert (
        "  the same after the plan      13.00   3.00        0.43        2.7 %  2 + 2 moved           1" in out
    )
    assert "  change made by the plan      +4.00  -4.00       -1.14      -7.1 pp" in out
    assert rows


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write_list(tmp_path / "snap.json", scenario())
    code, out, _ = run(["plan", "--snapshot", str(f), "--json", "--restart-s", "0", *NOW], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["now"] == "2024-05-01T12:00:00Z" and doc["settings"]["policy"] == "fgd"
    assert doc["settings"]["max_moves"] == 8 and doc["settings"]["restart_s"] == 0.0
    assert (len(doc["nodes"]), doc["running"], len(doc["pending_pods"])) == (4, 5, 3)
    assert doc["fragmentation"]["frag_gpus"] == 2.0 and doc["fragmentation"]["allocation_pct"] == 50.0
    # restart 0: w3 2 x (50 + 30) = 160, w4 1 x (10 + 30) = 40
    assert doc["total_cost_gpu_s"] == 200.0 and doc["moves"] == 2
    assert {m["pod"]: m["gpus"] for m in doc["plans"][0]["moves"]} == {
        "default/w3": [2, 3],
        "default/w4": [3],
    }
    assert len(doc["kubectl"]) == 3
    placement = doc["placement"]
    assert [placement[k]["allocation_pct"] for k in ("now", "pending_placed", "after_plan")] == [
        50.0,
        56.25,
        81.25,
    ]
    assert doc["topology"] is None


def _variants() -> dict[str, list[dict[str, Any]]]:
    """Snapshots on which plan and defrag --dry-run must agree: the scenario, and the scenario
    with a taint big tolerates on n3 (w4 then moves to n4)."""
    tainted = scenario()
    by_name(tainted, "n3")["spec"]["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    by_name(tainted, "big")["spec"]["tolerations"] = [{"key": "dedicated", "value": "ml"}]
    return {"scenario": scenario(), "tainted": tainted}


@pytest.mark.parametrize("variant", ["scenario", "tainted"])
@pytest.mark.parametrize("flags", [[], ["--max-moves", "1"], ["--restart-s", "300", "--headroom", "0"]])
def test_plan_is_what_defrag_dry_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: str, flags: list[str]
) -> None:
    f = write_list(tmp_path / "snap.json", _variants()[variant])
    code, out, _ = run(["plan", "--snapshot", str(f), "--json", *flags, *NOW], capsys)
    assert code == 0
    planned = json.loads(out)["plans"]
    code, out, _ = run(["defrag", "--dry-run", "--snapshot", str(f), *flags, *NOW], capsys)
    assert code == 0
    dry = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert dry == planned
    assert (dry != []) == (flags != ["--max-moves", "1"])


def test_an_old_snapshot_needs_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the scenario's newest time is w4's start, T0 - 10 s, years before the clock
    f = write_list(tmp_path / "snap.json", scenario())
    for command in (["plan"], ["defrag", "--dry-run"]):
        code, out, err = run([*command, "--snapshot", str(f)], capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert f"{f}: its newest timestamp is 2024-05-01T11:59:50Z" in err and "--now snapshot" in err
    code, out, _ = run(["plan", "--snapshot", str(f), "--now", "snapshot", "--json"], capsys)
    assert code == 0 and json.loads(out)["now"] == "2024-05-01T11:59:50Z"


def test_topology_domains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # n1, n2 in rack r0; n3, n4 in r1; one block: wholly free GPUs 2 + 1 = 3 and 1 + 4 = 5
    items = scenario()
    for obj, rack in zip(items[:4], ("r0", "r0", "r1", "r1")):
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
        {"level": "example.com/block", "domain": "b", "nodes": 4, "gpus": 16, "free_gpus": 8},
        {"level": "example.com/rack", "domain": "b/r0", "nodes": 2, "gpus": 8, "free_gpus": 3},
        {"level": "example.com/rack", "domain": "b/r1", "nodes": 2, "gpus": 8, "free_gpus": 5},
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
        (["--policy", "nope"], "argument --policy: invalid choice: 'nope'"),
        (["--restart-s", "-1"], "argument --restart-s: must be a finite number >= 0"),
        (["--max-moves", "0"], "argument --max-moves: must be an integer in 1..64"),
        (["--headroom", "1"], "argument --headroom: must be a finite number >= 0 and < 1"),
        (["--now", "someday"], "not 'snapshot', an RFC 3339 time or epoch seconds"),
        (["--kubeconfig", "x"], "not allowed with argument --snapshot"),
    ],
)
def test_bad_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    f = write_list(tmp_path / "snap.json", scenario())
    code, _, err = run(["plan", "--snapshot", str(f), *argv], capsys)
    assert code == 2 and needle in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--snapshot", "{f}"], "--snapshot: plans on files only with --dry-run"),
        (
            ["--snapshot", "{f}", "--dry-run", "--interval-s", "5"],
            "--interval-s: only for a controller running",
        ),
        (["--kubeconfig", "{f}", "--now", "0"], "--now: only with --dry-run"),
    ],
)
def test_defrag_refuses_flags_that_do_not_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    f = write_list(tmp_path / "snap.json", scenario())
    code, _, err = run(["defrag", *(a.format(f=f) for a in argv), *([] if "--now" in argv else NOW)], capsys)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_a_source_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan"], capsys)
    assert code == 2 and "one of the arguments --snapshot --kubeconfig is required" in err


def test_plan_runs_the_profile_it_is_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = write_list(tmp_path / "snap.json", scenario())
    now = ["--now", "2024-05-01T12:00:00Z", "--json"]
    # the shipped kubernetes profile with plans of one move (a profile file sets every setting it
    # needs: what it leaves out takes the schema's defaults, not another profile's)
    from importlib import resources

    text = (resources.files("gpudefrag.profiles") / "kubernetes.toml").read_text()
    one_move = tmp_path / "one.toml"
    one_move.write_text(text.replace("max_moves = 8", "max_moves = 1"))
    assert main(["plan", "--snapshot", str(snap), *now]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["plans"] and default["settings"]["max_moves"] == 8
    assert main(["plan", "--snapshot", str(snap), "--config", str(one_move), *now]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["plans"] == [] and one["settings"]["max_moves"] == 1  # as --max-moves 1 (test_whatif)
    assert main(["plan", "--snapshot", str(snap), "--config", str(one_move), "--max-moves", "8", *now]) == 0
    assert json.loads(capsys.readouterr().out)["plans"] == default["plans"]  # the flag wins


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
    assert doc["source"] == str(config) and (len(doc["nodes"]), doc["running"], len(doc["pending_pods"])) == (
        4,
        5,
        3,
    )
    assert doc["total_cost_gpu_s"] == 380.0


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
