"""Bit-exact Python port of Go's ``math/rand`` seeded source (Go 1.20.4; Go 1.19 is identical).

The FGD simulator draws all of its randomness from Go's global ``math/rand`` source after an
explicit ``rand.Seed(tuneseed)``.  To reproduce its results we need the very same stream of
numbers, so this module re-implements (see fgd-spec.md §2.2):

* the additive lagged-Fibonacci generator (607 words of state, tap 273) with Go's seeding
  procedure, and
* the derived draws that the simulator (and its tests) use: ``Int63``, ``Int31``, ``Uint32``,
  ``Uint64``, ``Int63n``, ``Int31n``, ``Intn``, the unexported Lemire ``int31n``, ``Shuffle``,
  ``Perm`` and ``Float64``.

Go's source also needs a fixed 607-entry table, ``rngCooked``.  Go ships it as a literal that
was produced by ``gen_cooked.go``: the state of the same lagged-Fibonacci generator, seeded
with a slightly different seeding procedure from seed 1, after 7.8e12 steps.  Instead of
embedding that literal we re-derive it with a polynomial jump-ahead (:func:`derive_cooked_table`,
well under a second) and cache it in-process.  :func:`load_cooked_table` can read the table from
a text file (one signed int64 per line) as an alternative source; :func:`cooked_table` is the
single access point used by :class:`GoRand`.

Integer conventions: the state words are kept as unsigned 64-bit Python ints in ``[0, 2**64)``;
additions wrap modulo 2**64, which is exactly Go's wrapping int64 addition on the bit pattern.
Public methods return the Go values as Python ints (signed where Go's type is signed).
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from pathlib import Path
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

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

# --- generator constants (Go: rng.go) -----------------------------------------------------------

RNG_LEN = 607
"""Number of 64-bit words in the lagged-Fibonacci state."""
RNG_TAP = 273
"""Lag of the tap: ``tap`` always sits ``RNG_TAP`` positions after ``feed`` (mod ``RNG_LEN``)."""

_LCG_A = 48271
"""Multiplier of the Park-Miller style seeding LCG ``seedrand``."""
_LCG_M = (1 << 31) - 1
"""Modulus of ``seedrand`` (the Mersenne prime 2^31-1); seeds are reduced modulo this."""
_LCG_Q = 44488
"""Schrage quotient ``_LCG_M // _LCG_A``."""
_LCG_R = 3399
"""Schrage remainder ``_LCG_M % _LCG_A``."""
_ZERO_SEED_REPLACEMENT = 89482311
"""A seed that is 0 modulo 2^31-1 is replaced by this value (0 is a fixed point of the LCG)."""
_SEED_WARMUP_STEPS = 20
"""Number of ``seedrand`` steps discarded before the state words are filled."""

_T = TypeVar("_T")

_MASK64 = (1 << 64) - 1
_MASK63 = (1 << 63) - 1
_MASK32 = (1 << 32) - 1
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1

# --- rngCooked derivation (Go: gen_cooked.go) ---------------------------------------------------

_COOKED_SEED = 1
"""gen_cooked.go seeds its generator with 1."""
_COOKED_STEPS = 7_800_000_000_000
"""gen_cooked.go steps the generator 7.8e12 times before printing the state."""


def seedrand(x: int) -> int:
    """One step of Go's seeding LCG: ``x -> 48271 * x mod (2^31 - 1)``.

    Go evaluates this with Schrage's method in int32 arithmetic (``hi = x / 44488``,
    ``lo = x % 44488``, ``x = 48271*lo - 3399*hi``, plus 2^31-1 if negative).  For the inputs
    Go ever passes (``0 < x < 2^31-1``) that is exactly the modular product, which we compute
    directly with Python ints.
    """
    return (_LCG_A * x) % _LCG_M


def _to_int64(value: int) -> int:
    """Reinterpret the low 64 bits of ``value`` as a signed two's-complement int64."""
    value &= _MASK64
    return value - (1 << 64) if value >= (1 << 63) else value


def _gen_cooked_initial_state() -> list[int]:
    """Initial state of gen_cooked.go's generator (its ``srand(1)``), as uint64 words.

    Same procedure as the real seeding, except: the seed is 1, the three LCG outputs are
    combined as ``(x1 << 20) ^ (x2 << 10) ^ x3`` (not 40/20), and no table is XOR-ed in.
    """
    x = _COOKED_SEED
    state = [0] * RNG_LEN
    for i in range(-_SEED_WARMUP_STEPS, RNG_LEN):
        x = seedrand(x)
        if i >= 0:
            word = x << 20
            x = seedrand(x)
            word ^= x << 10
            x = seedrand(x)
            word ^= x
            state[i] = word
    return state


