"""Two tiers of key indexes: the documents settled by the last bulk load (or ``settle``) and
those added since. Writes insert into the small recent tier; every lookup probes both and
finds what one index would find."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Connection, Engine, text

from dedup_store import DedupStore, Document, FingerprintParams
from dedup_store.core.fingerprint import fingerprint_batch
from dedup_store.db.candidates.lookup import any_of, find_keys, key_groups, slot_lookup
from dedup_store.db.candidates.side import MetSummaries, SideIndexedKeys, SideReader
from dedup_store.db.candidates.stored import INDEXED
from dedup_store.db.schema import ddl, migrate
from dedup_store.db.schema.encoding import BAND, BLOCK
from dedup_store.db.schema.names import qualified
from dedup_store.results import CheckResult
from tests.conftest import drop_schema
from tests.db.corpus import PlantedCorpus
from tests.db.test_bulk import _hot_documents
from tests.snapshots import snapshot
from tests.spark.corpora import hot_tables

pytestmark = pytest.mark.db


def _answer(result: CheckResult) -> list[tuple[str, str, float]]:
    return [(m.external_id, m.method, round(m.jaccard, 9)) for m in result.matches]


def _settled_and_recent(corpus: PlantedCorpus) -> tuple[list[Document], list[Document]]:
    """40 documents to load in bulk, then 10 edits of the first ten of them and 10 others."""
    first = [Document(f"a{i}", corpus.original()) for i in range(40)]
    later = [Document(f"b{i}", corpus.edit(first[i].text, 2)) for i in range(10)]
    later += [Document(f"c{i}", corpus.original()) for i in range(10)]
    return first, later


def test_writes_after_a_bulk_load_go_to_the_recent_tier_and_lookups_see_both(
    engine: Engine, schema: str
) -> None:
    corpus = PlantedCorpus(31)
    first, later = _settled_and_recent(corpus)
    with DedupStore(engine, schema=schema) as store:
        assert store.ingest(first, bulk=True).bulk
        assert store.stats().recent_documents == 0
        results = store.add_many(later)
        # edits of settled documents are found through the settled tier
        assert [r.matches[0].external_id for r in results[:10]] == [f"a{i}" for i in range(10)]
        assert store.stats().recent_documents == 20
        queries = [corpus.edit(d.text, 1) for d in first[:5] + later[10:15]]
        before = [_answer(store.check(q)) for q in queries]
        # edits of recent documents are found through the recent tier
        assert [a[0][0] for a in before[5:]] == [f"c{i}" for i in range(5)]

        settled = store.settle()
        assert settled["moved"] == 20 and store.stats().recent_documents == 0
        assert [_answer(store.check(q)) for q in queries] == before
    with engine.connect() as conn:
        assert ddl.settled_through(conn, schema) == settled["settled_through"] == 60


def test_each_tier_is_probed_through_its_own_index(engine: Engine, schema: str) -> None:
    """Each tier through its column's index on its table: ``settled_keys``, ``recent_keys``."""
    corpus = PlantedCorpus(32, words=(40, 60))
    first, _ = _settled_and_recent(corpus)
    with DedupStore(engine, schema=schema) as store:
        store.ingest(first, bulk=True)
        store.add_many([Document(f"r{i}", corpus.original()) for i in range(300)])
    with engine.begin() as conn:
        for table in ddl.TIER_TABLES.values():
            conn.execute(text(f"ANALYZE {qualified(schema, table)}"))
        conn.execute(text("SET LOCAL enable_seqscan = off"))  # a Seq Scan: no index applies
        for kind, name in ((BAND, "band"), (BLOCK, "block")):
            probe = slot_lookup(
                qualified(schema), kind, 3, any_of("SELECT CAST(:keys AS bigint[])")
            )
            plan = "\n".join(conn.execute(text(f"EXPLAIN {probe}"), {"keys": "{1,2,3}"}).scalars())
            assert "Seq Scan" not in plan, plan
            used = set(re.findall(r"(?:settled|recent)_keys_(?:band|block|id)\w*", plan))
            assert used == {f"settled_keys_{name}_3", f"recent_keys_{name}_3"}, plan


def test_a_settle_by_another_store_changes_no_match(engine: Engine, schema: str) -> None:
    """A store open while another settles finds the same matches before and after: a document
    is in one tier's table or the other's, whichever store moved it."""
    corpus = PlantedCorpus(33)
    first, later = _settled_and_recent(corpus)
    queries = [corpus.edit(d.text, 1) for d in first[:3] + later[10:13]]
    with DedupStore(engine, schema=schema) as reader, DedupStore(engine, schema=schema) as writer:
        writer.ingest(first, bulk=True)
        writer.add_many(later)
        before = [_answer(reader.check(q)) for q in queries]
        assert writer.settle()["settled_through"] == 60
        assert [_answer(reader.check(q)) for q in queries] == before
        assert [_answer(writer.check(q)) for q in queries] == before
        assert all(before)
        late = corpus.edit(later[12].text, 1)
        added = reader.add("late", late)
        assert added.status.value == "near_duplicate" and added.matches[0].external_id == "c2"


