"""Go's ``math/rand`` constants and its ``rngCooked`` seeding table (Go 1.20.4), for
:mod:`gpudefrag.gorand`.

Go ships ``rngCooked`` as a literal that ``gen_cooked.go`` produced: the state of the same
lagged-Fibonacci generator, seeded with a slightly different seeding procedure from seed 1,
after 7.8e12 steps.  Instead of embedding that literal it is re-derived with a polynomial
jump-ahead (:func:`derive_cooked_table`, well under a second) and cached in-process;
:func:`load_cooked_table` reads it from a text file (one signed int64 per line) instead;
:func:`cooked_table` is the single access point.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

# --- generator constants (Go: rng.go) -----------------------------------------------------------

RNG_LEN = 607
"""Number of 64-bit words in the lagged-Fibonacci state."""
RNG_TAP = 273
"""Lag of the tap: ``tap`` always sits ``RNG_TAP`` positions after ``feed`` (mod ``RNG_LEN``)."""

LCG_A = 48271
"""Multiplier of the Park-Miller style seeding LCG ``seedrand``."""
LCG_M = (1 << 31) - 1
"""Modulus of ``seedrand`` (the Mersenne prime 2^31-1); seeds are reduced modulo this."""
LCG_Q = 44488
"""Schrage quotient ``LCG_M // LCG_A``."""
LCG_R = 3399
"""Schrage remainder ``LCG_M % LCG_A``."""
ZERO_SEED_REPLACEMENT = 89482311
"""A seed that is 0 modulo 2^31-1 is replaced by this value (0 is a fixed point of the LCG)."""
SEED_WARMUP_STEPS = 20
"""Number of ``seedrand`` steps discarded before the state words are filled."""

MASK64 = (1 << 64) - 1
MASK63 = (1 << 63) - 1
MASK32 = (1 << 32) - 1
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

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
    return (LCG_A * x) % LCG_M


def to_int64(value: int) -> int:
    """Reinterpret the low 64 bits of ``value`` as a signed two's-complement int64."""
    value &= MASK64
    return value - (1 << 64) if value >= (1 << 63) else value


def _gen_cooked_initial_state() -> list[int]:
    """Initial state of gen_cooked.go's generator (its ``srand(1)``), as uint64 words.

    Same procedure as the real seeding, except: the seed is 1, the three LCG outputs are
    combined as ``(x1 << 20) ^ (x2 << 10) ^ x3`` (not 40/20), and no table is XOR-ed in.
    """
    x = _COOKED_SEED
    state = [0] * RNG_LEN
    for i in range(-SEED_WARMUP_STEPS, RNG_LEN):
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
        table[(334 - step) % RNG_LEN] = to_int64(int(values[k]))
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
    _cooked_cache = None if table is None else [to_int64(v) for v in table]
    _cooked_unsigned_cache = None


def cooked_unsigned() -> tuple[int, ...]:
    """The cooked table as uint64 bit patterns (cached) for XOR-ing into fresh state."""
    global _cooked_unsigned_cache
    if _cooked_unsigned_cache is None:
        _cooked_unsigned_cache = tuple(v & MASK64 for v in cooked_table())
    return _cooked_unsigned_cache
