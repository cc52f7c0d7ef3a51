"""The ahead-of-time compiled kernels (``gpudefrag._aot``) are the JIT kernels: same results on
random states, built by the install, and the FGD arrival path runs on them without numba.

Set ``GPUDEFRAG_AOT=0`` to install and test without the extension (the comparison tests are
then skipped and the build test is not required)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import needs_mirror
from gpudefrag import aot
from gpudefrag.frag import kernels as frag_kernels
from gpudefrag.model.cluster import affinity_tag
from gpudefrag.policies import bound_kernel, index_kernel
from gpudefrag.policies.kinds import (
    BESTFIT,
    BOUNDED_KINDS,
    DOTPROD,
    FGD_KIND,
    GPUCLUSTERING,
    GPUPACKING,
    LEAF_INFEASIBLE,
)

WANT_AOT = os.environ.get("GPUDEFRAG_AOT", "1") != "0"
needs_aot = pytest.mark.skipif(aot.compiled_module() is None, reason="gpudefrag._aot not built")


def test_the_install_built_the_extension():
    if not WANT_AOT:
        pytest.skip("GPUDEFRAG_AOT=0: installed without the extension")
    assert aot.compiled_module() is not None, "pip install did not build gpudefrag._aot (see setup.py)"


def test_every_export_names_a_jit_kernel_with_its_arity():
    for e in aot.EXPORTS:
        jit = getattr(__import__(e.module, fromlist=[e.function]), e.function)
        params = inspect.signature(jit.py_func).parameters
        args = e.signature[e.signature.index("(") + 1 : e.signature.rindex(")")]
        # array types hold commas inside brackets ("i8[:, ::1]"): count top-level commas only
        depth, count = 0, 1
        for ch in args:
            depth += ch == "["
            depth -= ch == "]"
            count += ch == "," and depth == 0
        assert count == len(params), (e.name, count, len(params))


def test_an_unknown_kernel_is_an_error():
    with pytest.raises(KeyError):
        aot.kernel("no_such_kernel")


def test_aot_off_falls_back_to_the_jit_kernels():
    code = (
        "import gpudefrag.policies.score_index as s, gpudefrag.frag.compiled as f\n"
        "from gpudefrag.policies import index_kernel as k\n"
        "from gpudefrag.frag import kernels as fk\n"
        "from gpudefrag.policies import bound_kernel as b\n"
        "assert s.refresh is k.refresh and s.rebuild is k.rebuild and s.refresh_best_bounded is b.refresh_best_bounded\n"
        "assert f.refresh_frag is fk.refresh_frag and f.node_frag_milli is fk.node_frag_milli\n"
    )
    env = dict(os.environ, GPUDEFRAG_AOT="0")
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@needs_aot
@needs_mirror
def test_the_fgd_arrival_path_never_imports_numba(tmp_path):
    # a whole `gpudefrag run --policy fgd` (the default trace, every arrival), then the check
    code = (
        "import sys\n"
        "from gpudefrag.cli import main\n"
        f"rc = main(['run', '--policy', 'fgd', '--seed', '42', '--no-progress', '--out', {str(tmp_path)!r}])\n"
        "assert rc in (0, None), rc\n"
        "assert 'numba' not in sys.modules, 'imported numba'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert any(tmp_path.rglob("*.csv"))  # the run really happened


def _index_args(state, kind, pod, typical):
    n = state.num_nodes
    size = 1
    while size < n:
        size *= 2
    order = np.lexsort((np.arange(n, dtype=np.int64), state.tie_rank)).astype(np.int64)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n, dtype=np.int64)
    tree = np.full(2 * size, -1, dtype=np.int64)
    tree[size : size + n] = np.arange(n, dtype=np.int64)
    return [
        position,
        tree,
        np.full(size, LEAF_INFEASIBLE, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        state.cpu_milli_left.copy(),
        state.memory_mib_left.copy(),
        state.gpu_milli_left.copy(),
        state.gpu_count.copy(),
        state.model_id.copy(),
        state.pod_count.copy(),
        state.affinity.copy(),
        state.version.copy(),
        np.zeros(n, dtype=np.float64),
        np.full(n, -1, dtype=np.int64),
        *pod.fit_key,
        max(affinity_tag(pod), 0),
        *typical.kernel_args,
    ]


def _change(args, nodes):
    """Less CPU and first-GPU milli left on ``nodes``, with fresh versions, in kernel args."""
    for node in nodes.tolist():
        args[5][node] //= 2  # cpu left
        args[7][node, 0] = max(0, args[7][node, 0] - 250)  # first GPU's milli left
        args[12][node] += 1000  # version


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _same(a, b):
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


@needs_aot
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_index_kernels_equal_jit(data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=12, max_prior=20))
    pod = data.draw(gen.pods())
    kind = data.draw(st.sampled_from([FGD_KIND, BESTFIT, GPUPACKING, GPUCLUSTERING, DOTPROD]))
    bound = int(kind in BOUNDED_KINDS and data.draw(st.booleans()))
    args = _index_args(state, kind, pod, typical_small)
    jit_args, aot_args = _copy(args), _copy(args)
    assert aot.kernel("index_rebuild")(kind, bound, *aot_args) == index_kernel.rebuild(kind, bound, *jit_args)
    _same(aot_args, jit_args)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    nodes = rng.integers(0, state.num_nodes, size=rng.integers(1, 4)).astype(np.int64)
    if bound:  # a refresh of changed nodes, then the search on the tree of bounds, in one call
        order = np.argsort(args[0]).astype(np.int64)
        outs, fused = [np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)], []
        for fn, a, out in zip(
            (aot.kernel("index_refresh_best_bounded"), bound_kernel.refresh_best_bounded),
            (_copy(aot_args), _copy(jit_args)),
            outs,
        ):
            _change(a, nodes)
            # the tree above was built at the pod's CPU and memory: its floor
            fn(nodes, out, kind, order, *a[:15], pod.cpu_milli, pod.memory_mib, *a[15:])
            fused.append(a)
        np.testing.assert_array_equal(outs[0], outs[1])
        _same(*fused)
    # change some nodes' contents and versions, then refresh just those
    for a in (jit_args, aot_args):
        _change(a, nodes)
    got = aot.kernel("index_refresh")(nodes, kind, bound, *aot_args)
    assert got == index_kernel.refresh(nodes, kind, bound, *jit_args)
    _same(aot_args, jit_args)


@needs_aot
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_frag_kernels_equal_jit(data, gen, typical_small):
    state = data.draw(gen.clusters(min_nodes=1, max_nodes=12, max_prior=20))
    tp = typical_small.kernel_args
    outs = []
    for fn in (aot.kernel("refresh_frag"), frag_kernels.refresh_frag):
        frag = np.zeros(state.num_nodes, dtype=np.float64)
        seen = np.full(state.num_nodes, -1, dtype=np.int64)
        changed = fn(
            state.cpu_milli_left,
            state.gpu_milli_left,
            state.gpu_count,
            state.model_id,
            state.version,
            frag,
            seen,
            *tp,
        )
        outs.append((changed, frag, seen))
    assert outs[0][0] == outs[1][0]
    np.testing.assert_array_equal(outs[0][1], outs[1][1])  # bit for bit, not approximately
    np.testing.assert_array_equal(outs[0][2], outs[1][2])
    node = data.draw(st.integers(0, state.num_nodes - 1))
    row = (
        state.cpu_milli_left[node],
        state.gpu_milli_left[node],
        state.gpu_count[node],
        state.model_id[node],
    )
    assert aot.kernel("node_frag_milli")(*row, *tp) == frag_kernels.node_frag_milli(*row, *tp)
