"""A Spark load stores what the local ingest of the same input, in the same order, stores."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, FingerprintParams, Status
from dedup_store.cli import app
from dedup_store.errors import InvalidParamsError
from dedup_store.ingest.inputs import apply_error_policy, read_inputs
from dedup_store.results import Document
from dedup_store.spark import ingest as spark_ingest
from dedup_store.spark import ingest_dataframe, ingest_records, staging
from tests.conftest import drop_schema
from tests.db.test_review import bridge, expected_clusters, stored_clusters
from tests.db.verdict_model import choose_verdicts
from tests.snapshots import snapshot
from tests.spark.corpora import hot_documents, hot_tables, real_documents

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")


@pytest.fixture
def other_schema(engine: Engine) -> Iterator[str]:
    """A second fresh schema, dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(engine, name)


def assert_same_store(engine: Engine, local: str, spark: str) -> dict[str, Any]:
    expected, actual = snapshot(engine, local), snapshot(engine, spark)
    assert actual["documents"] == expected["documents"]
    assert actual["sample_keys"] == expected["sample_keys"]
    assert actual["edges"] == expected["edges"]
    assert actual["clusters"] == expected["clusters"]
    assert actual["labels_are_members"]
    assert hot_tables(engine, spark) == hot_tables(engine, local)
    return actual


