"""Exact Jaccard and containment over the store's own shingles, by brute force.

The shingles are those :func:`dedup_store.fingerprint_batch` computes (sorted distinct 64-bit
hashes per document), so the truth is over exactly the sets the store compares. Every pair that
shares a shingle is scored: the intersection sizes of all such pairs are the entries of
``X @ X.T`` for the sparse document-by-shingle matrix ``X`` (shingles held by a single document
left out), computed a block of rows at a time. A shingle held by ``k`` documents costs ``k**2``
multiply-adds there, not ``k**2`` Python steps, and the result holds at most one entry per pair,
so boilerplate shared by hundreds of documents stays cheap.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from benchmarks.evaluation import PairSet
from dedup_store import FingerprintParams, fingerprint_batch
from dedup_store.core.arrays import U64

KEEP_JACCARD = 0.25
KEEP_CONTAINMENT = 0.4
_BATCH = 2000
_BLOCK_ROWS = 4096


@dataclasses.dataclass
class ShingleTruth:
    """Exact scores of document pairs over their shingle hashes.

    Attributes:
        shingles: the sorted distinct shingle hashes of each document.
        scores: ``(jaccard, containment)`` of each pair ``(i, j)``, ``i < j``, with Jaccard at
            least :data:`KEEP_JACCARD` or containment at least :data:`KEEP_CONTAINMENT`;
            :meth:`score` computes any other pair.
        sharing: number of pairs sharing at least one shingle.
        seconds: time taken.
    """

    shingles: list[U64]
    scores: dict[tuple[int, int], tuple[float, float]]
    sharing: int
    seconds: float

    def score(self, i: int, j: int) -> tuple[float, float]:
        """``(jaccard, containment)`` of documents ``i`` and ``j``."""
        key = (min(i, j), max(i, j))
        if key in self.scores:
            return self.scores[key]
        a, b = self.shingles[i], self.shingles[j]
        inter = len(np.intersect1d(a, b, assume_unique=True))
        return inter / (len(a) + len(b) - inter), inter / max(1, min(len(a), len(b)))

    def jaccard_pairs(self, tau: float) -> PairSet:
        """Pairs with Jaccard at least ``tau``."""
        return {p for p, (j, _) in self.scores.items() if j >= tau}

    def containment_pairs(self, tau: float) -> PairSet:
        """Pairs with containment at least ``tau``."""
        return {p for p, (_, c) in self.scores.items() if c >= tau}


def document_shingles(
    texts: Sequence[str], params: FingerprintParams
) -> tuple[list[U64], list[int]]:
    """The shingle hashes of each text, and the positions of texts left empty.

    Returns:
        ``(shingles, empty)``: one array per text (empty for an empty text), and the positions
        of the texts that have no words after canonicalization.
    """
    out: list[U64] = [np.empty(0, dtype=np.uint64)] * len(texts)
    empty: list[int] = []
    for start in range(0, len(texts), _BATCH):
        batch = fingerprint_batch(texts[start : start + _BATCH], params)
        offsets = batch.shingle_offsets
        for row, source in enumerate(batch.source_index.tolist()):
            out[start + source] = batch.shingles[offsets[row] : offsets[row + 1]].copy()
        empty += [start + i for i in batch.empty_index]
    return out, empty


def shingle_truth(shingles: Sequence[U64]) -> ShingleTruth:
    """Score every pair of documents that shares a shingle (see the module docstring)."""
    start = time.perf_counter()
    matrix = _incidence(shingles)
    sizes = np.array([len(s) for s in shingles], dtype=np.float64)
    scores: dict[tuple[int, int], tuple[float, float]] = {}
    sharing = 0
    transposed = matrix.T.tocsr()
    for first in range(0, matrix.shape[0], _BLOCK_ROWS):
        block = (matrix[first : first + _BLOCK_ROWS] @ transposed).tocoo()
        rows = block.row.astype(np.int64) + first
        upper = block.col > rows
        i, j = rows[upper], block.col[upper].astype(np.int64)
        sharing += len(i)
        scores.update(_kept_scores(i, j, block.data[upper].astype(np.float64), sizes))
    return ShingleTruth(list(shingles), scores, sharing, time.perf_counter() - start)


def _incidence(shingles: Sequence[U64]) -> sp.csr_matrix:
    """Documents by shingles (0/1), without the shingles that only one document has."""
    offsets = np.zeros(len(shingles) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in shingles])
    joined = np.concatenate(list(shingles)) if shingles else np.empty(0, dtype=np.uint64)
    _, columns, frequency = np.unique(joined, return_inverse=True, return_counts=True)
    data = np.ones(len(columns), dtype=np.int32)
    matrix = sp.csr_matrix((data, columns.ravel(), offsets), shape=(len(shingles), len(frequency)))
    return sp.csr_matrix(matrix[:, np.flatnonzero(frequency > 1)])


def _kept_scores(
    i: npt.NDArray[np.int64],
    j: npt.NDArray[np.int64],
    inter: npt.NDArray[np.float64],
    sizes: npt.NDArray[np.float64],
) -> dict[tuple[int, int], tuple[float, float]]:
    jaccard = inter / (sizes[i] + sizes[j] - inter)
    containment = inter / np.minimum(sizes[i], sizes[j])
    keep = (jaccard >= KEEP_JACCARD) | (containment >= KEEP_CONTAINMENT)
    pairs = zip(i[keep].tolist(), j[keep].tolist(), strict=True)
    values = zip(jaccard[keep].tolist(), containment[keep].tolist(), strict=True)
    return dict(zip(pairs, values, strict=True))


def components(n: int, pairs: PairSet) -> list[list[int]]:
    """Connected components of the graph of ``pairs`` over ``n`` documents, largest first."""
    from scipy.sparse.csgraph import connected_components

    edges = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    graph = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    groups: dict[int, list[int]] = {}
    for doc, label in enumerate(labels.tolist()):
        groups.setdefault(label, []).append(doc)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))