def test_a_0006_store_takes_its_documents_as_settled(engine: Engine, schema: str) -> None:
    corpus = PlantedCorpus(34)
    first, later = _settled_and_recent(corpus)
    params = FingerprintParams()
    with DedupStore(engine, params, schema=schema) as store:
        store.add_many(first)
    migrate.downgrade(engine, schema, "0006")
    with engine.begin() as conn:
        names = conn.execute(
            text("SELECT indexname FROM pg_indexes WHERE schemaname = :s AND indexname ~ :p"),
            {"s": schema, "p": "^documents_(band|block)_"},
        ).all()
        assert names == []  # 0006 builds its own when it opens: as it did, without a bound
        for kind, column, slot in ddl.key_slots(params):
            name = f"documents_{'band' if kind == BAND else 'block'}_{slot}"
            conn.execute(
                text(
                    f"CREATE INDEX {name} ON {qualified(schema, 'documents')} "
                    f"(({column}[{slot}])) WHERE exact_of IS NULL"
                )
            )
    migrate.upgrade(engine, schema)
    with DedupStore(engine, params, schema=schema) as store:
        assert store.stats().recent_documents == 0
        results = store.add_many(later)
        assert [r.matches[0].external_id for r in results[:10]] == [f"a{i}" for i in range(10)]
        assert store.stats().recent_documents == 20
        query = corpus.edit(later[12].text, 1)
        before = _answer(store.check(query))
        assert before[0][0] == "c2"
        store.settle()
        assert _answer(store.check(query)) == before
    with engine.connect() as conn:
        old_indexes = conn.execute(
            text("SELECT count(*) FROM pg_indexes WHERE schemaname = :s AND indexname ~ :p"),
            {"s": schema, "p": "^documents_(band|block)_[0-9]+$"},
        ).scalar_one()
    settled_ids, firsts = _settled_and_first_ids(engine, schema)
    assert old_indexes == 0  # the settled tier is the table now
    assert settled_ids == firsts and len(firsts) > 50  # every first document (no copies)


def test_settled_tier_looked_up_on_a_side_connection_changes_nothing(
    engine: Engine, schema: str
) -> None:
    """Incremental batches after a bulk load look the settled tier up on a connection of
    their own (a store on its own engine); on a caller's connection they look up both tiers
    in one statement. Hot buckets included, both give the same store."""
    docs = _hot_documents()
    params = FingerprintParams(hot_key_limit=5)
    other = f"{schema}_x"
    try:
        with DedupStore(engine, params, schema=schema) as store:
            store.ingest(docs[:90], bulk=True)
            store.ingest(docs[90:], batch_size=16, bulk=False)
        with engine.connect() as conn:
            with DedupStore(conn, params, schema=other) as store:
                store.ingest(docs[:90], bulk=True)
                store.ingest(docs[90:], batch_size=16, bulk=False)
            conn.commit()
        expected, actual = snapshot(engine, other), snapshot(engine, schema)
        for part in ("documents", "sample_keys", "edges", "clusters"):
            assert actual[part] == expected[part], part
        assert hot_tables(engine, schema) == hot_tables(engine, other)
        assert hot_tables(engine, schema)["hot"]  # the batches met hot keys
    finally:
        drop_schema(engine, other)


def test_side_lookups_find_every_key_one_statement_finds(engine: Engine, schema: str) -> None:
    """The side connections each look up a part of the slots and of the excerpt keys; the
    parts joined are what one statement over both tiers finds, key by key (excerpts of loaded
    documents, edited copies and new documents; the excerpt keys are most of the keys)."""
    corpus = PlantedCorpus(41, words=(500, 700))
    loaded = [Document(f"a{i}", corpus.original()) for i in range(60)]
    texts = [" ".join(d.text.split()[100:400]) for d in loaded[:20]]
    texts += [corpus.edit(d.text, 3) for d in loaded[20:30]] + [
        corpus.original() for _ in range(10)
    ]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(loaded, bulk=True)
    batch = fingerprint_batch(texts)
    rows = np.arange(len(texts), dtype=np.int64)
    groups = key_groups(batch, rows, rows + 1000)

    def read(work: Callable[[Connection], Any]) -> Any:
        with engine.connect() as side_conn:
            return work(side_conn)

    with engine.connect() as conn, SideReader(read) as side:
        expected = find_keys(conn, schema, groups, 50)
        found = SideIndexedKeys(side).find(conn, schema, groups, 50, frozenset())
    assert len(groups[-1].uniques) > sum(len(g.uniques) for g in groups[:-1])  # excerpt keys
    assert sum(len(ids) for ids in found.ids) > 0
    for number in range(len(groups)):
        pairs = sorted(zip(found.keys[number].tolist(), found.ids[number].tolist(), strict=True))
        want = zip(expected.keys[number].tolist(), expected.ids[number].tolist(), strict=True)
        assert pairs == sorted(want), number


