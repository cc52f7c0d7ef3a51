"""``gpudefrag k8s-demo``: a short suite 1b scenario through the fake cluster, the simulator beside it."""

from __future__ import annotations

import json

import pytest

from gpudefrag.cli import main

pytestmark = pytest.mark.fake_only


def test_demo_prints_both_sides_and_a_clean_audit(mirror, capsys):
    argv = ["k8s-demo", "--hours", "0.25", "--nodes", "20", "--scale", "150", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    k, sim = out["kubernetes"], out["simulator"]
    assert k["audit_ok"] is True and k["binds"] > 0
    # the same scenario on both sides: allocations of the same order (the fake cluster runs on a wall
    # clock, so they are not equal), each a percentage
    assert 0 < k["alloc_pct"] <= 100 and 0 < sim["alloc_pct"] <= 100
    assert abs(k["alloc_pct"] - sim["alloc_pct"]) < 10


def test_demo_rejects_bad_options_in_one_line(capsys):
    with pytest.raises(SystemExit) as stop:  # a usage error, from the parser
        main(["k8s-demo", "--scale", "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--scale" in err and "\n" not in err
