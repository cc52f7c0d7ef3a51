"""Run-time estimates from history: the mean residual life of a sample of run times."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpudefrag.defrag.runtime import ResidualLife


def test_mean_residual_life_by_hand():
    est = ResidualLife([600.0, 100.0, 200.0])
    assert est.mean_s() == pytest.approx(300.0)  # (100 + 200 + 600) / 3
    assert est.remaining_after_s(0.0) == pytest.approx(300.0)
    assert est.remaining_after_s(150.0) == pytest.approx(250.0)  # (50 + 450) / 2
    assert est.remaining_after_s(599.0) == pytest.approx(1.0)
    assert est.remaining_after_s(600.0) == 0.0  # outlived every run time
    assert est.remaining_after_s(10_000.0) == 0.0


@given(st.lists(st.floats(0.0, 1e5), min_size=1, max_size=40), st.floats(0.0, 2e5))
def test_matches_the_definition(sample, elapsed):
    longer = [d - elapsed for d in sample if d > elapsed]
    want = float(np.mean(longer)) if longer else 0.0
    assert ResidualLife(sample).remaining_after_s(elapsed) == pytest.approx(want, rel=1e-9, abs=1e-6)


@given(
    st.lists(st.floats(0.0, 1e5), min_size=1, max_size=40),
    st.lists(st.floats(0.0, 2e5), min_size=0, max_size=30),
)
def test_the_vectorised_estimate_is_the_scalar_one_bit_for_bit(sample, elapsed):
    est = ResidualLife(sample)
    got = est.remaining_after_all_s(np.asarray(elapsed, dtype=np.float64))
    assert got.tolist() == [est.remaining_after_s(e) for e in elapsed]


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [-1.0, 5.0], [float("inf")]])
def test_rejects_bad_samples(bad):
    with pytest.raises(ValueError):
        ResidualLife(bad)
