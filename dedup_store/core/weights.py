"""SimHash feature weights from document frequencies: tf-idf and a term-length curve.

With ``simhash_weights`` ``tfidf`` every occurrence of a feature (a word, or a CJK character
shingle) votes with the feature's smoothed inverse document frequency

    idf = ln((N + 1) / (df + 1)) + 1

where ``N`` is the number of documents and ``df`` the number of documents holding the feature:
those of the store before the batch (:class:`DocumentFrequencies`, which the database layer
reads) plus those of the batch itself. A document's term frequency is the number of times its
features occur, so summing the votes of every occurrence weighs each feature by tf times idf.
``tfidf-length`` multiplies by a normal curve over the feature's length in UTF-8 bytes (mean
4.51, standard deviation 2.207, 1 at its peak; the curve was fitted on Chinese terms, and over
bytes it helps Russian and Chinese recall where it does not over characters).

Below :data:`MIN_DOCUMENTS` documents (the store's and the batch's together) the counts say
little and every idf is 1: ``tfidf`` is then ``count``, and ``tfidf-length`` the length curve
alone.

Weights are rounded to multiples of 1/1000 (integers in ``float32``), so the bit totals are
exact sums whatever order a backend or a batch adds them in: one document gets the same
SimHash alone and in any batch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from dedup_store.core.arrays import I64, U64
from dedup_store.core.params import FingerprintParams

LENGTH_MEAN = 4.51
LENGTH_SD = 2.207
#: Fewer documents than this (stored and in the batch) and every idf is 1.
MIN_DOCUMENTS = 100
_SCALE = 1000.0

F32 = npt.NDArray[np.float32]


@dataclasses.dataclass(frozen=True)
class DocumentFrequencies:
    """Document frequencies of some features in a store.

    Attributes:
        features: feature hashes (as ``int64``), sorted and distinct.
        counts: number of stored documents holding each feature.
        documents: number of stored documents.
    """

    features: I64
    counts: I64
    documents: int

    @classmethod
    def empty(cls) -> DocumentFrequencies:
        """The frequencies of an empty store."""
        none = np.empty(0, dtype=np.int64)
        return cls(none, none, 0)

    def of(self, features: I64) -> I64:
        """The stored count of each of ``features`` (0 for a feature not stored)."""
        if len(self.features) == 0:
            return np.zeros(len(features), dtype=np.int64)
        at = np.minimum(np.searchsorted(self.features, features), len(self.features) - 1)
        found = self.features[at] == features
        return np.where(found, self.counts[at], 0)


def distinct_features(features: U64, offsets: I64) -> tuple[I64, I64]:
    """The distinct features of a batch (sorted, as ``int64``) and how many documents hold each.

    Args:
        features: the documents' features, concatenated (``features[offsets[d]:offsets[d+1]]``).
        offsets: row offsets.
    """
    unique, _, held = _feature_index(features, offsets)
    return unique, np.bincount(held % max(len(unique), 1), minlength=len(unique))


def document_features(features: U64, offsets: I64) -> tuple[I64, I64]:
    """Each document's distinct features: ``(owner, feature)`` pairs sorted by owner."""
    unique, _, held = _feature_index(features, offsets)
    width = max(len(unique), 1)
    return held // width, unique[held % width]


def _feature_index(features: U64, offsets: I64) -> tuple[I64, I64, I64]:
    """The distinct features (sorted, ``int64``), the index of each occurrence's feature in them,
    and the distinct ``(document, feature)`` pairs as ``document * len(distinct) + index``."""
    unique, inverse = np.unique(features.view(np.int64), return_inverse=True)
    owner = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    held = np.unique(owner * max(len(unique), 1) + inverse)
    return unique, inverse.astype(np.int64), held


def length_relevance(byte_lengths: npt.NDArray[np.integer]) -> npt.NDArray[np.float64]:
    """The term-length curve: a normal density over the length, 1 at its peak."""
    lengths = byte_lengths.astype(np.float64)
    relevance: npt.NDArray[np.float64] = np.exp(
        -((lengths - LENGTH_MEAN) ** 2) / (2 * LENGTH_SD**2)
    )
    return relevance


def idf(stored: I64, batch: I64, documents: int) -> npt.NDArray[np.float64]:
    """Smoothed idf of features held by ``stored + batch`` of ``documents`` documents."""
    if documents < MIN_DOCUMENTS:
        return np.ones(len(stored), dtype=np.float64)
    values: npt.NDArray[np.float64] = np.log((documents + 1) / (stored + batch + 1.0)) + 1.0
    return values


def occurrence_weights(
    params: FingerprintParams,
    features: U64,
    offsets: I64,
    byte_lengths: npt.NDArray[np.integer],
    stored: DocumentFrequencies,
    rows: I64 | None = None,
) -> F32:
    """The weight of every feature occurrence of a batch, as ``simhash_weights`` says.

    Args:
        params: the store's parameters (``simhash_weights`` ``tfidf`` or ``tfidf-length``).
        features, offsets: each document's feature occurrences, grouped by document.
        byte_lengths: the UTF-8 length of each occurrence's feature.
        stored: the store's frequencies of (at least) the batch's features.
        rows: the documents of the batch that count into the frequencies (those to be
            written); ``None``: all.
    """
    unique, inverse, held = _feature_index(features, offsets)
    if rows is None:
        batch_df = np.bincount(held % max(len(unique), 1), minlength=len(unique))
        documents = len(offsets) - 1
    else:
        counted = DocumentFrequencies(*distinct_features(*_rows_of(features, offsets, rows)), 0)
        batch_df, documents = counted.of(unique), len(rows)
    weights = idf(stored.of(unique), batch_df, stored.documents + documents)[inverse]
    if params.simhash_weights == "tfidf-length":
        weights = weights * length_relevance(byte_lengths)
    return np.maximum(np.rint(weights * _SCALE), 1.0).astype(np.float32)


def _rows_of(features: U64, offsets: I64, rows: I64 | None) -> tuple[U64, I64]:
    """The features and offsets of ``rows`` only."""
    if rows is None:
        return features, offsets
    lengths = np.diff(offsets)[rows]
    new_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    index = np.repeat(offsets[:-1][rows] - new_offsets[:-1], lengths)
    index += np.arange(int(new_offsets[-1]), dtype=np.int64)
    return features[index], new_offsets
