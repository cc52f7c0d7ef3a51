"""``bench --gpus N --stream openb``: the stream's bookkeeping, and the index deciding what the
full scan decides on the same arrivals."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_mirror
from gpudefrag.cli import main
from gpudefrag.experiments.bench.stream import StreamResult, bench_stream, format_stream


@needs_mirror
@pytest.mark.parametrize("policy", ["fgd", "bestfit"])
def test_index_and_scan_choose_the_same_nodes_on_the_stream(policy: str) -> None:
    index, scan = bench_stream("openb_pod_list_default", 7000, policy, decisions=300, seed=3)
    assert (index.mode, scan.mode) == ("index", "scan")
    assert index.nodes == scan.nodes >= 7000 // 8 and index.gpus >= 7000
    assert 84.0 <= index.fill_pct <= 86.0
    assert index.latency_ms.size == scan.latency_ms.size == 300
    assert np.array_equal(index.node, scan.node)  # exactly the scan's decisions
    assert index.placed > 0
    # a decision is cold the first time its shape comes, so cold ones count the shapes
    assert int(index.cold.sum()) == index.shapes == scan.shapes and index.cold[0]
    assert index.index_mib and index.index_mib[-1] > 0 and scan.index_mib[-1] == 0.0
    text = format_stream([index, scan])
    assert f"{policy:<8} index" in text and f"{policy:<8} scan" in text


@needs_mirror
def test_the_same_seed_gives_the_same_stream() -> None:
    a = bench_stream("openb_pod_list_default", 5000, "fgd", decisions=100, seed=5, modes=("index",))[0]
    b = bench_stream("openb_pod_list_default", 5000, "fgd", decisions=100, seed=5, modes=("index",))[0]
    c = bench_stream("openb_pod_list_default", 5000, "fgd", decisions=100, seed=6, modes=("index",))[0]
    assert np.array_equal(a.node, b.node) and np.array_equal(a.cold, b.cold)
    assert not np.array_equal(a.node, c.node)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["bench", "--stream", "openb"], "--stream: needs --gpus"),
        (["bench", "--gpus", "1000", "--stream", "openb", "--scan"], "--scan: not with --stream"),
        (["bench", "--sweep", "1000", "--stream", "openb"], "--stream: not with --sweep"),
        (["bench", "--gpus", "1000", "--batch", "8"], "--batch: only with --stream"),
        (
            ["bench", "--gpus", "1000", "--stream", "openb", "--batch", "8", "--k8s"],
            "--k8s: not with --batch",
        ),
    ],
)
def test_stream_options_that_do_not_fit_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


@needs_mirror
def test_the_k8s_path_decides_what_the_policy_decides_on_the_same_cluster() -> None:
    """Through the scheduler's cache and cycle, index or scan, each arrival lands where the policy
    alone puts it on the same filled state (pod objects read back to the same requests)."""
    from gpudefrag.experiments.common.inputs import workload_inputs
    from gpudefrag.k8s.stream_bench import _fill, bench_k8s_stream
    from gpudefrag.policies.registry import make_policy

    inputs = workload_inputs("openb_pod_list_default")
    typical = inputs.typical
    runs = bench_k8s_stream(inputs.nodes, inputs.pods, typical, 6000, "fgd", decisions=200, seed=4)
    index, scan = (StreamResult(**vars(r)) for r in runs)
    assert (index.mode, scan.mode) == ("k8s index", "k8s scan")
    assert 84.0 <= index.fill_pct <= 86.0
    assert np.array_equal(index.node, scan.node) and index.placed > 0
    assert index.trees[0] > 0 and scan.trees == (0, 0)
    filled = _fill(inputs.nodes, inputs.pods, 6000, make_policy("fgd", typical), 4, 0.85)
    cache = filled.cache()
    cordoned = np.array(cache.unusable_nodes(), dtype=np.int64)
    assert cordoned.size == cache.state.num_nodes // 100  # one node in a hundred
    state = cache.state.copy()
    state.mask_many(cordoned)
    policy = make_policy("fgd", typical)
    direct = []
    for k in range(200):
        p = policy.select(state, filled.arrivals.pod(filled.first + k))
        direct.append(-1 if p is None else p.node)
        if p is not None:
            state.bind(p)
    assert index.node.tolist() == direct
    assert not np.isin(index.node, cordoned).any()
    assert "fgd k8s index and k8s scan chose the same node for 200 of 200" in format_stream([index, scan])


def test_a_batch_of_no_pods_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--gpus", "1000", "--stream", "openb", "--batch", "0"])
    assert exc.value.code == 2
    assert "--batch: must be an integer in 1..256, got '0'" in capsys.readouterr().err


def test_k8s_needs_the_stream(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--gpus", "1000", "--k8s"]) == 2
    assert "--k8s: only with --stream" in capsys.readouterr().err


@needs_mirror
def test_the_solver_batches_decide_alike_with_the_index_or_scanning() -> None:
    """The batch placer on the stream: FGD's plan and candidates from the attached index give the
    placements that scanning every node gives, batch for batch; every batch is decided (placed
    or refused) and the placements fit (each is bound on the state as the stream goes)."""
    from gpudefrag.experiments.bench.stream_batch import bench_batch_stream, format_batch_stream

    index, scan = bench_batch_stream("openb_pod_list_default", 6000, batch=8, decisions=96, seed=2)
    assert (index.mode, scan.mode) == ("index", "scan")
    assert index.batch_ms.size == scan.batch_ms.size == 12
    assert index.placements == scan.placements and index.placed > 48
    assert all(len(b) <= 8 for b in index.placements)
    assert index.attach_s > 0 and scan.attach_s == 0
    assert "index and scan placed 12 of 12 batches alike" in format_batch_stream([index, scan])
