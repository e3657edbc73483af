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
    """The distinct SimHash features of each document of a batch, and of the whole batch.

    Attributes:
        values: each document's distinct features (as ``int64``), documents one after another.
        offsets: document ``d`` holds ``values[offsets[d]:offsets[d + 1]]``.
        occurrences: how often the document has each of its features (its term frequency).
        unique: the distinct features of the batch, sorted.
        inverse: the index in ``unique`` of each of ``values``.
        lengths: the UTF-8 length of each of ``unique`` (``None`` when not asked for).
    """

    values: I64
    offsets: I64
    occurrences: I64
    unique: I64
    inverse: I64
    lengths: I64 | None

    @classmethod
    def of(
        cls, values: U64, offsets: I64, occurrences: I64, lengths: I64 | None = None
    ) -> FeatureIndex:
        """The index of the distinct features ``values[offsets[d]:offsets[d + 1]]`` of each
        document, which has each ``occurrences`` times, with their ``lengths`` if given."""
        keys = values.view(np.int64)
        unique, inverse = np.unique(keys, return_inverse=True)
        unique_lengths = None
        if lengths is not None:
            unique_lengths = np.zeros(len(unique), dtype=np.int64)
            unique_lengths[inverse] = lengths
        return cls(keys, offsets, occurrences, unique, inverse.astype(np.int64), unique_lengths)

    @classmethod
    def of_occurrences(cls, features: U64, offsets: I64) -> FeatureIndex:
        """The index of the feature occurrences ``features[offsets[d]:offsets[d + 1]]`` of
        each document (no lengths)."""
        n = len(offsets) - 1
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
        order = np.lexsort((features, owner))
        ordered, owner = features[order], owner[order]
        first = np.ones(len(ordered), dtype=bool)
        first[1:] = (ordered[1:] != ordered[:-1]) | (owner[1:] != owner[:-1])
        starts = np.flatnonzero(first)
        held = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner[starts], minlength=n), out=held[1:])
        return cls.of(ordered[starts], held, np.diff(np.append(starts, len(ordered))))

    @property
    def documents(self) -> int:
        """The number of documents of the batch."""
        return len(self.offsets) - 1

    def counts(self, rows: I64 | None = None) -> I64:
        """For each of :attr:`unique`, how many of the documents ``rows`` (``None``: all) hold
        it."""
        inverse = self.inverse if rows is None else self.inverse[self._of_rows(rows)]
        return np.bincount(inverse, minlength=len(self.unique))

    def pairs(self, rows: I64 | None = None) -> tuple[I64, I64]:
        """``(document, feature)`` of each document of ``rows`` (``None``: all) and each of
        its distinct features, by document."""
        owner = np.repeat(np.arange(self.documents, dtype=np.int64), np.diff(self.offsets))
        if rows is None:
            return owner, self.values
        chosen = self._of_rows(rows)
        return owner[chosen], self.values[chosen]

    def _of_rows(self, rows: I64) -> npt.NDArray[np.bool_]:
        """Whether each of :attr:`values` belongs to one of the documents ``rows``."""
        chosen = np.zeros(self.documents, dtype=bool)
        chosen[rows] = True
        mask: npt.NDArray[np.bool_] = np.repeat(chosen, np.diff(self.offsets))
        return mask


def distinct_features(features: U64, offsets: I64) -> tuple[I64, I64]:
    """The distinct features of a batch (sorted, as ``int64``) and how many documents hold each.

    Args:
        features: the documents' features, concatenated (``features[offsets[d]:offsets[d+1]]``).
        offsets: row offsets.
    """
    index = FeatureIndex.of_occurrences(features, offsets)
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


def feature_weights(
    params: FingerprintParams,
    index: FeatureIndex,
    stored: DocumentFrequencies,
    rows: I64 | None = None,
) -> I64:
    """The weight of each document's distinct features (:attr:`FeatureIndex.values`), as
    ``simhash_weights`` says: its term frequency times the weight of one occurrence, in
    thousandths (at least 1).

    Args:
        params: the store's parameters (``simhash_weights`` ``tfidf`` or ``tfidf-length``).
        index: the batch's features (:class:`FeatureIndex`, with lengths for
            ``tfidf-length``).
        stored: the store's frequencies of (at least) the batch's features.
        rows: the documents of the batch that count into the frequencies (those to be
            written); ``None``: all.
    """
    counted = index.documents if rows is None else len(rows)
    weights = idf(stored.of(index.unique), index.counts(rows), stored.documents + counted)
    if params.simhash_weights == "tfidf-length":
        if index.lengths is None:
            raise ValueError("tfidf-length weights need the features' lengths")
        weights = weights * length_relevance(index.lengths)
    one = np.maximum(np.rint(weights * _SCALE), 1.0).astype(np.int64)
    return one[index.inverse] * index.occurrences
