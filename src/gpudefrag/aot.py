"""Ahead-of-time compiled kernels: the hot kernels of the arrival-only FGD path, built into the
extension module ``gpudefrag._aot`` when the package is installed (``setup.py``), so that a
command needing only them never imports numba.  Importing numba and loading its CPU target
costs about 0.75 s per process, more than one whole FGD run of the default trace.

The rule: an exported kernel is the *same Python function* as the JIT kernel of its module
(the dispatcher's ``py_func``), compiled by numba's AOT compiler for the one signature in
:data:`EXPORTS`.  A caller asks :func:`kernel` for it and falls back to the JIT dispatcher when
the extension was not built or ``GPUDEFRAG_AOT=0`` is set; ``tests/test_aot.py`` checks that
both give the same results on random states.  Every array argument is C-contiguous.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

__all__ = ["EXPORTS", "MODULE", "Export", "compiled_module", "extension", "kernel"]

MODULE = "gpudefrag._aot"
"""The extension module's import name."""


@dataclass(frozen=True)
class Export:
    """One exported kernel: its name in :data:`MODULE`, the JIT kernel it compiles (module and
    function name) and the numba signature it is compiled for."""

    name: str
    module: str
    function: str
    signature: str


_I = "i8[::1]"
_I2 = "i8[:, ::1]"
_F = "f8[::1]"
_TYPICAL = f"{_I}, {_I}, {_I}, {_I}, {_F}"
_INDEX_ARGS = (
    f"{_I}, {_I}, {_I}, {_I}, {_I}, "  # position, tree, leaf_score, leaf_gpu, leaf_version
    f"{_I}, {_I}, {_I2}, {_I}, {_I}, {_I}, {_I2}, {_I}, "  # the state's arrays
    f"{_F}, {_I}, "  # frag cache and its versions
    "i8, i8, i8, i8, i8, i8, "  # the pod's fit key and affinity tag
    f"{_TYPICAL}"
)

EXPORTS: tuple[Export, ...] = (
    Export("index_refresh", "gpudefrag.policies.index_kernel", "refresh", f"i8({_I}, i8, i8, {_INDEX_ARGS})"),
    Export("index_rebuild", "gpudefrag.policies.index_kernel", "rebuild", f"i8(i8, i8, {_INDEX_ARGS})"),
    Export(
        "index_refresh_best_bounded",
        "gpudefrag.policies.bound_kernel",
        "refresh_best_bounded",
        f"i8({_I}, {_I}, i8, {_I}, "  # nodes, out, kind, order
        f"{_I}, {_I}, {_I}, {_I}, {_I}, "  # position, tree, leaf_key, leaf_gpu, leaf_version
        f"{_I}, {_I}, {_I2}, {_I}, {_I}, {_I}, {_I2}, {_I}, {_F}, {_I}, "  # the state, frag cache
        f"i8, i8, i8, i8, i8, i8, i8, i8, {_TYPICAL})",  # the floor's CPU and memory, the pod
    ),
    Export(
        "refresh_frag",
        "gpudefrag.frag.kernels",
        "refresh_frag",
        f"i8({_I}, {_I2}, {_I}, {_I}, {_I}, {_F}, {_I}, {_TYPICAL})",
    ),
    Export(
        "node_frag_milli", "gpudefrag.frag.kernels", "node_frag_milli", f"f8(i8, {_I}, i8, i8, {_TYPICAL})"
    ),
)


@cache
def compiled_module() -> ModuleType | None:
    """The built extension, or None (not built, or ``GPUDEFRAG_AOT=0``)."""
    if os.environ.get("GPUDEFRAG_AOT", "1") == "0":
        return None
    try:
        return importlib.import_module(MODULE)
    except ImportError:
        return None


def kernel(name: str) -> Callable[..., Any] | None:
    """The compiled kernel ``name`` of :data:`EXPORTS`, or None when there is no extension."""
    if name not in {e.name for e in EXPORTS}:
        raise KeyError(f"no ahead-of-time kernel named {name!r}")
    module = compiled_module()
    return None if module is None else getattr(module, name, None)


def extension() -> Any:
    """The setuptools extension that compiles :data:`EXPORTS` (for ``setup.py``; needs numba)."""
    from numba.pycc import CC

    cc = CC(MODULE.rpartition(".")[2], source_module=__name__)
    for e in EXPORTS:
        jit = getattr(importlib.import_module(e.module), e.function)
        cc.export(e.name, e.signature)(jit.py_func)
    ext = cc.distutils_extension()
    ext.optional = True  # a failed build leaves the JIT kernels in charge, not a failed install
    return ext
