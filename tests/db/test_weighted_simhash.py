"""Stores with weighted SimHash features: document frequencies kept in SQL through ingest,
bulk loads, single adds and deletes, and the SimHashes weighed with them."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from dedup_store import DedupStore, Document, FingerprintParams, ParamsMismatchError, Status
from dedup_store.core import fingerprint_batch
from dedup_store.core.fingerprint import reweighted
from dedup_store.core.weights import DocumentFrequencies
from tests.db.corpus import stored_simhashes

HEADER = (
    "Permission is hereby granted free of charge to any person obtaining a copy of this "
    "software and associated documentation files to deal in the software without restriction "
)
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "so", "ta", "vi", "ze", "po"]
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]
TFIDF = FingerprintParams(simhash_weights="tfidf-length")


def _documents(n: int, seed: int, prefix: str = "d") -> list[Document]:
    """``n`` documents: one licence header, then 30 words of their own."""
    rng = np.random.default_rng(seed)
    texts = [HEADER + " ".join(rng.choice(WORDS, size=30).tolist()) for _ in range(n)]
    return [Document(f"{prefix}{i}", text) for i, text in enumerate(texts)]


def _stored_frequencies(engine: Engine, schema: str) -> tuple[int, dict[int, int]]:
    with engine.connect() as conn:
        documents = conn.execute(
            sa.text(f'SELECT documents FROM "{schema}".feature_documents')
        ).scalar()
        rows = conn.execute(sa.text(f'SELECT feature, df FROM "{schema}".feature_df')).all()
    return documents or 0, {int(f): int(df) for f, df in rows}


def _expected_frequencies(documents: list[Document]) -> tuple[int, dict[int, int]]:
    """Document frequencies counted from scratch over ``documents``."""
    batch = fingerprint_batch([d.text for d in documents], TFIDF)
    counts: Counter[int] = Counter()
    for i in range(len(batch)):
        row = batch.features[batch.feature_offsets[i] : batch.feature_offsets[i + 1]]
        counts.update(set(row.view(np.int64).tolist()))
    return len(documents), dict(counts)


def test_frequencies_follow_ingest_bulk_loads_adds_and_deletes(engine: Engine, schema: str) -> None:
    first, second = _documents(150, seed=1), _documents(60, seed=2, prefix="e")
    with DedupStore(engine, TFIDF, schema=schema) as store:
        assert store.ingest(first, bulk=True).bulk  # an empty store: a bulk load
        assert _stored_frequencies(engine, schema) == _expected_frequencies(first)
        store.ingest(second[:50], batch_size=16, bulk=False)
        for document in second[50:]:
            store.add(document.id, document.text)
        assert _stored_frequencies(engine, schema) == _expected_frequencies(first + second)
        store.delete([d.id for d in first[:40]] + ["e7"])
        kept = first[40:] + second[:7] + second[8:]
        assert _stored_frequencies(engine, schema) == _expected_frequencies(kept)
        store.add("e7", second[7].text, update=True)
        store.ingest([Document("d41", first[0].text)], update=True)
        kept = [d for d in kept if d.id != "d41"] + [second[7], Document("d41", first[0].text)]
        assert _stored_frequencies(engine, schema) == _expected_frequencies(kept)


def test_a_batch_is_weighed_with_the_store_before_it_plus_itself(
    engine: Engine, schema: str
) -> None:
    first, second = _documents(150, seed=3), _documents(40, seed=4, prefix="e")
    with DedupStore(engine, TFIDF, schema=schema) as store:
        store.ingest(first)
        before = _stored_frequencies(engine, schema)
        store.ingest(second, batch_size=len(second), bulk=False)
        with engine.connect() as conn:
            _, external_ids, simhashes = stored_simhashes(conn, schema)
    features = np.array(sorted(before[1]), dtype=np.int64)
    counts = np.array([before[1][f] for f in features.tolist()], dtype=np.int64)
    frequencies = DocumentFrequencies(features, counts, before[0])
    batch = fingerprint_batch([d.text for d in second], TFIDF, frequencies=frequencies)
    stored = dict(zip(external_ids, simhashes.tolist(), strict=True))
    assert [stored[d.id] for d in second] == batch.simhashes.tolist()
    # and the first load, weighed with its own counts alone
    alone = fingerprint_batch([d.text for d in first], TFIDF)
    assert [stored[d.id] for d in first] == alone.simhashes.tolist()


def test_check_weighs_a_text_as_add_would(engine: Engine, schema: str) -> None:
    documents = _documents(150, seed=5)
    with DedupStore(engine, TFIDF, schema=schema) as store:
        store.ingest(documents)
        edited = documents[3].text + " zekaru"
        checked = store.check(edited)
        added = store.add("edited", edited)
        assert checked.status is added.status
        assert [(m.external_id, m.hamming) for m in checked.matches] == [
            (m.external_id, m.hamming) for m in added.matches
        ]
        with engine.connect() as conn:
            _, external_ids, simhashes = stored_simhashes(conn, schema)
    one = fingerprint_batch([edited], TFIDF)
    stored = dict(zip(external_ids, simhashes.tolist(), strict=True))
    assert stored["edited"] != int(one.simhashes[0])  # the store's counts weigh it


def test_an_edit_stored_long_after_its_original_still_matches_it(
    engine: Engine, schema: str
) -> None:
    # the original is weighed against 150 documents, the edit against 450: their weights
    # drifted apart, and the store still reports the pair
    with DedupStore(engine, TFIDF, schema=schema) as store:
        store.ingest(_documents(150, seed=9))
        original = _documents(1, seed=10, prefix="original")[0]
        store.add("original", original.text)
        store.ingest(_documents(300, seed=11, prefix="later"), bulk=False)
        edited = original.text.replace(original.text.split()[-1], "zekaru")
        result = store.add("edited", edited)
    assert result.status is Status.NEAR_DUPLICATE
    assert [m.external_id for m in result.matches] == ["original"]


def test_bulk_and_incremental_loads_store_the_same_simhashes(engine: Engine) -> None:
    documents = _documents(120, seed=6)
    results = []
    for bulk in (True, False):
        schema = (
            f"t_weights_{'bulk' if bulk else 'batches'}_{np.random.default_rng().integers(1e9)}"
        )
        try:
            with DedupStore(engine, TFIDF, schema=schema) as store:
                store.ingest(documents, batch_size=len(documents), bulk=bulk)
                with engine.connect() as conn:
                    results.append(stored_simhashes(conn, schema)[2].tolist())
                results.append(_stored_frequencies(engine, schema))
        finally:
            with engine.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    assert results[0] == results[2] and results[1] == results[3]


def test_stores_of_counts_keep_no_frequencies(store: DedupStore, engine: Engine) -> None:
    store.ingest(_documents(20, seed=7))
    assert _stored_frequencies(engine, store.schema) == (0, {})
    with pytest.raises(ParamsMismatchError, match="simhash_weights: 'count' != 'tfidf'"):
        DedupStore(engine, FingerprintParams(simhash_weights="tfidf"), schema=store.schema)


def test_reweighted_rows_left_out_count_nothing() -> None:
    batch = fingerprint_batch([d.text for d in _documents(120, seed=8)], TFIDF)
    some = reweighted(batch, None, np.arange(0, 120, 2, dtype=np.int64))
    assert some.simhashes[0] != batch.simhashes[0]
