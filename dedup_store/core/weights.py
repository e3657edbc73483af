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

Weights are rounded to multiples of 1/1000 and summed as integers
(:func:`dedup_store.core.simhash.simhash_integer_weighted`), so the bit totals are exact: one
document gets the same SimHash alone and in any batch, under either kernel backend.
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


@dataclasses.dataclass(frozen=True)
class FeatureIndex:
    """The distinct SimHash features of a batch and the documents holding each.

    Attributes:
        unique: the distinct features, sorted, as ``int64``.
        inverse: for each feature occurrence, the index of its feature in ``unique``.
        held: the distinct ``(document, feature)`` pairs, as ``document * width + index``,
            sorted (by document, then feature).
        documents: the number of documents of the batch.
    """

    unique: I64
    inverse: I64
    held: I64
    documents: int

    @classmethod
    def of(cls, features: U64, offsets: I64) -> FeatureIndex:
        """The index of the features ``features[offsets[d]:offsets[d + 1]]`` of each document."""
        unique, inverse = np.unique(features.view(np.int64), return_inverse=True)
        owner = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
        held = np.unique(owner * max(len(unique), 1) + inverse)
        return cls(unique, inverse.astype(np.int64), held, len(offsets) - 1)

    @property
    def width(self) -> int:
        """The multiplier of the document in :attr:`held`."""
        return max(len(self.unique), 1)

    def counts(self, rows: I64 | None = None) -> I64:
        """For each of :attr:`unique`, how many of the documents ``rows`` (``None``: all) hold
        it."""
        held = self.held if rows is None else self.held[self._in(rows)]
        return np.bincount(held % self.width, minlength=len(self.unique))

    def pairs(self, rows: I64 | None = None) -> tuple[I64, I64]:
        """``(document, feature)`` of each document of ``rows`` (``None``: all) and each of
        its distinct features, by document."""
        held = self.held if rows is None else self.held[self._in(rows)]
        return held // self.width, self.unique[held % self.width]

    def _in(self, rows: I64) -> npt.NDArray[np.bool_]:
        chosen = np.zeros(self.documents, dtype=bool)
        chosen[rows] = True
        mask: npt.NDArray[np.bool_] = chosen[self.held // self.width]
        return mask


def distinct_features(features: U64, offsets: I64) -> tuple[I64, I64]:
    """The distinct features of a batch (sorted, as ``int64``) and how many documents hold each.

    Args:
        features: the documents' features, concatenated (``features[offsets[d]:offsets[d+1]]``).
        offsets: row offsets.
    """
    index = FeatureIndex.of(features, offsets)
    return index.unique, index.counts()


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
    index: FeatureIndex,
    byte_lengths: npt.NDArray[np.integer],
    stored: DocumentFrequencies,
    rows: I64 | None = None,
) -> I64:
    """The weight of every feature occurrence of a batch, as ``simhash_weights`` says, in
    thousandths (at least 1).

    Args:
        params: the store's parameters (``simhash_weights`` ``tfidf`` or ``tfidf-length``).
        index: the batch's features (:class:`FeatureIndex`).
        byte_lengths: the UTF-8 length of each occurrence's feature.
        stored: the store's frequencies of (at least) the batch's features.
        rows: the documents of the batch that count into the frequencies (those to be
            written); ``None``: all.
    """
    counted = index.documents if rows is None else len(rows)
    values = idf(stored.of(index.unique), index.counts(rows), stored.documents + counted)
    weights = values[index.inverse]
    if params.simhash_weights == "tfidf-length":
        weights = weights * length_relevance(byte_lengths)
    return np.maximum(np.rint(weights * _SCALE), 1.0).astype(np.int64)
