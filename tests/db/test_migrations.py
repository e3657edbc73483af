"""Migrations: empty -> head -> base -> head, and the migrated schema equals the models."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from dedup_store import DedupStore, Document, SchemaOutdatedError, StoreNotInitializedError
from dedup_store.core import FingerprintParams
from dedup_store.db import migrate
from dedup_store.db.schema.ddl import VIEWS, build_metadata
from dedup_store.db.schema.encoding import slot_salts
from tests.db.corpus import PlantedCorpus
from tests.snapshots import snapshot


def _tables(engine: Engine, schema: str) -> set[str]:
    return set(inspect(engine).get_table_names(schema=schema))


def _diff(engine: Engine, schema: str) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "include_schemas": True,
                "include_name": lambda name, type_, parent: type_ != "schema" or name == schema,
                "include_object": lambda obj, name, type_, reflected, compare_to: (
                    name != "alembic_version"
                ),
            },
        )
        return list(compare_metadata(context, build_metadata(schema)))


def test_upgrade_downgrade_upgrade(engine: Engine, schema: str) -> None:
    assert migrate.current(engine, schema) is None
    migrate.upgrade(engine, schema)
    assert migrate.current(engine, schema) == migrate.head()
    expected = {"params", "documents", "sample_keys", "edges", "hot_keys", "secondary_keys"}
    assert expected <= _tables(engine, schema)
    assert set(VIEWS) <= set(inspect(engine).get_view_names(schema=schema))

    migrate.downgrade(engine, schema, "base")
    assert _tables(engine, schema) == {"alembic_version"}
    assert inspect(engine).get_view_names(schema=schema) == []

    migrate.upgrade(engine, schema)
    assert migrate.current(engine, schema) == migrate.head()


def test_migrated_schema_equals_models(engine: Engine, schema: str) -> None:
    migrate.upgrade(engine, schema)
    assert _diff(engine, schema) == []


def test_the_head_is_alembics_head_and_the_scripts_are_one_line() -> None:
    # opening a store compares its revision with the newest script's number, not Alembic's
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert migrate.head() == script.get_current_head()
    chain = [revision.revision for revision in script.walk_revisions()]
    assert chain == [f"{n:04d}" for n in range(int(migrate.head()), 0, -1)]


def test_open_without_store_and_create_false(engine: Engine, schema: str) -> None:
    with pytest.raises(StoreNotInitializedError, match="dedup-store init"):
        DedupStore(engine, schema=schema, create=False)


def test_schema_behind_code_names_upgrade_command(engine: Engine, schema: str) -> None:
    DedupStore(engine, schema=schema).close()
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE \"{schema}\".alembic_version SET version_num = '0010'"))
    with pytest.raises(SchemaOutdatedError, match="dedup-store db upgrade"):
        DedupStore(engine, schema=schema)


def test_our_tables_stay_in_our_schema(engine: Engine, schema: str) -> None:
    before = set(inspect(engine).get_table_names(schema="public"))
    DedupStore(engine, schema=schema).close()
    assert set(inspect(engine).get_table_names(schema="public")) == before


def _key_index_names(engine: Engine, schema: str) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT indexname FROM pg_indexes WHERE schemaname = :s "
                "AND (indexname LIKE :p "
                "OR tablename IN ('settled_keys', 'recent_keys', 'slot_keys', 'recent_slot_keys'))"
            ),
            {"s": schema, "p": "documents\\_b%"},
        )
        return set(rows.scalars())


def test_store_keeps_its_band_and_block_keys_under_one_index_a_tier(
    engine: Engine, schema: str
) -> None:
    """One index per tier's table, whatever the parameters, and none on ``documents``."""
    DedupStore(engine, FingerprintParams(num_perm=128), schema=schema).close()
    assert _key_index_names(engine, schema) == {"slot_keys_lookup", "recent_slot_keys_lookup"}


def test_0001_store_upgrades_with_its_keys(engine: Engine, schema: str) -> None:
    base = "Quarterly revenue rose eight percent as subscriptions grew in every region we serve"
    docs = [(f"d{i}", f"{base} and item {i} of the annual report for the board") for i in range(5)]
    with DedupStore(engine, schema=schema) as store:
        store.add_many(docs)
        before = store.check(docs[0][1] + " today")
    migrate.downgrade(engine, schema, "0001")
    with engine.connect() as conn:
        band_rows = conn.execute(text(f'SELECT count(*) FROM "{schema}".band_keys')).scalar_one()
    assert band_rows == 5 * FingerprintParams().band_key_count
    assert _key_index_names(engine, schema) == set()

    migrate.upgrade(engine, schema)
    assert _diff(engine, schema) == []
    with DedupStore(engine, schema=schema) as store:
        after = store.check(docs[0][1] + " today")
    assert after.status == before.status
    assert [m.external_id for m in after.matches] == [m.external_id for m in before.matches]
    assert after.matches


def test_0002_store_upgrades_its_exact_copies(engine: Engine, schema: str) -> None:
    base = "Quarterly revenue rose eight percent as subscriptions grew in every region we serve"
    with DedupStore(engine, schema=schema) as store:
        store.add_many([("first", base), ("other", base + " and beyond the sea")])
    migrate.downgrade(engine, schema, "0002")
    with engine.begin() as conn:  # a 0002 store held copies with keys of their own
        conn.execute(
            text(
                f'INSERT INTO "{schema}".documents (id, external_id, exact_hash, simhash, '
                "signature, shingles, band_keys, block_keys, shingle_count, token_count, length, "
                "language, cluster_id) SELECT 10, 'copy', exact_hash, simhash, signature, "
                "shingles, band_keys, block_keys, shingle_count, token_count, length, language, "
                f"cluster_id FROM \"{schema}\".documents WHERE external_id = 'first'"
            )
        )
    migrate.upgrade(engine, schema)
    assert _diff(engine, schema) == []
    with engine.connect() as conn:
        marked = conn.execute(
            text(f'SELECT external_id, exact_of FROM "{schema}".documents ORDER BY id')
        ).all()
    assert [tuple(row) for row in marked] == [("first", None), ("other", None), ("copy", 1)]
    with DedupStore(engine, schema=schema) as store:
        assert _key_index_names(engine, schema)
        assert [m.external_id for m in store.check(base).matches][:1] == ["first"]


