"""64-bit hashing primitives shared by shingles, band keys and block keys.

Strings are hashed with xxh3 (64-bit); sequences of hashes (a shingle's tokens, a band's
min-hashes) are combined with fixed odd multipliers and finished with the splitmix64 mixer, all in
numpy ``uint64`` arithmetic (which wraps modulo 2**64, as intended).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import xxhash

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


def combine_groups(groups: U64, salts: U64) -> U64:
    """Hash every group of a 3-D ``uint64`` array ``(n, groups, width)`` into one value.

    Group ``g`` of row ``i`` gives the same value as
    ``combine_columns(groups[:, g, :], salts[g])[i]``; all groups are done in one pass.
    """
    width = groups.shape[2]
    with np.errstate(over="ignore"):
        start = salts.astype(np.uint64) * _SPLITMIX_GAMMA
        weighted = groups * COMBINE[:width]
        acc = np.add.reduce(weighted, axis=2, dtype=np.uint64) + start
    return mix64(acc)


def hash_strings(strings: list[str]) -> U64:
    """xxh3-64 of each string's UTF-8 bytes."""
    digest = xxhash.xxh3_64_intdigest
    hashes = (digest(s.encode("utf-8")) for s in strings)
    return np.fromiter(hashes, dtype=np.uint64, count=len(strings))


def exact_hash(canonical_text: str) -> bytes:
    """128-bit xxh3 digest of the canonical text, for the exact-duplicate stage."""
    return xxhash.xxh3_128_digest(canonical_text.encode("utf-8"))


def as_int64(values: U64) -> npt.NDArray[np.int64]:
    """Reinterpret uint64 as int64 (PostgreSQL ``bigint``) without changing bits."""
    return values.view(np.int64)