def _mul_by_x(coeffs: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Multiply a residue polynomial by ``x`` modulo ``x^607 - x^334 - 1`` (uint64 wrapping)."""
    top = coeffs[RNG_LEN - 1]
    out = np.roll(coeffs, 1)
    out[0] = top  # x^607 = 1 + x^334
    out[RNG_LEN - RNG_TAP] += top
    return out


def _square_mod(coeffs: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """Square a residue polynomial modulo ``x^607 - x^334 - 1`` over Z/2^64."""
    n = RNG_LEN
    product = np.zeros(2 * n - 1, dtype=np.uint64)
    for i in np.flatnonzero(coeffs):
        product[i : i + n] += coeffs[i] * coeffs
    # Fold the high part down: x^(607+j) = x^(334+j) + x^j.  Each pass lowers the top degree by 273.
    high_end = 2 * n - 1
    while high_end > n:
        high = product[n:high_end].copy()
        product[n:high_end] = 0
        k = high.size
        product[0:k] += high
        product[n - RNG_TAP : n - RNG_TAP + k] += high
        high_end = n - RNG_TAP + k
    return product[:n]


def _x_power_mod(exponent: int) -> NDArray[np.uint64]:
    """Coefficients of ``x^exponent mod (x^607 - x^334 - 1)`` over Z/2^64 (left-to-right binary)."""
    result = np.zeros(RNG_LEN, dtype=np.uint64)
    result[0] = 1
    for bit in bin(exponent)[2:]:
        result = _square_mod(result)
        if bit == "1":
            result = _mul_by_x(result)
    return result


def derive_cooked_table() -> list[int]:
    """Recompute Go's ``rngCooked`` table (607 signed int64 values) from first principles.

    gen_cooked.go seeds the generator (see :func:`_gen_cooked_initial_state`) with ``tap = 0``,
    ``feed = 607 - 273 = 334`` and then performs 7.8e12 draws; ``rngCooked[i]`` is state word
    ``i`` afterwards (the full 64-bit word, as a signed int64).

    Method.  Number the written values ``s_t`` (draw ``t = 1, 2, ...`` writes ``s_t``); draw ``t``
    writes state position ``(334 - t) mod 607`` and reads its old value (``s_{t-607}``) and the tap
    (``s_{t-273}``), so ``s_t = s_{t-607} + s_{t-273}`` with the initial words being
    ``s_{-606} .. s_0`` (position ``q`` holds the ``t`` in ``[-606, 0]`` with ``(334 - t) ≡ q``).
    With ``u_j = s_{j-606}``, ``u_n = Σ_i c_i u_i`` where ``Σ_i c_i x^i = x^n mod
    (x^607 - x^334 - 1)`` over Z/2^64.  After N draws the state holds ``u_N .. u_{N+606}``; we
    compute ``x^N`` by square-and-multiply, get the next 606 residues by multiplying by ``x``,
    and take all 607 dot products with the initial vector at once (numpy uint64 wraps mod 2^64).
    """
    n_steps = _COOKED_STEPS
    initial_by_position = _gen_cooked_initial_state()
    with np.errstate(over="ignore"):
        # u_j sits at position (334 - (j - 606)) mod 607 = (333 - j) mod 607.
        u_initial = np.array(
            [initial_by_position[(333 - j) % RNG_LEN] for j in range(RNG_LEN)], dtype=np.uint64
        )
        rows = np.empty((RNG_LEN, RNG_LEN), dtype=np.uint64)
        coeffs = _x_power_mod(n_steps)
        for k in range(RNG_LEN):
            rows[k] = coeffs
            coeffs = _mul_by_x(coeffs)
        values = rows @ u_initial  # values[k] = u_{N+k} = s_{N-606+k}
    table = [0] * RNG_LEN
    for k in range(RNG_LEN):
        step = n_steps - 606 + k
        table[(334 - step) % RNG_LEN] = _to_int64(int(values[k]))
    return table


def load_cooked_table(path: str | Path) -> list[int]:
    """Read a cooked table from a text file with one signed int64 per line (blank lines ignored)."""
    lines = Path(path).read_text().split()
    table = [int(tok) for tok in lines]
    if len(table) != RNG_LEN:
        raise ValueError(f"{path}: expected {RNG_LEN} values, found {len(table)}")
    return table


_cooked_cache: list[int] | None = None
_cooked_unsigned_cache: tuple[int, ...] | None = None


def cooked_table() -> list[int]:
    """Go's ``rngCooked`` table as 607 signed int64 values (derived once, then cached in-process)."""
    global _cooked_cache
    if _cooked_cache is None:
        _cooked_cache = derive_cooked_table()
    return list(_cooked_cache)


def set_cooked_table(table: list[int] | None) -> None:
    """Override the cached table (e.g. with :func:`load_cooked_table`); ``None`` resets to derivation."""
    global _cooked_cache, _cooked_unsigned_cache
    if table is not None and len(table) != RNG_LEN:
        raise ValueError(f"expected {RNG_LEN} values, got {len(table)}")
    _cooked_cache = None if table is None else [_to_int64(v) for v in table]
    _cooked_unsigned_cache = None


def _cooked_unsigned() -> tuple[int, ...]:
    """The cooked table as uint64 bit patterns (cached) for XOR-ing into fresh state."""
    global _cooked_unsigned_cache
    if _cooked_unsigned_cache is None:
        _cooked_unsigned_cache = tuple(v & _MASK64 for v in cooked_table())
    return _cooked_unsigned_cache


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
        s = _to_int64(seed) % _LCG_M  # Go: truncated %, then +M if negative == Python floor %.
        if s == 0:
            s = _ZERO_SEED_REPLACEMENT
        cooked = _cooked_unsigned()
        vec = self._vec
        x = s
        for _ in range(_SEED_WARMUP_STEPS):
            x = seedrand(x)
        for i in range(RNG_LEN):
            x = seedrand(x)
            word = x << 40
            x = seedrand(x)
            word ^= x << 20
            x = seedrand(x)
            word ^= x
            vec[i] = (word ^ cooked[i]) & _MASK64
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
        x = (vec[feed] + vec[tap]) & _MASK64
        vec[feed] = x
        return x

    # -- derived draws -----------------------------------------------------------------------------

    def int63(self) -> int:
        """Go ``Int63``: the low 63 bits of one raw draw, in ``[0, 2^63)``."""
        return self.uint64() & _MASK63

    def int_(self) -> int:
        """Go ``Int`` on a 64-bit platform: same as :meth:`int63`."""
        return self.uint64() & _MASK63

    def int31(self) -> int:
        """Go ``Int31``: ``Int63 >> 32``, in ``[0, 2^31)``."""
        return (self.uint64() & _MASK63) >> 32

    def uint32(self) -> int:
        """Go ``Uint32``: ``Int63 >> 31``, in ``[0, 2^32)``."""
        return (self.uint64() & _MASK63) >> 31

    def int63n(self, n: int) -> int:
        """Go ``Int63n``: uniform in ``[0, n)``.

        Power of two: ``Int63 & (n-1)`` (one draw, even for n = 1).  Otherwise redraw ``Int63``
        while it exceeds ``2^63-1 - (2^63 mod n)``, then return ``v mod n``.
        """
        if n <= 0:
            raise ValueError("invalid argument to int63n")
        if n & (n - 1) == 0:
            return self.int63() & (n - 1)
        limit = _INT64_MAX - (1 << 63) % n
        v = self.int63()
        while v > limit:
            v = self.int63()
        return v % n

    def int31n(self, n: int) -> int:
        """Go's exported ``Int31n``: uniform in ``[0, n)`` for ``0 < n < 2^31``.

        Power of two: ``Int31 & (n-1)`` (one draw, even for n = 1).  Otherwise redraw ``Int31``
        while it exceeds ``2^31-1 - (2^31 mod n)``, then return ``v mod n``.
        """
        if n <= 0 or n > _INT32_MAX:
            raise ValueError("invalid argument to int31n")
        if n & (n - 1) == 0:
            return self.int31() & (n - 1)
        limit = _INT32_MAX - (1 << 31) % n
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
        low = prod & _MASK32
        if low < n:
            threshold = ((1 << 32) - n) % n
            while low < threshold:
                prod = self.uint32() * n
                low = prod & _MASK32
        return prod >> 32

    def intn(self, n: int) -> int:
        """Go ``Intn``: ``Int31n(n)`` when ``n <= 2^31-1``, else ``Int63n(n)``."""
        if n <= 0:
            raise ValueError("invalid argument to intn")
        if n <= _INT32_MAX:
            return self.int31n(n)
        return self.int63n(n)

    def float64(self) -> float:
        """Go ``Float64``: ``float(Int63) / 2^63``, resampled while the rounded result equals 1.0."""
        while True:
            f = float(self.uint64() & _MASK63) / 9223372036854775808.0
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
        while i > _INT32_MAX - 1:
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
        while i > _INT32_MAX - 1:
            j = self.int63n(i + 1)
            items[i], items[j] = items[j], items[i]
            i -= 1
        lemire = self.lemire_int31n
        while i > 0:
            j = lemire(i + 1)
            items[i], items[j] = items[j], items[i]
            i -= 1