def test_0005_store_upgrades_its_edges_with_content_scores(engine: Engine, schema: str) -> None:
    base = "Quarterly revenue rose eight percent as subscriptions grew in every region we serve"
    with DedupStore(engine, schema=schema) as store:
        store.add_many([("first", base), ("copy", base)])
        expected = [(p.a, p.b, p.jaccard) for p in store.pairs()]
    assert expected
    migrate.downgrade(engine, schema, "0005")
    assert "excerpt" in {c["name"] for c in inspect(engine).get_columns("duplicate_pairs", schema)}
    migrate.upgrade(engine, schema)
    with DedupStore(engine, schema=schema) as store:
        pairs = list(store.pairs())
        assert [(p.a, p.b, p.jaccard) for p in pairs] == expected
        assert all(p.meta_score is None and p.score == p.jaccard for p in pairs)


@pytest.mark.parametrize("weights", ["count", "tfidf-length"])
def test_keys_leave_documents_and_come_back_unchanged(
    engine: Engine, schema: str, weights: str
) -> None:
    """Revision 0009 keeps the band and block keys in the tier tables only. Downgrading fills
    the arrays of ``documents`` from them (an exact copy's from its first document's row); a
    store upgraded from 0007, which has no tier tables, computes every row again from the
    stored signatures, SimHashes and shingle counts (the documents, of 118 to 221 shingles, are
    on both sides of ``simhash_key_max_shingles``), and gets the rows its writers wrote."""
    params = FingerprintParams(simhash_weights=weights, simhash_key_max_shingles=160)
    corpus = PlantedCorpus(41)
    texts = [corpus.original() for _ in range(30)]
    docs = [Document(f"d{i}", text) for i, text in enumerate(texts)]
    later = [Document(f"e{i}", corpus.edit(texts[i], 2)) for i in range(10)]
    later += [Document("copy", texts[3])]
    with DedupStore(engine, params, schema=schema) as store:
        store.ingest(docs, bulk=True)
        store.add_many(later)
    before = snapshot(engine, schema)
    firsts = [row[0] for row in before["documents"] if row[2] is None]
    assert [row[0] for row in before["keys"]] == firsts  # one row per first document
    assert len(firsts) < len(before["documents"])

    migrate.downgrade(engine, schema, "0008")
    with engine.connect() as conn:
        arrays = conn.execute(
            text(
                f'SELECT id, exact_of, band_keys, block_keys FROM "{schema}".documents ORDER BY id'
            )
        ).all()
    salts = slot_salts(params.band_key_count, params.block_key_count).tolist()
    rows = {row[0]: [k ^ s for k, s in zip(row[1], salts, strict=True)] for row in before["keys"]}
    width = params.band_key_count
    for doc_id, exact_of, bands, blocks in arrays:
        keys = rows[exact_of or doc_id]
        assert (bands, blocks) == (list(keys[:width]), list(keys[width:]))

    migrate.downgrade(engine, schema, "0007")  # no tier tables
    migrate.upgrade(engine, schema)
    assert _diff(engine, schema) == []
    DedupStore(engine, params, schema=schema).close()  # creates them
    assert snapshot(engine, schema) == before


def test_a_0013_store_moves_both_tiers_into_slot_keys_and_back(engine: Engine, schema: str) -> None:
    """Revision 0014 makes the rows of ``slot_keys`` and ``recent_slot_keys`` from the tier
    tables of a 0013 store, the settled and the recent one, and drops them with
    ``settled_filter``; downgrading makes the tier tables again. Both ways the store holds the
    same keys in the same tiers and answers the same checks."""
    corpus = PlantedCorpus(44, words=(40, 60))
    texts = [corpus.original() for _ in range(30)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document(f"d{i}", t) for i, t in enumerate(texts)], bulk=True)
        store.add_many([Document(f"e{i}", corpus.edit(texts[i], 2)) for i in range(8)])
        queries = [corpus.edit(texts[i], 1) for i in (0, 3, 9)]
        answers = [[m.external_id for m in store.check(q).matches] for q in queries]
    before = snapshot(engine, schema)
    migrate.downgrade(engine, schema, "0013")
    tables = _tables(engine, schema)
    assert {"settled_keys", "recent_keys", "key_tiers", "settled_filter"} <= tables
    assert not {"slot_keys", "recent_slot_keys"} & tables
    s = f'"{schema}"'
    with engine.connect() as conn:  # the documents added since the bulk load: the recent tier
        recent = conn.execute(text(f"SELECT array_agg(id ORDER BY id) FROM {s}.recent_keys"))
        assert min(recent.scalar_one()) > 30  # the first documents among the eight edits
    migrate.upgrade(engine, schema)
    assert _diff(engine, schema) == []
    gone = {"settled_keys", "recent_keys", "settled_filter"}
    assert not gone & _tables(engine, schema)
    assert snapshot(engine, schema) == before
    with engine.connect() as conn:
        settled = conn.execute(text(f"SELECT DISTINCT doc_id FROM {s}.slot_keys")).scalars()
        assert max(settled) == 30
    with DedupStore(engine, schema=schema) as store:
        assert [[m.external_id for m in store.check(q).matches] for q in queries] == answers
