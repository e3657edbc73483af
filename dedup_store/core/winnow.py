"""Winnowing (Schleimer, Wilkerson, Aiken): a position-robust sample of a document's shingles.

The minimum shingle hash of every window of ``w`` consecutive shingles is kept. Two documents
that share a run of at least ``w`` consecutive shingles (``w + n - 1`` words) share the minimum
of that window, so an excerpt copied out of a long article always shares a sample key with it,
however low their Jaccard similarity.
"""

from __future__ import annotations

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U64


def winnow(sequence: U64, offsets: I64, w: int) -> tuple[U64, I64]:
    """Winnowed sample of each document's ordered shingle hashes.

    Args:
        sequence: every document's shingle hashes in document order, concatenated.
        offsets: document ``d`` owns ``sequence[offsets[d]:offsets[d + 1]]`` (non-empty).
        w: window size; a document with fewer than ``w`` shingles keeps its minimum.

    Returns:
        ``(keys, key_offsets)``: distinct sample hashes per document, sorted, concatenated.
    """
    return kernels.backend.winnow(sequence, offsets, w)
