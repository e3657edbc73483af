"""DedupStore behaviour a caller relies on: statuses, matches, idempotent re-runs, reports."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from dedup_store import (
    AddResult,
    DedupStore,
    Document,
    FingerprintParams,
    Method,
    ParamsMismatchError,
    RecordError,
    Status,
    UnknownDocumentError,
)
from tests.probes import modules_loaded

NEWS = (
    "The national weather service warned on Monday that a strong storm system will bring "
    "heavy rain, flooding and high winds to the coastal regions through the weekend, and "
    "urged residents to prepare emergency kits and follow local evacuation orders."
)
REPOST = NEWS + " Officials expect power outages."
OTHER = (
    "A local bakery won the regional bread competition with a sourdough loaf that uses "
    "flour milled from heritage wheat grown on a family farm just outside the town."
)


def test_statuses_and_matches(store: DedupStore) -> None:
    first = store.add("news", NEWS, {"source": "wire"})
    assert first.status is Status.NEW and first.matches == []
    exact = store.add("copy", "<p>" + NEWS.upper() + "</p>")
    assert exact.status is Status.EXACT_DUPLICATE
    assert exact.matches[0].external_id == "news" and exact.matches[0].method is Method.EXACT
    near = store.add("repost", REPOST)
    assert near.status is Status.NEAR_DUPLICATE
    # the copy belongs to the exact group of "news": other documents match its first document
    assert [m.external_id for m in near.matches] == ["news"]
    assert all(0.0 < m.jaccard < 1.0 for m in near.matches)
    assert near.cluster_id == first.cluster_id == exact.cluster_id
    assert store.add("other", OTHER).status is Status.NEW


def test_check_gives_the_answer_add_would(store: DedupStore) -> None:
    store.add("news", NEWS)
    checked = store.check(REPOST)
    added = store.add("repost", REPOST)
    assert checked.status is added.status
    assert checked.matches == added.matches
    assert checked.cluster_id == added.cluster_id


def test_rerun_is_idempotent_and_update_replaces(store: DedupStore) -> None:
    records = [Document("news", NEWS), Document("other", OTHER)]
    assert [r.status for r in store.add_many(records)] == [Status.NEW, Status.NEW]
    again = store.add_many(records)
    assert [r.status for r in again] == [Status.SKIPPED, Status.SKIPPED]
    assert store.stats().documents == 2
    updated = store.add_many([Document("other", REPOST)], update=True)
    assert updated[0].status is Status.UPDATED
    assert [m.external_id for m in updated[0].matches] == ["news"]
    assert store.stats().documents == 2
    assert store.cluster("other").members == ["news", "other"]


def test_ids_repeated_in_one_batch_keep_the_first(store: DedupStore) -> None:
    results = store.add_many([("x", NEWS), ("x", OTHER)])
    assert [r.status for r in results] == [Status.NEW, Status.SKIPPED]
    assert results[1].cluster_id == results[0].cluster_id
    assert store.stats().documents == 1


def test_a_batchs_results_read_as_a_list_and_count_as_one(store: DedupStore) -> None:
    stored_cluster = store.add("stored", OTHER).cluster_id
    records = [
        Document("news", NEWS),
        Document("stored", OTHER),  # known: skipped
        Document("copy", NEWS.upper()),
        Document("bad", "\x00"),  # a bad record: reported apart
        Document("repost", REPOST),
        Document("news", OTHER),  # repeated in the batch: skipped
        Document("alone", "completely unrelated words about gardening tools"),
    ]
    batches: list[Sequence[AddResult]] = []

    def on_batch(results: Sequence[AddResult], _bad: list[RecordError]) -> None:
        batches.append(results)

    first_summary = store.ingest(records, on_error="skip", on_batch=on_batch)
    summary = store.ingest(
        [*records, Document("later", REPOST)], on_error="skip", on_batch=on_batch
    )
    first, again = batches
    assert [(r.external_id, r.status) for r in first] == [
        ("news", Status.NEW),
        ("stored", Status.SKIPPED),
        ("copy", Status.EXACT_DUPLICATE),
        ("repost", Status.NEAR_DUPLICATE),
        ("news", Status.SKIPPED),
        ("alone", Status.NEW),
    ]
    assert first[0].cluster_id == first[2].cluster_id == first[3].cluster_id == first[4].cluster_id
    assert first[1].cluster_id == again[1].cluster_id == stored_cluster != first[0].cluster_id
    assert [r.status for r in again] == [Status.SKIPPED] * 6 + [Status.EXACT_DUPLICATE]
    assert again[-1] == again[6] and again[2:4] == list(again)[2:4]
    assert again == list(again) and list(again) == again
    assert [r.external_id for r in again[::3]] == ["news", "repost", "later"]
    with pytest.raises(IndexError):
        again[7]
    assert (first_summary.new, first_summary.skipped, first_summary.errors) == (2, 2, 1)
    assert (first_summary.exact_duplicates, first_summary.near_duplicates) == (1, 1)
    assert (summary.skipped, summary.exact_duplicates, summary.errors) == (6, 1, 1)


def test_reports(store: DedupStore) -> None:
    store.add_many([("news", NEWS), ("repost", REPOST), ("other", OTHER)])
    (cluster,) = list(store.clusters())
    assert cluster.members == ["news", "repost"] and cluster.representative == "news"
    assert [c.size for c in store.clusters(min_size=1)] == [2, 1]
    (pair,) = list(store.pairs())
    assert (pair.a, pair.b) == ("news", "repost")
    assert [m.external_id for m in store.similar("repost")] == ["news"]
    stats = store.stats()
    assert (stats.documents, stats.clusters, stats.duplicate_clusters, stats.edges) == (3, 2, 1, 1)
    exported = {row["id"]: row for row in store.export()}
    assert exported["repost"]["representative"] == "news"


def test_unknown_ids(store: DedupStore) -> None:
    store.add("news", NEWS)
    for call in (store.similar, store.cluster):
        with pytest.raises(UnknownDocumentError, match="nope"):
            call("nope")
    with pytest.raises(UnknownDocumentError, match="nope"):
        store.delete(["news", "nope"])
    assert store.stats().documents == 1


def test_params_mismatch_names_the_difference(engine: Engine, schema: str) -> None:
    DedupStore(engine, FingerprintParams(shingle_size=5), schema=schema).close()
    with pytest.raises(ParamsMismatchError, match=r"shingle_size: 5 != 3"):
        DedupStore(engine, FingerprintParams(shingle_size=3), schema=schema)
    with DedupStore(engine, schema=schema) as reopened:
        assert reopened.params.shingle_size == 5


def test_keep_text(engine: Engine, schema: str) -> None:
    from sqlalchemy import text

    with DedupStore(engine, schema=schema, keep_text=True) as store:
        store.add("news", NEWS)
    with engine.connect() as conn:
        body = conn.execute(text(f'SELECT body FROM "{schema}".documents')).scalar()
    assert body == NEWS


def test_reads_survive_a_dropped_connection(engine: Engine, database_url: str, schema: str) -> None:
    text_value = "Quarterly revenue rose eight percent as subscriptions grew in every region"
    with DedupStore(database_url, schema=schema) as store:
        store.add("a", text_value)
        pid = store._db.read(lambda c: c.execute(sa.text("SELECT pg_backend_pid()")).scalar())
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        # the pooled connection is dead; the read runs again on a new one
        assert store.check(text_value).status is Status.EXACT_DUPLICATE


def test_the_store_loads_the_ingest_pipeline_and_the_report_when_used() -> None:
    """A command that opens the store for a check does not load what it does not run."""
    unused = [
        "dedup_store.ingest.pipeline",
        "dedup_store.db.bulk",
        "dedup_store.ingest.workers",
        "dedup_store.review.report",
    ]
    assert modules_loaded("import dedup_store.service", unused) == []


def test_a_check_loads_no_write_of_documents_nor_the_embedded_server(
    engine: sa.Engine, schema: str
) -> None:
    """A store opened by URL for a check (a command line run per document) leaves out the
    writes of documents, an added document's preparation, the explanations and the embedded
    server; an add loads the write of one document."""
    single = "dedup_store.db.write.single"
    unused = [
        "dedup_store.db.write.batch",
        single,
        "dedup_store.ingest.prepared",
        "dedup_store.review.explanation",
        "dedup_store.db.server.embedded",
    ]
    url = engine.url.render_as_string(hide_password=False)
    with DedupStore(url, schema=schema) as store:
        store.add("a", NEWS)
    opened = (
        "from dedup_store.db.server.location import resolve_url\n"
        "from dedup_store import DedupStore\n"
        f"store = DedupStore(resolve_url({url!r}), schema={schema!r}, create=False)\n"
    )
    checked = opened + f"assert store.check({NEWS!r}).status.value == 'exact_duplicate'"
    assert modules_loaded(checked, unused) == []
    added = opened + f"store.add('b', {NEWS!r} + ' Again.')"
    assert modules_loaded(added, [single]) == [single]


def test_an_ingest_counts_the_clusters_as_stats_does(store: DedupStore) -> None:
    documents = [Document("a", NEWS), Document("b", NEWS + " Again."), Document("c", "other words")]
    summary = store.ingest(documents, count_clusters=True)
    assert summary.clusters == store.stats().clusters == 2
