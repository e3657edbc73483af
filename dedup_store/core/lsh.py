"""Band keys (locality-sensitive hashing) folded from MinHash signatures.

Two schemes:

* ``threshold``: ``b`` bands of ``r`` min-hashes, ``(b, r)`` chosen for the target Jaccard
  threshold; one key per band, and a pair is a candidate when any band key is equal.
* ``broder``: 6 super-shingles of ``num_perm // 6`` min-hashes; near-duplicate when at least two
  super-shingles are equal. Each of the 15 pairs of super-shingles is folded into one
  *mega-shingle* key, so "at least 2 of 6 equal" is "any mega-shingle key equal".
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from dedup_store.core.arrays import I64, U32
from dedup_store.core.hashing import as_int64, combine_groups
from dedup_store.core.params import FingerprintParams

_MEGA_SALT = 1 << 16


def super_shingles(signatures: U32, bands: int, rows: int) -> npt.NDArray[np.uint64]:
    """One 64-bit hash per band: shape ``(n_docs, bands)``."""
    wide = signatures[:, : bands * rows].reshape(len(signatures), bands, rows)
    return combine_groups(wide, np.arange(1, bands + 1, dtype=np.uint64))


def band_keys(signatures: U32, params: FingerprintParams) -> I64:
    """The band keys of each signature, shape ``(n_docs, params.band_key_count)``."""
    bands, rows = params.bands
    supers = super_shingles(signatures, bands, rows)
    if params.scheme == "threshold":
        return as_int64(supers)
    first, second = zip(*itertools.combinations(range(bands), 2), strict=True)
    pairs = np.stack([supers[:, list(first)], supers[:, list(second)]], axis=2)
    salts = _MEGA_SALT + np.arange(len(first), dtype=np.uint64)
    return as_int64(combine_groups(pairs, salts))
