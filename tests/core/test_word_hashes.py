"""Canonical batches: token hashes and stop words stay exact whatever the caches hold."""

from __future__ import annotations

import numpy as np
import xxhash

from dedup_store.core import FingerprintParams, canonical_tokens
from dedup_store.core.canonical import canonical_batch

RNG = np.random.default_rng(20261122)
ASCII = list("abcdefghijklmnopqrstuvwxyzABCZ0123456789")
MIXED = [*ASCII, "é", "ж", "ß", "ø"]


def _random_documents(count: int, words: int, alphabet: list[str]) -> list[str]:
    lengths = RNG.integers(1, 21, size=(count, words))
    return [
        " ".join("".join(RNG.choice(alphabet, size=n)) for n in row) + " the, Ourselves."
        for row in lengths
    ]


def test_token_hashes_are_xxh3_of_the_canonical_tokens() -> None:
    params = FingerprintParams()
    docs = _random_documents(300, 60, ASCII) + _random_documents(100, 60, MIXED)
    for _ in range(3):  # cold, then warm caches (with slot collisions among 18k words)
        batch = canonical_batch(docs, params)
        assert batch is not None
        tokens = [canonical_tokens(doc, params) for doc in docs]
        assert batch.texts == [" ".join(t) for t in tokens]
        expected = [xxhash.xxh3_64_intdigest(w.encode("utf-8")) for t in tokens for w in t]
        assert batch.token_hashes.tolist() == expected
        docs = docs[::-1]
