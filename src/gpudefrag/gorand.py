"""Bit-exact Python port of Go's ``math/rand`` seeded source (Go 1.20.4; Go 1.19 is identical).

The FGD simulator draws all of its randomness from Go's global ``math/rand`` source after an
explicit ``rand.Seed(tuneseed)``.  To reproduce its results we need the very same stream of
numbers, so this module re-implements (see fgd-spec.md §2.2):

* the additive lagged-Fibonacci generator (607 words of state, tap 273) with Go's seeding
  procedure, and
* the derived draws that the simulator (and its tests) use: ``Int63``, ``Int31``, ``Uint32``,
  ``Uint64``, ``Int63n``, ``Int31n``, ``Intn``, the unexported Lemire ``int31n``, ``Shuffle``,
  ``Perm`` and ``Float64``.

Go's source also needs a fixed 607-entry table, ``rngCooked``, derived in
:mod:`gpudefrag.gorand_cooked` (whose functions this module re-exports).

Integer conventions: the state words are kept as unsigned 64-bit Python ints in ``[0, 2**64)``;
additions wrap modulo 2**64, which is exactly Go's wrapping int64 addition on the bit pattern.
Public methods return the Go values as Python ints (signed where Go's type is signed).
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from typing import TypeVar

from gpudefrag.gorand_cooked import (
    INT32_MAX,
    INT64_MAX,
    LCG_M,
    MASK32,
    MASK63,
    MASK64,
    RNG_LEN,
    RNG_TAP,
    SEED_WARMUP_STEPS,
    ZERO_SEED_REPLACEMENT,
    cooked_table,
    cooked_unsigned,
    derive_cooked_table,
    load_cooked_table,
    seedrand,
    set_cooked_table,
    to_int64,
)

__all__ = [
    "RNG_LEN",
    "RNG_TAP",
    "GoRand",
    "cooked_table",
    "derive_cooked_table",
    "load_cooked_table",
    "seedrand",
    "set_cooked_table",
]

_T = TypeVar("_T")

# --- the generator --------------------------------------------------------------------------------


class GoRand:
    """Go's ``math/rand`` ``Rand`` over an ``rngSource``, as used by the global functions after Seed.

    Every method consumes draws exactly as Go does, so interleaving calls in the same order as a
    Go program reproduces its stream bit for bit.
    """

    __slots__ = ("_feed", "_tap", "_vec")

    def __init__(self, seed: int) -> None:
        self._vec: list[int] = [0] * RNG_LEN
        self._tap = 0
        self._feed = 0
        self.seed(seed)

    # -- source ----------------------------------------------------------------------------------

    def seed(self, seed: int) -> None:
        """Re-seed (Go ``rngSource.Seed``).

        * ``seed`` is taken as an int64 (wrapped if outside), reduced ``mod 2^31-1`` into
          ``[0, 2^31-1)``; 0 is replaced by 89482311.
        * ``tap = 0``, ``feed = 607 - 273``.
        * ``seedrand`` is stepped 20 times to warm up; then for each slot ``i`` three more outputs
          ``x1, x2, x3`` give ``((x1 << 40) ^ (x2 << 20) ^ x3)`` truncated to 64 bits, XOR-ed with
          ``rngCooked[i]``.
        """
        s = to_int64(seed) % LCG_M  # Go: truncated %, then +M if negative == Python floor %.
        if s == 0:
            s = ZERO_SEED_REPLACEMENT
        cooked = cooked_unsigned()
        vec = self._vec
        x = s
        for _ in range(SEED_WARMUP_STEPS):
            x = seedrand(x)
        for i in range(RNG_LEN):
            x = seedrand(x)
            word = x << 40
            x = seedrand(x)
            word ^= x << 20
            x = seedrand(x)
            word ^= x
            vec[i] = (word ^ cooked[i]) & MASK64
        self._tap = 0
        self._feed = RNG_LEN - RNG_TAP

    def uint64(self) -> int:
        """One raw draw (Go ``rngSource.Uint64``): step tap and feed down by one (wrapping mod 607),
        ``vec[feed] += vec[tap]`` modulo 2^64, return the new word as an unsigned 64-bit int."""
        tap = self._tap - 1
        if tap < 0:
            tap += RNG_LEN
        feed = self._feed - 1
        if feed < 0:
            feed += RNG_LEN
        self._tap = tap
        self._feed = feed
        vec = self._vec
        x = (vec[feed] + vec[tap]) & MASK64
        vec[feed] = x
        return x

    # -- derived draws -----------------------------------------------------------------------------

    def int63(self) -> int:
        """Go ``Int63``: the low 63 bits of one raw draw, in ``[0, 2^63)``."""
        return self.uint64() & MASK63

    def int_(self) -> int:
        """Go ``Int`` on a 64-bit platform: same as :meth:`int63`."""
        return self.uint64() & MASK63

    def int31(self) -> int:
        """Go ``Int31``: ``Int63 >> 32``, in ``[0, 2^31)``."""
        return (self.uint64() & MASK63) >> 32

    def uint32(self) -> int:
        """Go ``Uint32``: ``Int63 >> 31``, in ``[0, 2^32)``."""
        return (self.uint64() & MASK63) >> 31

    def int63n(self, n: int) -> int:
        """Go ``Int63n``: uniform in ``[0, n)``.

        Power of two: ``Int63 & (n-1)`` (one draw, even for n = 1).  Otherwise redraw ``Int63``
        while it exceeds ``2^63-1 - (2^63 mod n)``, then return ``v mod n``.
        """
        if n <= 0:
            raise ValueError("invalid argument to int63n")
        if n & (n - 1) == 0:
            return self.int63() & (n - 1)
        limit = INT64_MAX - (1 << 63) % n
        v = self.int63()
        while v > limit:
            v = self.int63()
        return v % n

    def int31n(self, n: int) -> int:
        """Go's exported ``Int31n``: uniform in ``[0, n)`` for ``0 < n < 2^31``.

        Power of two: ``Int31 & (n-1)`` (one draw, even for n = 1).  Otherwise redraw ``Int31``
        while it exceeds ``2^31-1 - (2^31 mod n)``, then return ``v mod n``.
        """
        if n <= 0 or n > INT32_MAX:
            raise ValueError("invalid argument to int31n")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        limit = INT32_MAX - (1 << 31) % n
        v = self.int31()
        while v > limit:
            v = self.int31()
        return v % n

    def lemire_int31n(self, n: int) -> int:
        """Go's UNEXPORTED ``int31n`` (used by Shuffle): Lemire's multiply-shift, ``0 < n < 2^31``.

        ``prod = Uint32() * n``; ``low = prod mod 2^32``; if ``low < n``, redraw while
        ``low < (2^32 - n) mod n``; return ``prod >> 32``.
        """
        prod = self.uint32() * n
        low = prod & MASK32
        if low < n:
            threshold = ((1 << 32) - n) % n
            while low < threshold:
                prod = self.uint32() * n
                low = prod & MASK32
        return prod >> 32

    def intn(self, n: int) -> int:
        """Go ``Intn``: ``Int31n(n)`` when ``n <= 2^31-1``, else ``Int63n(n)``."""
        if n <= 0:
            raise ValueError("invalid argument to intn")
        if n <= INT32_MAX:
            return self.int31n(n)
        return self.int63n(n)

    def float64(self) -> float:
        """Go ``Float64``: ``float(Int63) / 2^63``, resampled while the rounded result equals 1.0."""
        while True:
            f = float(self.uint64() & MASK63) / 9223372036854775808.0
            if f != 1.0:
                return f

    def perm(self, n: int) -> list[int]:
        """Go ``Perm``: for i in 0..n-1: ``j = Intn(i+1); m[i] = m[j]; m[j] = i`` (i = 0 draws too)."""
        if n < 0:
            raise ValueError("invalid argument to perm")
        m = [0] * n
        for i in range(n):
            j = self.intn(i + 1)
            m[i] = m[j]
            m[j] = i
        return m

    def shuffle(self, n: int, swap: Callable[[int, int], None]) -> None:
        """Go ``Shuffle`` (Fisher-Yates, top down).

        For ``i`` from ``n-1`` down to 1: ``j = Int63n(i+1)`` while ``i > 2^31-2`` (i.e. i+1 does
        not fit in int32), afterwards ``j = lemire_int31n(i+1)``; then ``swap(i, j)``.
        """
        if n < 0:
            raise ValueError("invalid argument to shuffle")
        i = n - 1
        while i > INT32_MAX - 1:
            swap(i, self.int63n(i + 1))
            i -= 1
        while i > 0:
            j = self.lemire_int31n(i + 1)
            swap(i, j)
            i -= 1

    def shuffle_list(self, items: MutableSequence[_T]) -> None:
        """Shuffle ``items`` in place exactly like ``Shuffle(len(items), swap-elements)``."""
        n = len(items)
        i = n - 1
        while i > INT32_MAX - 1:
            j = self.int63n(i + 1)
            items[i], items[j] = items[j], items[i]
            i -= 1
        lemire = self.lemire_int31n
        while i > 0:
            j = lemire(i + 1)
            items[i], items[j] = items[j], items[i]
            i -= 1
