"""64-bit hashing primitives shared by shingles, band keys and block keys.

Strings are hashed with xxh3; sequences of hashes (a shingle's tokens, a band's min-hashes) are
combined with fixed odd multipliers and finished with the splitmix64 mixer
(:mod:`dedup_store.core.mixing`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import xxhash

from dedup_store.core import kernels
from dedup_store.core.arrays import U64
from dedup_store.core.mixing import COMBINE as COMBINE
from dedup_store.core.mixing import MASK64 as MASK64
from dedup_store.core.mixing import mix64 as mix64


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
    groups = np.ascontiguousarray(groups, dtype=np.uint64)
    return kernels.backend.combine_groups(groups, np.ascontiguousarray(salts, dtype=np.uint64))


def exact_hash(canonical_text: str) -> bytes:
    """128-bit xxh3 digest of the canonical text, for the exact-duplicate stage."""
    return xxhash.xxh3_128_digest(canonical_text.encode("utf-8"))


def exact_hashes(canonical_texts: list[str]) -> list[bytes]:
    """:func:`exact_hash` of each canonical text."""
    return list(map(xxhash.xxh3_128_digest, map(str.encode, canonical_texts)))


def as_int64(values: U64) -> npt.NDArray[np.int64]:
    """Reinterpret uint64 as int64 (PostgreSQL ``bigint``) without changing bits."""
    return values.view(np.int64)
