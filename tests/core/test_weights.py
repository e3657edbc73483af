"""Weighted SimHash (``simhash_weights`` ``tfidf`` and ``tfidf-length``) as a user sees it."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.core import FingerprintParams, fingerprint, fingerprint_batch
from dedup_store.core.kernels import Backend
from dedup_store.core.weights import (
    MIN_DOCUMENTS,
    DocumentFrequencies,
    distinct_features,
    length_relevance,
)
from tests.core.regen_golden import CHINESE, ENGLISH, MIXED, RUSSIAN

HEADER = (
    "Permission is hereby granted free of charge to any person obtaining a copy of this "
    "software and associated documentation files to deal in the software without restriction "
    "including without limitation the rights to use copy modify merge publish distribute "
)
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "so", "ta", "vi", "ze", "po"]
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]


def _corpus(n: int, seed: int = 3) -> list[str]:
    """``n`` documents: the same licence header, then a body of their own."""
    rng = np.random.default_rng(seed)
    return [HEADER + " ".join(rng.choice(WORDS, size=20).tolist()) for _ in range(n)]


def _frequencies(texts: list[str], params: FingerprintParams) -> DocumentFrequencies:
    """The document frequencies a store holding ``texts`` keeps."""
    batch = fingerprint_batch(texts, params)
    features, counts = distinct_features(batch.features, batch.feature_offsets)
    return DocumentFrequencies(features, counts, len(texts))


@pytest.mark.parametrize("weights", ["tfidf", "tfidf-length"])
def test_a_document_of_a_batch_weighs_as_if_added_after_the_rest(
    weights: str, backend: Backend
) -> None:
    # a batch is fingerprinted with the store's counts plus its own: each of its documents
    # gets the SimHash it gets alone after the others were stored (any backend, any order)
    params = FingerprintParams(simhash_weights=weights)  # type: ignore[arg-type]
    texts = [*_corpus(150), ENGLISH, RUSSIAN, CHINESE, MIXED]
    batch = fingerprint_batch(texts, params)
    for i in (0, 77, 150, 151, 152, 153):
        others = texts[:i] + texts[i + 1 :]
        alone = fingerprint(texts[i], params, frequencies=_frequencies(others, params))
        assert alone.simhash == int(batch.simhashes[i])
        assert alone.block_keys.tolist() == batch.block_keys[i].tolist()


def test_few_documents_fall_back_to_counts() -> None:
    texts = _corpus(MIN_DOCUMENTS - 1)
    counted = fingerprint_batch(texts, FingerprintParams())
    tfidf = fingerprint_batch(texts, FingerprintParams(simhash_weights="tfidf"))
    assert tfidf.simhashes.tolist() == counted.simhashes.tolist()
    bigger = fingerprint_batch(_corpus(MIN_DOCUMENTS), FingerprintParams(simhash_weights="tfidf"))
    assert bigger.simhashes[:10].tolist() != counted.simhashes[:10].tolist()


def test_tfidf_keeps_a_shared_header_from_deciding_the_simhash() -> None:
    texts = _corpus(400)

    def mean_distance(weights: str) -> float:
        params = FingerprintParams(simhash_weights=weights)  # type: ignore[arg-type]
        hashes = fingerprint_batch(texts, params).simhashes
        return float(np.mean(np.bitwise_count(hashes[1:] ^ hashes[:-1])))

    # unrelated bodies under one header: 18 bits apart by counts, 30 by tf-idf (32 is random)
    assert mean_distance("count") + 8 < mean_distance("tfidf")


def test_length_curve_peaks_at_four_and_five_bytes() -> None:
    curve = length_relevance(np.arange(1, 13))
    assert int(np.argmax(curve)) + 1 in (4, 5)
    assert curve.max() == pytest.approx(np.exp(-(0.49**2) / (2 * 2.207**2)))
    assert curve[-1] < 0.01


def test_caller_weights_are_for_counted_stores_only() -> None:
    with pytest.raises(ValueError, match="weighted simhash_weights"):
        fingerprint_batch([ENGLISH], FingerprintParams(simhash_weights="tfidf"), {"river": 2.0})
