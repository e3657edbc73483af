"""The 64-bit mixing of hash values: combining multipliers and the splitmix64 finalizer.

All of it is numpy ``uint64`` arithmetic, which wraps modulo 2**64, as intended.
"""

from __future__ import annotations

import numpy as np

from dedup_store.core.arrays import I64, U64

MASK64 = (1 << 64) - 1
SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _combine_multipliers(count: int) -> U64:
    rng = np.random.Generator(np.random.PCG64(0x5EED_D3D0))
    return rng.integers(1, 2**63, size=count, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


#: Odd multipliers used to combine up to 1024 hashes into one (position-dependent).
COMBINE = _combine_multipliers(1024)


def mix64(x: U64) -> U64:
    """The splitmix64 finalizer: a bijection of uint64 with good avalanche."""
    with np.errstate(over="ignore"):
        z = x + SPLITMIX_GAMMA
        shifted = z >> _S30
        z ^= shifted
        z *= _MIX1
        np.right_shift(z, _S27, out=shifted)
        z ^= shifted
        z *= _MIX2
        np.right_shift(z, _S31, out=shifted)
        z ^= shifted
        return z


_MASK32 = np.uint64(0xFFFFFFFF)


def hashint8(values: I64) -> I64:
    """PostgreSQL's ``hashint8`` of each value (the final mix of Jenkins' lookup3 over the
    value's 32-bit fold), as ``hashint8(v)::bigint & 2147483647`` gives it."""
    v = values.astype(np.int64)
    low = v.view(np.uint64) & _MASK32
    high = v.view(np.uint64) >> np.uint64(32)
    low ^= np.where(v >= 0, high, ~high & _MASK32)
    start = np.uint64((0x9E3779B9 + 4 + 3923095) & 0xFFFFFFFF)
    a = (start + low) & _MASK32
    b = np.full_like(a, start)
    c = np.full_like(a, start)
    c = ((c ^ b) - _rotate(b, 14)) & _MASK32
    a = ((a ^ c) - _rotate(c, 11)) & _MASK32
    b = ((b ^ a) - _rotate(a, 25)) & _MASK32
    c = ((c ^ b) - _rotate(b, 16)) & _MASK32
    a = ((a ^ c) - _rotate(c, 4)) & _MASK32
    b = ((b ^ a) - _rotate(a, 14)) & _MASK32
    c = ((c ^ b) - _rotate(b, 24)) & _MASK32
    result: I64 = (c & np.uint64(0x7FFFFFFF)).astype(np.int64)
    return result


def _rotate(x: U64, k: int) -> U64:
    return ((x << np.uint64(k)) | (x >> np.uint64(32 - k))) & _MASK32
