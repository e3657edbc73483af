"""64-bit hashing primitives shared by shingles, band keys and block keys.

Strings are hashed with xxh3 (64-bit); sequences of hashes (a shingle's tokens, a band's
min-hashes) are combined with fixed odd multipliers and finished with the splitmix64 mixer, all in
numpy ``uint64`` arithmetic (which wraps modulo 2**64, as intended).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from dedup_store.core import kernels

U64 = npt.NDArray[np.uint64]
MASK64 = (1 << 64) - 1

_SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)
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
        z = x + _SPLITMIX_GAMMA
        shifted = z >> _S30
        z ^= shifted
        z *= _MIX1
        np.right_shift(z, _S27, out=shifted)
        z ^= shifted
        z *= _MIX2
        np.right_shift(z, _S31, out=shifted)
        z ^= shifted
        return z


def combine_columns(columns: U64, salt: int = 0) -> U64:
    """Hash each row of a 2-D ``uint64`` array into one value.

    Args:
        columns: shape ``(n, width)``.
        salt: mixed in so that equal rows of different roles (band 1 vs band 2) differ.

    Returns:
        shape ``(n,)``.
    """
    return combine_groups(columns[:, None, :], np.array([salt], dtype=np.uint64))[:, 0]


def combine_groups(groups: npt.NDArray[np.unsignedinteger[Any]], salts: U64) -> U64:
    """Hash every group of a 3-D unsigned array ``(n, groups, width)`` into one value.

    Group ``g`` of row ``i`` gives the same value as
    ``combine_columns(groups[:, g, :], salts[g])[i]``; all groups are done in one pass per
    position within the groups (integers of up to 64 bits are taken as ``uint64``).
    """
    if kernels.compiled is not None:
        rows, count, width = groups.shape
        combined = kernels.compiled.combine_groups(
            np.ascontiguousarray(groups, dtype=np.uint64),
            count,
            width,
            np.ascontiguousarray(salts, dtype=np.uint64),
            COMBINE,
        )
        return np.frombuffer(combined, dtype=np.uint64).reshape(rows, count)
    with np.errstate(over="ignore"):
        acc = np.empty(groups.shape[:2], dtype=np.uint64)
        acc[...] = salts.astype(np.uint64) * _SPLITMIX_GAMMA
        term = np.empty_like(acc)
        for j in range(groups.shape[2]):
            np.multiply(groups[:, :, j], COMBINE[j], out=term)
            acc += term
    return mix64(acc)


def hash_strings(strings: list[str]) -> U64:
    """xxh3-64 of each string's UTF-8 bytes."""
    digest = xxhash.xxh3_64_intdigest
    hashes = (digest(s.encode("utf-8")) for s in strings)
    return np.fromiter(hashes, dtype=np.uint64, count=len(strings))


def exact_hash(canonical_text: str) -> bytes:
    """128-bit xxh3 digest of the canonical text, for the exact-duplicate stage."""
    return xxhash.xxh3_128_digest(canonical_text.encode("utf-8"))


def exact_hashes(canonical_texts: list[str]) -> list[bytes]:
    """:func:`exact_hash` of each canonical text."""
    return list(map(xxhash.xxh3_128_digest, map(str.encode, canonical_texts)))


def as_int64(values: U64) -> npt.NDArray[np.int64]:
    """Reinterpret uint64 as int64 (PostgreSQL ``bigint``) without changing bits."""
    return values.view(np.int64)


#: xxh3-64 (seed 0, default secret) constants for inputs of 1 to 16 bytes: the secret words
#: each length class reads, folded together as the reference implementation does.
_XXH3_FLIP_1TO3 = np.uint64(0x396CFEB8 ^ 0xBE4BA423)
_XXH3_FLIP_4TO8 = np.uint64(0x1CAD21F72C81017C ^ 0xDB979083E96DD4DE)
_XXH3_FLIP_9TO16_LO = np.uint64(0x1F67B3B7A4A44072 ^ 0x78E5C0CC4EE679CB)
_XXH3_FLIP_9TO16_HI = np.uint64(0x2172FFCC7DD05A82 ^ 0x8E2443F7744608B8)
_XXH_PRIME64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
_XXH_PRIME64_3 = np.uint64(0x165667B19E3779F9)
_XXH_PRIME_MX1 = np.uint64(0x165667919E3779F9)
_XXH_PRIME_MX2 = np.uint64(0x9FB21C651E98DF25)
_LOW32 = np.uint64(0xFFFF_FFFF)
#: Longest input :func:`xxh3_64_short` hashes.
XXH3_SHORT_MAX = 16


