"""Winnowing (Schleimer, Wilkerson, Aiken): a position-robust sample of a document's shingles.

The minimum shingle hash of every window of ``w`` consecutive shingles is kept. Two documents
that share a run of at least ``w`` consecutive shingles (``w + n - 1`` words) share the minimum
of that window, so an excerpt copied out of a long article always shares a sample key with it,
however low their Jaccard similarity.
"""

from __future__ import annotations

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.hashing import U64
from dedup_store.core.shingles import I64, unique_per_document


def sliding_min(values: U64, w: int) -> U64:
    """Minimum of every window of ``w`` consecutive values.

    Minima of windows of 1, 2, 4, ... values, each from two of the previous ones, until the
    widest power of two ``p <= w``; a window of ``w`` is then two overlapping windows of ``p``.
    About ``log2(w)`` elementwise passes.
    """
    if len(values) < w:
        return np.empty(0, dtype=np.uint64)
    mins = values
    span = 1
    while span * 2 <= w:
        mins = np.minimum(mins[:-span], mins[span:])
        span *= 2
    if span < w:
        mins = np.minimum(mins[: len(mins) - (w - span)], mins[w - span :])
    return mins if span > 1 else values.copy()


def winnow(sequence: U64, offsets: I64, w: int) -> tuple[U64, I64]:
    """Winnowed sample of each document's ordered shingle hashes.

    Args:
        sequence: every document's shingle hashes in document order, concatenated.
        offsets: document ``d`` owns ``sequence[offsets[d]:offsets[d + 1]]`` (non-empty).
        w: window size; a document with fewer than ``w`` shingles keeps its minimum.

    Returns:
        ``(keys, key_offsets)``: distinct sample hashes per document, sorted, concatenated.
    """
    if kernels.compiled is not None:
        keys, key_offsets = kernels.compiled.winnow(
            np.ascontiguousarray(sequence, dtype=np.uint64),
            np.ascontiguousarray(offsets, dtype=np.int64),
            w,
        )
        return np.frombuffer(keys, dtype=np.uint64), np.frombuffer(key_offsets, dtype=np.int64)
    n_docs = len(offsets) - 1
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(n_docs), lengths)
    mins = sliding_min(sequence, w)
    valid = np.flatnonzero(owner[: len(mins)] == owner[w - 1 : w - 1 + len(mins)])
    short = np.flatnonzero(lengths < w)
    short_mins = np.minimum.reduceat(sequence, offsets[:-1])[short] if len(short) else mins[:0]
    kept, kept_owner = mins[valid], owner[valid]
    # consecutive windows mostly share their minimum: drop repeats before the sort
    fresh = np.ones(len(kept), dtype=bool)
    fresh[1:] = (kept[1:] != kept[:-1]) | (kept_owner[1:] != kept_owner[:-1])
    values = np.concatenate([kept[fresh], short_mins])
    owners = np.concatenate([kept_owner[fresh], short])
    return unique_per_document(values, owners, n_docs)
