"""Typed spelling of the numba decorator the allocation-free kernels use.

``@njit_no_nrt`` is exactly ``@numba.njit(cache=True, _nrt=False)``: compiled, cached on disk, and
built without numba's runtime (the kernel allocates no arrays).  It exists only because numba's
bundled type stubs do not list the private ``_nrt`` option; spelled here once, the decorated
kernels keep their full signatures for the type checker (``Dispatcher[<the function's type>]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from numba import njit

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher

__all__ = ["njit_no_nrt"]

_F = TypeVar("_F", bound=Callable[..., object])


def njit_no_nrt(fn: _F) -> Dispatcher[_F]:
    """``numba.njit(cache=True, _nrt=False)(fn)``."""
    # numba's stubs omit the private ``_nrt`` option, so this one call is unchecked.
    wrap: Callable[[_F], Dispatcher[_F]] = njit(cache=True, _nrt=False)  # type: ignore[call-overload]
    return wrap(fn)