def _xorshift(h: U64, shift: int) -> U64:
    result: U64 = h ^ (h >> np.uint64(shift))
    return result


def _rotl(h: U64, bits: int) -> U64:
    result: U64 = (h << np.uint64(bits)) | (h >> np.uint64(64 - bits))
    return result


def _mul128_fold64(a: U64, b: U64) -> U64:
    """The low and the high 64 bits of the 128-bit products ``a * b``, xored."""
    a_lo, a_hi = a & _LOW32, a >> np.uint64(32)
    b_lo, b_hi = b & _LOW32, b >> np.uint64(32)
    lo_lo, lo_hi, hi_lo = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo
    middle = (lo_lo >> np.uint64(32)) + (lo_hi & _LOW32) + (hi_lo & _LOW32)
    high = a_hi * b_hi + (lo_hi >> np.uint64(32)) + (hi_lo >> np.uint64(32))
    high += middle >> np.uint64(32)
    result: U64 = (a * b) ^ high
    return result


def _xxh3_1to3(head: U64, length: U64) -> U64:
    byte = np.uint64(0xFF)
    first = head & byte
    middle = (head >> ((length >> np.uint64(1)) << np.uint64(3))) & byte
    last = (head >> ((length - np.uint64(1)) << np.uint64(3))) & byte
    combined = (first << np.uint64(16)) | (middle << np.uint64(24)) | last
    h = (combined | (length << np.uint64(8))) ^ _XXH3_FLIP_1TO3
    h = _xorshift(h, 33) * _XXH_PRIME64_2
    h = _xorshift(h, 29) * _XXH_PRIME64_3
    return _xorshift(h, 32)


def _xxh3_4to8(head: U64, tail: U64, length: U64) -> U64:
    h = ((tail >> np.uint64(32)) + ((head & _LOW32) << np.uint64(32))) ^ _XXH3_FLIP_4TO8
    h ^= _rotl(h, 49) ^ _rotl(h, 24)
    h *= _XXH_PRIME_MX2
    h ^= (h >> np.uint64(35)) + length
    h *= _XXH_PRIME_MX2
    return _xorshift(h, 28)


def _xxh3_9to16(head: U64, tail: U64, length: U64) -> U64:
    low = head ^ _XXH3_FLIP_9TO16_LO
    high = tail ^ _XXH3_FLIP_9TO16_HI
    h = length + low.byteswap() + high + _mul128_fold64(low, high)
    h = _xorshift(h, 37) * _XXH_PRIME_MX1
    return _xorshift(h, 32)


def xxh3_64_short(head: U64, tail: U64, length: U64) -> U64:
    """xxh3-64 (seed 0) of many inputs of 1 to :data:`XXH3_SHORT_MAX` bytes, in numpy.

    Args:
        head: the 8 bytes read (little-endian) from the start of each input; bytes past its end
            may hold anything.
        tail: the 8 bytes ending at the end of each input; bytes before its start may hold
            anything.
        length: the length of each input.

    Returns:
        The same values as ``xxhash.xxh3_64_intdigest`` of each input.
    """
    with np.errstate(over="ignore"):
        if len(length) and int(length.min()) > 8:
            return _xxh3_9to16(head, tail, length)
        out = _xxh3_4to8(head, tail, length)
        tiny = np.flatnonzero(length < np.uint64(4))
        if len(tiny):
            out[tiny] = _xxh3_1to3(head[tiny], length[tiny])
        wide = np.flatnonzero(length > np.uint64(8))
        if len(wide):
            out[wide] = _xxh3_9to16(head[wide], tail[wide], length[wide])
    return out
