"""How many shingles pairs of documents share, from their sorted shingle arrays."""

from __future__ import annotations

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.arrays import I32, I64


def intersection_sizes(values: I32, offsets: I64, left: I64, right: I64) -> I64:
    """``|X ∩ Y|`` for each pair of groups ``(left[p], right[p])``.

    Group ``g`` is ``values[offsets[g]:offsets[g + 1]]``, sorted. Each value of the shorter
    group (the left one on a tie) counts once if the other group holds it, so a pair costs the
    shorter group times the logarithm of the longer one at most, however long that one is.
    """
    values = np.ascontiguousarray(values, dtype=np.int32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    left = np.ascontiguousarray(left, dtype=np.int64)
    right = np.ascontiguousarray(right, dtype=np.int64)
    return kernels.backend.intersection_sizes(values, offsets, left, right)