def test_settled_keys_follow_deletes_and_copies_that_take_a_deleted_place(
    engine: Engine, schema: str
) -> None:
    """A settled document's ``settled_keys`` row goes with it; its settled exact copy, first
    of the group from then on, gets one and is found by its keys."""
    corpus = PlantedCorpus(36)
    text_a, text_b = corpus.original(), corpus.original()
    docs = [Document("a", text_a), Document("b", text_b), Document("a-copy", text_a)]
    docs += [Document(f"o{i}", corpus.original()) for i in range(20)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, bulk=True)
        assert store.delete(["a", "b"]) == 2
        assert [m.external_id for m in store.check(corpus.edit(text_a, 1)).matches] == ["a-copy"]
        assert store.check(corpus.edit(text_b, 1)).matches == []
    settled, firsts = _settled_and_first_ids(engine, schema)
    with engine.connect() as conn:
        copy_id = conn.execute(
            text(f"SELECT id FROM {qualified(schema, 'documents')} WHERE external_id = 'a-copy'")
        ).scalar_one()
    assert settled == firsts and copy_id in settled and len(settled) == 21


def _settled_and_first_ids(engine: Engine, schema: str) -> tuple[list[int], list[int]]:
    """The ids of ``settled_keys``, and of the first documents (not exact copies); checks that
    ``recent_keys`` holds the other first documents."""
    with engine.connect() as conn:
        settled, recent, firsts = (
            conn.execute(
                text(f"SELECT array_agg(id ORDER BY id) FROM {qualified(schema, t)}{w}")
            ).scalar_one()
            or []
            for t, w in (
                (ddl.TIER_TABLES[ddl.SETTLED], ""),
                (ddl.TIER_TABLES[ddl.RECENT], ""),
                ("documents", " WHERE exact_of IS NULL"),
            )
        )
    assert sorted(settled + recent) == firsts
    return settled, firsts


def test_summaries_met_once_are_answered_as_the_store_answers_them(
    engine: Engine, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest's side lookups remember the shingle counts and SimHashes they read; what
    they answer from memory is what the store holds, and ids past the limit are read again."""
    corpus = PlantedCorpus(5)
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document(f"d{i}", corpus.original()) for i in range(30)])
    ids = np.arange(1, 31, dtype=np.int64)
    monkeypatch.setattr(MetSummaries, "LIMIT", 21)  # ids 21 and up are never remembered
    with engine.connect() as conn, SideReader(lambda work: None) as side:
        expected = INDEXED.summaries(conn, schema, ids)
        keys = SideIndexedKeys(side)
        assert not keys.known_simhashes(ids)[0].any()
        first = keys.summaries(conn, schema, ids[::2])
        known, simhashes = keys.known_simhashes(ids)
        assert known.tolist() == [i % 2 == 1 and i < 21 for i in ids.tolist()]
        assert simhashes[known].view(np.int64).tolist() == expected[1][known].tolist()
        again = keys.summaries(conn, schema, ids)
    for half, full, whole in zip(first, again, expected, strict=True):
        assert half.tolist() == whole[::2].tolist()
        assert full.tolist() == whole.tolist()


def _recent_plan(engine: Engine, schema: str) -> str:
    probe = slot_lookup(
        qualified(schema), BAND, 1, any_of("SELECT CAST(:keys AS bigint[])"), (ddl.RECENT,)
    )
    with engine.connect() as conn:
        rows = conn.execute(text(f"EXPLAIN {probe}"), {"keys": "{1,2,3}"}).scalars()
        return "\n".join(rows)


def test_an_emptied_recent_tier_is_planned_through_its_indexes(engine: Engine, schema: str) -> None:
    """A bulk load and a settle leave the recent tier's table empty and without statistics,
    so a plan made then probes its indexes, as it must once the table grows; and autovacuum
    analyzes the table only once it holds thousands of rows. (The store's connections plan a
    statement once: planned from the statistics of an empty table, the recent tier's lookup
    scanned the whole table for each key of a batch until the next ANALYZE.)"""
    corpus = PlantedCorpus(37, words=(40, 60))
    first, later = _settled_and_recent(corpus)
    with DedupStore(engine, schema=schema) as store:
        store.ingest(first, bulk=True)
        plans = [_recent_plan(engine, schema)]
        store.add_many(later)
        store.settle()
        plans.append(_recent_plan(engine, schema))
    for plan in plans:
        assert "Seq Scan" not in plan and "Index Scan on recent_keys_band_1" in plan, plan
    with engine.connect() as conn:
        stored = conn.execute(
            text("SELECT reltuples, reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)"),
            {"t": qualified(schema, "recent_keys")},
        ).one()
    assert stored == (-1, [ddl.RECENT_STORAGE.replace(" ", "")])
