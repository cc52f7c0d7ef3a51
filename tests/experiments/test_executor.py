"""The sweep executor: in-process, a local process pool and a Dask cluster give the same results.

The Dask side is a ``distributed.LocalCluster`` of 2 worker processes bound to 127.0.0.1.  The
local pool forks, so everything it computes is computed first (fixture ``pool_results``), before
the cluster and its client add threads to this process.
"""

from __future__ import annotations

import math
import socket
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from distributed import LocalCluster

from gpudefrag.cli import main
from gpudefrag.errors import ConfigError
from gpudefrag.experiments.calib.gate import RunCheck, run_calibration
from gpudefrag.experiments.common import environment, executor
from gpudefrag.experiments.common.executor import RunExecutor

SPECS = list(range(0, 40, 3))
CALIB = {"workloads": ["openb_pod_list_default"], "policies": ["fgd", "random"], "seeds": [42]}


def _calib(ex: RunExecutor) -> list[RunCheck]:
    return run_calibration(progress=False, executor=ex, **CALIB)


@pytest.fixture(scope="module")
def pool_results(request: pytest.FixtureRequest) -> dict[str, object]:
    """What the local pool of 2 processes computes: factorials, and the calib subset when the
    dataset mirror is there (else ``None``)."""
    with RunExecutor(2) as ex:
        out: dict[str, object] = {"factorials": list(ex.map(math.factorial, SPECS))}
        try:
            request.getfixturevalue("mirror")
        except pytest.skip.Exception:
            out["calib"] = None
        else:
            out["calib"] = _calib(ex)
    return out


@pytest.fixture(scope="module")
def cluster(pool_results: dict[str, object]) -> Iterator[str]:
    """A 2-worker LocalCluster on 127.0.0.1 (after the pool's forks); yields its address."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as lc:
        yield lc.scheduler_address


def _same_run(a: RunCheck, b: RunCheck) -> bool:
    return (
        (a.workload, a.policy, a.seed, a.failed_pods) == (b.workload, b.policy, b.seed, b.failed_pods)
        and np.array_equal(a.curve, b.curve, equal_nan=True)
        and np.array_equal(a.frag_curve, b.frag_curve, equal_nan=True)
        and np.array_equal(a.published, b.published, equal_nan=True)
    )


def test_serial_and_local_pool_give_the_same_pairs(pool_results: dict[str, object]) -> None:
    with RunExecutor(1) as ex:
        assert ex.describe() == "in-process, serial" and ex.local
        serial = list(ex.map(math.factorial, SPECS))
    assert serial == [(n, math.factorial(n)) for n in SPECS]  # in-process keeps the spec order
    pooled = pool_results["factorials"]
    assert isinstance(pooled, list) and sorted(pooled) == serial
    assert RunExecutor(2).describe() == "local process pool, 2 workers"


def test_dask_gives_the_same_pairs_and_describes_itself(
    pool_results: dict[str, object], cluster: str
) -> None:
    with RunExecutor(dask_address=cluster) as ex:
        assert ex.describe() == f"dask {cluster}, 2 workers" and not ex.local
        on_dask = sorted(ex.map(math.factorial, SPECS))
    pooled = pool_results["factorials"]
    assert isinstance(pooled, list) and on_dask == sorted(pooled)
    assert on_dask == [(n, math.factorial(n)) for n in SPECS]


@pytest.mark.parametrize("where", ["serial", "pool", "dask"])
def test_a_failing_run_raises_from_every_backend(where: str, request: pytest.FixtureRequest) -> None:
    if where == "dask":
        ex = RunExecutor(dask_address=request.getfixturevalue("cluster"))
    else:
        ex = RunExecutor(1 if where == "serial" else 2)
    with ex, pytest.raises(ValueError):
        list(ex.map(math.factorial, [3, -1, 4]))


def test_calib_on_dask_equals_the_local_pool(pool_results: dict[str, object], cluster: str) -> None:
    local = pool_results["calib"]
    if local is None:
        pytest.skip("dataset mirror not available")
    assert isinstance(local, list)
    with RunExecutor(dask_address=cluster) as ex:
        on_dask = _calib(ex)
        assert environment.recorded_executor() == ex.describe()
    assert [(c.policy, c.seed) for c in on_dask] == [("fgd", 42), ("random", 42)]
    assert len(on_dask) == len(local) and all(_same_run(a, b) for a, b in zip(on_dask, local))
    assert on_dask[0].exact and on_dask[0].failed_pods == 2532
    assert any(line.startswith("- executor: dask ") for line in environment.environment_lines([]))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_scheduler_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(executor, "DEFAULT_CONNECT_TIMEOUT_S", 1.0)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    assert main(["calib", "--seeds", "42", "--policy", "fgd", "--dask", address, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudefrag: error: cannot connect to the Dask scheduler")


def test_missing_distributed_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ConfigError, match=r"gpudefrag\[dask\]"):
        RunExecutor(dask_address="tcp://127.0.0.1:1")


@pytest.mark.parametrize("argv", [["calib"], ["suite", "1a"], ["suite", "1b"], ["suite", "2"]])
def test_jobs_and_dask_together_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--jobs", "2", "--dask", "tcp://127.0.0.1:1"])
    assert stop.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", [1, 2])
def test_run_all_returns_results_in_spec_order_even_for_repeated_specs(jobs: int) -> None:
    specs = [5, 3, 5, 0, 3]  # the same objects more than once
    with RunExecutor(jobs) as ex:
        assert ex.run_all(math.factorial, specs, "test", progress=False) == [120, 6, 120, 1, 6]
