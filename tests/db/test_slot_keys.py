"""Band and block keys in narrow tables, ``slot_keys`` (settled) and ``recent_slot_keys``: one row
per key of each first document, each key moved by a salt of its slot, one index on ``(key,
doc_id)`` per table."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, Document, FingerprintParams
from dedup_store.db.candidates.lookup import KeyGroup, KeyQuery, find_keys
from dedup_store.db.rows import key_rows
from dedup_store.db.schema.encoding import BAND, BLOCK, slot_salt
from dedup_store.db.schema.names import qualified
from dedup_store.results import CheckResult
from tests.db.corpus import PlantedCorpus

pytestmark = pytest.mark.db


def _answer(result: CheckResult) -> list[tuple[str, str, float]]:
    return [(m.external_id, m.method, round(m.jaccard, 9)) for m in result.matches]


def _rows(engine: Engine, schema: str, table: str | None = None) -> list[tuple[int, int, int, int]]:
    """The rows of ``table`` (of both tiers by default), ``(doc_id, kind, slot, key)``."""
    tables = [table] if table else ["slot_keys", "recent_slot_keys"]
    union = " UNION ALL ".join(f"SELECT * FROM {qualified(schema, t)}" for t in tables)
    with engine.connect() as conn:
        rows = conn.execute(
            text(f"SELECT doc_id, kind, slot, key FROM ({union}) k ORDER BY doc_id, kind, slot")
        ).all()
    return [tuple(int(v) for v in row) for row in rows]  # type: ignore[misc]


def _computed(engine: Engine, schema: str, params: FingerprintParams) -> list[tuple[int, ...]]:
    """The rows the stored fingerprints of the first documents imply."""
    with engine.connect() as conn:
        parts = list(key_rows.stored_rows(conn, schema, params))
    rows = key_rows.KeyRows.concat(parts)
    columns = (rows.doc, rows.kind, rows.slot, rows.key)
    return sorted(zip(*(c.tolist() for c in columns), strict=True))


def test_every_write_path_stores_the_keys_the_fingerprints_imply(
    engine: Engine, schema: str
) -> None:
    """A bulk load, batches and single adds each write one row per band and block key of each
    first document (exact copies none): the bulk load's into the settled tier, the others into
    the recent one; lookups find documents of every path and tier."""
    corpus = PlantedCorpus(31)
    params = FingerprintParams()
    first = [Document(f"a{i}", corpus.original()) for i in range(40)]
    with DedupStore(engine, params, schema=schema) as store:
        assert store.ingest(first, bulk=True).bulk
        edits = store.add_many([Document(f"b{i}", corpus.edit(first[i].text, 2)) for i in range(5)])
        assert [r.matches[0].external_id for r in edits] == [f"a{i}" for i in range(5)]
        single_text = corpus.original()
        store.add("c0", single_text)
        copy = store.add("a0-copy", first[0].text)
        assert [m.external_id for m in store.check(corpus.edit(single_text, 1)).matches] == ["c0"]
    assert [m.external_id for m in copy.matches] == ["a0"]
    rows = _rows(engine, schema)
    per_document = params.band_key_count + params.block_key_count
    assert len(rows) == 46 * per_document  # 40 + 5 + 1 first documents, not the copy
    assert rows == _computed(engine, schema, params)
    assert {doc for doc, *_ in _rows(engine, schema, "slot_keys")} == set(range(1, 41))


def test_equal_keys_of_different_slots_never_meet(engine: Engine, schema: str) -> None:
    """A stored document's key of band slot 1 is not found as the same number in slot 2, nor
    as a block key of slot 1."""
    corpus = PlantedCorpus(32)
    with DedupStore(engine, schema=schema) as store:
        store.add("stored", corpus.original())
    with engine.connect() as conn:
        stored = conn.execute(
            text(
                f"SELECT key # :salt FROM {qualified(schema, 'recent_slot_keys')} "
                "WHERE kind = 0 AND slot = 1"
            ),
            {"salt": slot_salt(BAND, 1)},
        ).scalar_one()
        keys = np.array([stored], dtype=np.int64)
        docs = np.array([99], dtype=np.int64)
        groups = [
            KeyGroup(BAND, 1, keys, docs),
            KeyGroup(BAND, 2, keys, docs),
            KeyGroup(BLOCK, 1, keys, docs),
        ]
        found = find_keys(conn, schema, KeyQuery(groups, hot_limit=50))
    assert [len(ids) for ids in found.ids] == [1, 0, 0]


def test_a_deleted_document_takes_its_keys_and_its_copy_takes_its_place(
    engine: Engine, schema: str
) -> None:
    """A deleted first document's rows go with it; its exact copy, first of the group from then
    on, gets rows of its own and is found by its keys."""
    corpus = PlantedCorpus(36)
    text_a, text_b = corpus.original(), corpus.original()
    docs = [Document("a", text_a), Document("b", text_b), Document("a-copy", text_a)]
    docs += [Document(f"o{i}", corpus.original()) for i in range(20)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, bulk=True)
        assert store.delete(["a", "b"]) == 2
        assert [m.external_id for m in store.check(corpus.edit(text_a, 1)).matches] == ["a-copy"]
        assert store.check(corpus.edit(text_b, 1)).matches == []
        params = store.params
    rows = _rows(engine, schema)
    assert rows == _computed(engine, schema, params)
    assert len({doc for doc, *_ in rows}) == 21


def test_a_settle_moves_the_recent_tier_and_changes_no_answer(engine: Engine, schema: str) -> None:
    corpus = PlantedCorpus(33)
    first = [Document(f"a{i}", corpus.original()) for i in range(30)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(first, bulk=True)
        later = [Document(f"b{i}", corpus.original()) for i in range(30)]
        store.add_many(later)
        assert store.stats().recent_documents == 30
        queries = [corpus.edit(d.text, 1) for d in first[:5] + later[:5]]
        before = [_answer(store.check(q)) for q in queries]
        assert [a[0][0] for a in before] == [f"a{i}" for i in range(5)] + [
            f"b{i}" for i in range(5)
        ]
        settled = store.settle()
        assert (settled["moved"], settled["settled_through"]) == (30, 60)
        assert store.stats().recent_documents == 0
        assert [_answer(store.check(q)) for q in queries] == before
    assert _rows(engine, schema, "recent_slot_keys") == []


def _planner_view(engine: Engine, schema: str) -> tuple[int, float]:
    """The pages and rows the planner knows of the recent tier's table (``-1`` rows: never
    analyzed)."""
    select = "SELECT relpages, reltuples FROM pg_class WHERE oid = CAST(:t AS regclass)"
    with engine.connect() as conn:
        pages, rows = conn.execute(text(select), {"t": qualified(schema, "recent_slot_keys")}).one()
    return int(pages), float(rows)


def test_single_adds_have_the_growing_recent_tier_analyzed_and_a_settle_leaves_it_unknown(
    engine: Engine, schema: str
) -> None:
    """Once the recent tier outgrows the ten pages the planner guesses for a table never
    analyzed, single adds have it analyzed (with autovacuum off, as on the test server, nothing
    else would: the planner would guess hundreds of rows a key and sort a bitmap scan for
    each); emptied by a settle, it is not analyzed empty."""
    corpus = PlantedCorpus(34, words=(30, 50))
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document(f"a{i}", corpus.original()) for i in range(50)], bulk=True)
        assert _planner_view(engine, schema) == (0, -1.0)
        for i in range(300):
            store.add(f"b{i}", corpus.original())
        pages, rows = _planner_view(engine, schema)
        assert pages >= key_rows.RECENT_GUESSED_PAGES and rows > 1_000
        store.settle()
        assert _planner_view(engine, schema) == (0, -1.0)


def test_a_store_with_no_keys_written_computes_them_when_it_opens(
    engine: Engine, schema: str
) -> None:
    """A store upgraded from a version that kept its keys where the migration could not read
    them (revision 0007 and before) has an empty ``slot_keys``: opening it computes the rows."""
    corpus = PlantedCorpus(34)
    texts = [corpus.original() for _ in range(12)]
    with DedupStore(engine, schema=schema) as store:
        store.add_many([Document(f"d{i}", t) for i, t in enumerate(texts)])
        query = corpus.edit(texts[4], 1)
        expected = _answer(store.check(query))
        assert expected[0][:2] == ("d4", "minhash")
    rows = _rows(engine, schema)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {qualified(schema, 'slot_keys')}"))
        conn.execute(text(f"TRUNCATE {qualified(schema, 'recent_slot_keys')}"))
    with DedupStore(engine, schema=schema) as store:
        assert _answer(store.check(query)) == expected
    assert _rows(engine, schema) == rows