def test_cli_examples(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    runner = CliRunner()
    local = runner.invoke(
        app, ["--db-url", database_url, "--schema", schema, "ingest", "-q", EXAMPLES]
    )
    assert local.exit_code == 0, local.output
    argv = [
        "--db-url",
        database_url,
        "--schema",
        other_schema,
        "ingest",
        "-q",
        "--json",
        "--engine",
        "spark",
        "--spark-master",
        "local[2]",
        EXAMPLES,
    ]
    loaded = runner.invoke(app, argv)
    assert loaded.exit_code == 0, loaded.output
    assert '"near_duplicates"' in loaded.output
    stored = assert_same_store(engine, schema, other_schema)
    assert len(stored["edges"]) > 0
    with DedupStore(engine, schema=other_schema) as store:
        assert store.stats().documents == len(stored["documents"])
        assert sum(len(c.members) for c in store.clusters()) > 0
        assert len(list(store.pairs())) == len(stored["edges"])
        first = next(store.clusters())
        assert first.members[0] in {m.external_id for m in store.similar(first.members[1])} | {
            first.members[1]
        }


def test_real_documents(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    docs = real_documents()
    assert len(docs) > 3000
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, batch_size=500, on_error="skip")
    result = ingest_records(
        docs,
        database_url,
        other_schema,
        spark=spark,
        batch_size=500,
        on_error="skip",
        driver_components=0,
    )
    stored = assert_same_store(engine, schema, other_schema)
    assert result.edges == len(stored["edges"]) > 500
    assert result.summary.documents == len(docs)
    with DedupStore(engine, schema=other_schema) as store:
        assert store.check(docs[0][1]).status is Status.EXACT_DUPLICATE
        assert result.summary.clusters == store.stats().clusters


def test_append_to_a_stored_corpus(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    docs = real_documents()[:2400]
    head, tail = docs[:1200], docs[1200:]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(head, batch_size=400)
        store.ingest(tail, batch_size=400)
    with DedupStore(engine, schema=other_schema) as store:
        store.ingest(head, batch_size=400)
    result = ingest_records(
        tail, database_url, other_schema, spark=spark, batch_size=400, driver_components=0
    )
    assert_same_store(engine, schema, other_schema)
    old_new = [e for e in snapshot(engine, other_schema)["edges"] if e[0] <= 1200 < e[1]]
    assert old_new
    again = ingest_records(tail[:50], database_url, other_schema, spark=spark)
    assert again.summary.skipped == 50
    assert result.summary.documents == len(tail)


def test_bad_and_empty_records(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    records = [
        Document("a", "the quick brown fox jumps over the lazy dog again and again"),
        Document("b", "!!! ..."),
        Document("c", "has a NUL \x00 inside"),
        Document("a", "a repeated id"),
        Document("d", "the quick brown fox jumps over the lazy dog again and again"),
    ]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(records, on_error="skip")
    result = ingest_records(records, database_url, other_schema, spark=spark, on_error="skip")
    assert_same_store(engine, schema, other_schema)
    assert [e.line for e in result.errors] == [2, 3]
    assert result.summary.exact_duplicates == 1 and result.summary.skipped == 1
    try:
        with pytest.raises(Exception, match="NUL"):
            ingest_records(records, database_url, f"{other_schema}_x", spark=spark)
    finally:
        drop_schema(engine, f"{other_schema}_x")


def test_dataframe_load(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    docs = list(apply_error_policy(read_inputs([EXAMPLES]), "stop"))
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, batch_size=1)  # one batch per document, as a DataFrame load pairs
    frame = spark.createDataFrame([(d.id, d.text) for d in docs], "id string, text string")
    ingest_dataframe(frame, database_url, other_schema)
    actual = snapshot(engine, other_schema)
    expected = snapshot(engine, schema)
    assert actual["edges"] == expected["edges"]
    assert actual["clusters"] == expected["clusters"]


def test_missing_pyspark_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import dedup_store\n"
        "try:\n    import dedup_store.spark\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "dedup-store[spark]" in out.stdout


def test_hot_keys_across_batches(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    def word(k: int) -> str:
        return "".join(chr(97 + (k // 26**p) % 26) for p in range(3)) + "q"

    base = " ".join(word(k) for k in range(120))
    docs = [(f"v{i:03d}", f"{base} z{word(i)} {word(i + 200) * (i % 3)}") for i in range(90)]
    docs += [(f"c{i:03d}", base) for i in range(3)]  # exact copies: linked to the first only
    params = FingerprintParams(hot_key_limit=5, max_excerpt_keys=8)
    with DedupStore(engine, params, schema=schema) as store:
        store.ingest(docs, batch_size=20)
    ingest_records(docs, database_url, other_schema, spark=spark, params=params, batch_size=20)
    stored = assert_same_store(engine, schema, other_schema)
    assert hot_tables(engine, other_schema) == hot_tables(engine, schema)
    assert hot_tables(engine, schema)["secondary"] and len(stored["edges"]) > 90


def test_a_failed_load_leaves_the_store_as_it_was(
    spark: Any, engine: Engine, database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = real_documents()[:600]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs[:200], batch_size=100)
    before = snapshot(engine, schema)
    with engine.begin() as conn:  # what a killed load leaves behind
        leftover = staging.Staging.create(conn, schema)

    def fail(*args: Any) -> dict[str, float]:
        raise RuntimeError("the server went away")

    monkeypatch.setattr(spark_ingest, "publish", fail)
    with pytest.raises(RuntimeError):
        ingest_records(docs, database_url, schema, spark=spark, batch_size=100)
    assert snapshot(engine, schema) == before
    with engine.connect() as conn:
        tables = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}
        ).scalars()
        assert not [t for t in tables if t.startswith(staging.PREFIX)]
    assert set(leftover.tables.values()).isdisjoint(tables)
    monkeypatch.undo()
    result = ingest_records(docs, database_url, schema, spark=spark, batch_size=100)
    assert result.summary.skipped == 200 and result.seconds["indexes"] > 0
    with DedupStore(engine, schema=schema) as store:
        assert store.stats().documents == len(docs)
        assert store.check(docs[450][1]).status is Status.EXACT_DUPLICATE


@pytest.mark.parametrize("stored", [0, 70])
def test_hot_buckets_are_rekeyed_as_the_local_ingest_does(
    spark: Any, engine: Engine, database_url: str, schema: str, other_schema: str, stored: int
) -> None:
    docs = hot_documents()
    params = FingerprintParams(hot_key_limit=5)
    head, tail = docs[:stored], docs[stored:] + docs[:5]
    for name in (schema, other_schema):
        with DedupStore(engine, params, schema=name) as store:
            store.ingest(head, batch_size=16)
    with DedupStore(engine, params, schema=schema) as store:
        store.ingest(tail, batch_size=16)
    ingest_records(tail, database_url, other_schema, spark=spark, params=params, batch_size=16)
    stored_rows = assert_same_store(engine, schema, other_schema)
    expected = hot_tables(engine, schema)
    assert hot_tables(engine, other_schema) == expected
    assert expected["hot"] and expected["secondary"] and len(stored_rows["edges"]) > 100


def test_a_store_with_weighted_simhash_features_is_refused(
    spark: Any, engine: Engine, database_url: str, schema: str
) -> None:
    weighted = FingerprintParams(simhash_weights="tfidf")
    records = [Document("a", "the quick brown fox jumps over the lazy dog again and again")]
    with pytest.raises(InvalidParamsError, match="simhash_weights tfidf "):
        ingest_records(records, database_url, schema, params=weighted, spark=spark)
    with DedupStore(engine, weighted, schema=schema) as store:
        assert store.stats().documents == 0  # refused before anything was read or written


def test_a_store_with_metadata_sets_is_refused(
    spark: Any, engine: Engine, database_url: str, schema: str
) -> None:
    with_meta = FingerprintParams(meta_fields=("tags",))
    records = [Document("a", "the quick brown fox jumps over the lazy dog", {"tags": ["x"]})]
    with pytest.raises(InvalidParamsError, match="meta_fields"):
        ingest_records(records, database_url, schema, params=with_meta, spark=spark)


def test_verdicts_hold_through_a_spark_load(
    spark: Any, engine: Engine, database_url: str, schema: str
) -> None:
    docs = real_documents()[:1200]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, batch_size=400)
        vetoed = bridge(store.pairs(), stored_clusters(store))
        store.review(vetoed.a, vetoed.b, "not_duplicate")
        store.delete([vetoed.b])
    again = [d for d in docs if d[0] == vetoed.b]
    ingest_records(again, database_url, schema, spark=spark)
    with DedupStore(engine, schema=schema) as store:
        assert store.cluster(vetoed.a).cluster_id != store.cluster(vetoed.b).cluster_id
        assert stored_clusters(store) == expected_clusters(store, engine)


def test_random_verdicts_on_copyright_files_hold_through_a_spark_load(
    spark: Any, engine: Engine, database_url: str, schema: str
) -> None:
    """50 pairs judged not duplicates (exact copies among them) and 20 judged duplicates; every
    document of a cluster they touch deleted and loaded again by Spark: the clusters are the
    documented rule's, and every vetoed pair is apart."""
    docs = [(d.id, d.text) for d in copyright_docs()]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, bulk=False)
        vetoed, confirmed = choose_verdicts(store, seed=7)
        for a, b in confirmed:
            store.review(a, b, "duplicate")
        for a, b in vetoed:
            store.review(a, b, "not_duplicate")
        named = {x for pair in vetoed + confirmed for x in pair}
        gone = {m for x in named for m in store.cluster(x).members}
        store.delete(sorted(gone))
    again = [d for d in docs if d[0] in gone]
    ingest_records(again, database_url, schema, spark=spark, driver_components=0)
    with DedupStore(engine, schema=schema) as store:
        assert all(store.cluster(a).cluster_id != store.cluster(b).cluster_id for a, b in vetoed)
        assert all(store.cluster(a).cluster_id == store.cluster(b).cluster_id for a, b in confirmed)
        assert stored_clusters(store) == expected_clusters(store, engine)
