"""The fragmentation kernels for callers outside compiled code: the ahead-of-time compiled ones
(:mod:`gpudefrag.aot`) when the extension was built, else numba's JIT dispatchers of
:mod:`gpudefrag.frag.kernels` (same functions, same results; imported only then)."""

from __future__ import annotations

from collections.abc import Callable

from gpudefrag import aot

__all__ = ["node_frag_milli", "refresh_frag"]


def _pick() -> tuple[Callable[..., int], Callable[..., float]]:
    refresh, node = aot.kernel("refresh_frag"), aot.kernel("node_frag_milli")
    if refresh is not None and node is not None:
        return refresh, node
    from gpudefrag.frag import kernels

    return kernels.refresh_frag, kernels.node_frag_milli


refresh_frag, node_frag_milli = _pick()
