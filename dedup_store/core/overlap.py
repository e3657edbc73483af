"""How many shingles pairs of documents share, from their sorted shingle arrays."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dedup_store.core import kernels

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


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
    if kernels.compiled is not None:
        counts = kernels.compiled.intersection_sizes(values, offsets, left, right)
        return np.frombuffer(counts, dtype=np.int64).copy()
    return _reference_sizes(values, offsets, left, right)


def _reference_sizes(values: I32, offsets: I64, left: I64, right: I64) -> I64:
    """:func:`intersection_sizes`, one binary search of a group into the other per pair."""
    result = np.zeros(len(left), dtype=np.int64)
    for p, (a, b) in enumerate(zip(left.tolist(), right.tolist(), strict=True)):
        x, y = values[offsets[a] : offsets[a + 1]], values[offsets[b] : offsets[b + 1]]
        short, long = (x, y) if len(x) <= len(y) else (y, x)
        if len(long) == 0:
            continue
        at = np.searchsorted(long, short).clip(max=len(long) - 1)
        result[p] = np.count_nonzero(long[at] == short)
    return result
