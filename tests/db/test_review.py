"""A reviewer overrules the store, on real text: verdicts that split and join clusters and stay in
force through re-ingests, updates and concurrent writers; canonical documents; stricter clusters
without re-ingesting. Every expectation is the documented rule computed by brute force from the
stored edges and verdicts (:mod:`tests.db.verdict_model`)."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

import pytest
from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document
from dedup_store.core.clustering import UnionFind
from dedup_store.errors import InvalidParamsError, UnknownDocumentError
from dedup_store.results import Pair
from tests.db import verdict_model

pytestmark = pytest.mark.db

MERGING = verdict_model.MERGING


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    """Every package's copyright file (templated: clusters of packages from one source)."""
    return [Document(d.id, d.text) for d in copyright_docs()]


@pytest.fixture
def loaded(engine: Engine, schema: str, corpus: list[Document]) -> Iterator[DedupStore]:
    """The copyright files in a store that keeps their texts."""
    with DedupStore(engine, schema=schema, keep_text=True) as store:
        store.ingest(corpus, bulk=False)
        yield store


def expected_clusters(
    store: DedupStore, engine: Engine, min_similarity: float = 0.0
) -> set[frozenset[str]]:
    """The clusters the documented rule makes of the stored edges and verdicts
    (:mod:`tests.db.verdict_model`)."""
    return verdict_model.expected_clusters(store, engine, min_similarity)


def stored_clusters(store: DedupStore, **options: float) -> set[frozenset[str]]:
    return {frozenset(c.members) for c in store.clusters(2, **options)}


def _all_ids(store: DedupStore) -> list[str]:
    return [record["id"] for record in store.export()]


def bridge(pairs: Iterable[Pair], clusters: set[frozenset[str]]) -> Pair:
    """A near-duplicate edge whose removal splits its cluster (of three or more members if any;
    exact copies of one text are linked through the first of their group, not pairwise)."""
    merging = [p for p in pairs if p.method.value in MERGING]
    near = [p for p in merging if p.method.value != "exact"]
    for size in (3, 2):
        for cluster in sorted(clusters, key=lambda c: (-len(c), sorted(c))):
            if len(cluster) < size:
                continue
            inside = [p for p in merging if p.a in cluster]
            for candidate in (p for p in near if p.a in cluster):
                sets: UnionFind[str] = UnionFind(cluster)
                for p in inside:
                    if p is not candidate:
                        sets.union(p.a, p.b)
                if len(sets.groups()) > 1:
                    return candidate
    raise AssertionError("no cluster has a bridge")


def singletons(store: DedupStore, count: int) -> list[str]:
    clustered = {m for c in store.clusters(2) for m in c.members}
    alone = [i for i in _all_ids(store) if i not in clustered]
    return alone[:count]


def test_a_not_duplicate_verdict_splits_the_cluster_at_once(
    loaded: DedupStore, engine: Engine
) -> None:
    before = stored_clusters(loaded)
    assert before == expected_clusters(loaded, engine)
    edge = bridge(loaded.pairs(), before)
    review = loaded.review(edge.a, edge.b, "not_duplicate", note="templates", by="ana")
    assert (review.verdict.value, review.note, review.reviewer) == (
        "not_duplicate",
        "templates",
        "ana",
    )
    assert loaded.cluster(edge.a).cluster_id != loaded.cluster(edge.b).cluster_id
    after = stored_clusters(loaded)
    assert after == expected_clusters(loaded, engine) != before
    assert [p.verdict for p in loaded.pairs() if (p.a, p.b) == (edge.a, edge.b)] == [
        "not_duplicate"
    ]


def test_a_duplicate_verdict_joins_documents_the_fingerprints_did_not_match(
    loaded: DedupStore,
    engine: Engine,
) -> None:
    x, y = singletons(loaded, 2)
    loaded.review(x, y, "duplicate")
    assert set(loaded.cluster(x).members) == {x, y}
    assert stored_clusters(loaded) == expected_clusters(loaded, engine)
    assert loaded.clear_review(x, y)
    assert loaded.cluster(x).members == [x]
    assert not loaded.clear_review(x, y)
    assert stored_clusters(loaded) == expected_clusters(loaded, engine)


def test_clearing_a_veto_merges_again(loaded: DedupStore) -> None:
    before = stored_clusters(loaded)
    edge = bridge(loaded.pairs(), before)
    loaded.review(edge.a, edge.b, "not_duplicate")
    loaded.clear_review(edge.a, edge.b)
    assert stored_clusters(loaded) == before


def test_verdicts_survive_reingest_update_delete_and_add(
    loaded: DedupStore, engine: Engine, corpus: list[Document]
) -> None:
    edge = bridge(loaded.pairs(), stored_clusters(loaded))
    x, y = singletons(loaded, 2)
    loaded.review(edge.a, edge.b, "not_duplicate")
    loaded.review(x, y, "duplicate")
    texts = {d.id: d.text for d in corpus}
    documents = [Document(i, texts[i]) for i in (edge.a, edge.b, x, y)]

    loaded.ingest(documents)  # known ids: skipped
    assert stored_clusters(loaded) == expected_clusters(loaded, engine)
    loaded.ingest(documents, update=True)
    assert stored_clusters(loaded) == expected_clusters(loaded, engine)
    assert loaded.cluster(edge.a).cluster_id != loaded.cluster(edge.b).cluster_id
    loaded.delete([edge.b, y])
    loaded.add(edge.b, texts[edge.b])  # one document: the single-statement path
    loaded.add(y, texts[y])
    assert loaded.cluster(edge.a).cluster_id != loaded.cluster(edge.b).cluster_id
    assert set(loaded.cluster(y).members) >= {x, y}
    assert stored_clusters(loaded) == expected_clusters(loaded, engine)


@pytest.mark.parametrize("round_", range(3))
def test_verdicts_hold_with_two_concurrent_writers(
    engine: Engine, schema: str, corpus: list[Document], round_: int
) -> None:
    """Judged documents deleted, then written again by two writers at once: the clusters are
    the union-find's every time."""
    with DedupStore(engine, schema=schema) as store:
        store.ingest(corpus, bulk=False)
        clusters = stored_clusters(store)
        vetoed = bridge(store.pairs(), clusters)
        x, y = singletons(store, 2)
        store.review(vetoed.a, vetoed.b, "not_duplicate")
        store.review(x, y, "duplicate")
        gone = sorted({vetoed.a, vetoed.b, x, y} | set(max(clusters, key=len)))
        store.delete(gone)
        texts = {d.id: d.text for d in corpus}
        halves = [[Document(i, texts[i]) for i in gone[k::2]] for k in (0, 1)]
        barrier = threading.Barrier(2)
        failures: list[BaseException] = []

        def write(documents: list[Document]) -> None:
            try:
                with DedupStore(engine, schema=schema) as writer:
                    barrier.wait()
                    for start in range(0, len(documents), 2):
                        if (start // 2 + round_) % 2:
                            writer.ingest(documents[start : start + 2], batch_size=2)
                        else:
                            for document in documents[start : start + 2]:
                                writer.add(document.id, document.text)
            except BaseException as e:  # reported by the main thread
                failures.append(e)

        threads = [threading.Thread(target=write, args=(half,)) for half in halves]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures
        assert stored_clusters(store) == expected_clusters(store, engine)
        assert store.cluster(vetoed.a).cluster_id != store.cluster(vetoed.b).cluster_id
        assert store.cluster(x).cluster_id == store.cluster(y).cluster_id


def test_review_refuses_unknown_ids_and_a_document_with_itself(loaded: DedupStore) -> None:
    some = _all_ids(loaded)[0]
    with pytest.raises(UnknownDocumentError):
        loaded.review(some, "no-such-package", "duplicate")
    with pytest.raises(InvalidParamsError):  # a usage error, not a bad document
        loaded.review(some, some, "duplicate")
    with pytest.raises(ValueError):
        loaded.review(some, _all_ids(loaded)[1], "maybe")
    assert loaded.verdicts() == []


def test_pending_pairs_are_the_undecided_most_doubtful_first(loaded: DedupStore) -> None:
    every = list(loaded.pairs())
    near = [p for p in every if p.method.value != "exact"]
    decided = near[0]
    loaded.review(decided.a, decided.b, "duplicate")
    pending = list(loaded.pairs(pending=True))
    assert {(p.a, p.b) for p in pending} == {(p.a, p.b) for p in near} - {(decided.a, decided.b)}
    rank = {"containment": 0, "simhash": 1, "minhash": 2}
    threshold = loaded.params.threshold
    keys = [(rank[p.method.value], abs(p.score - threshold)) for p in pending]
    assert keys == sorted(keys)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_stricter_clusters_are_the_union_find_at_that_level(
    loaded: DedupStore, engine: Engine, schema: str, level: float
) -> None:
    edge = bridge(loaded.pairs(), stored_clusters(loaded))
    loaded.review(edge.a, edge.b, "not_duplicate")
    x, y = singletons(loaded, 2)
    loaded.review(x, y, "duplicate")
    strict = stored_clusters(loaded, min_similarity=level)
    assert strict == expected_clusters(loaded, engine, level)
    assert {p for p in loaded.pairs(min_similarity=level)} == {
        p for p in loaded.pairs() if p.score >= level
    }
    with engine.connect() as conn:  # the same clusters for a report written in SQL
        rows = conn.execute(text(f'SELECT external_id, cluster_id FROM "{schema}".clusters_at(:t)'),
                            {"t": level}).all()  # fmt: skip
    groups: dict[int, set[str]] = {}
    for external_id, label in rows:
        groups.setdefault(label, set()).add(external_id)
    assert {frozenset(g) for g in groups.values() if len(g) > 1} == strict
    for found in loaded.clusters(2, min_similarity=level):
        assert found.canonical in found.members


def test_canonical_rules_and_a_person_s_choice(engine: Engine, schema: str) -> None:
    base = " ".join(f"clause{i} of the licence text" for i in range(60))
    documents = [
        Document("short", base, {"views": 10, "published": "2024-03-01"}),
        Document("longest", base + " with a long closing paragraph", {"views": 5}),
        Document("popular", base + " again", {"views": 90, "published": "2023-01-01"}),
    ]
    with DedupStore(engine, schema=schema, canonical_rule="longest") as store:
        store.ingest(documents)
        assert len(store.cluster("short").members) == 3
        assert store.settings.canonical_rule == "longest"
        assert store.cluster("short").canonical == "longest"
        store.set_canonical_rule("oldest")
        assert store.cluster("popular").canonical == "short"
        store.set_canonical_rule("meta:views")
        assert store.cluster("short").canonical == "popular"
        store.set_canonical_rule("meta:views:min")
        assert store.cluster("short").canonical == "longest"
        store.set_canonical_rule("meta:published:min")  # missing values come last
        assert store.cluster("short").canonical == "popular"
        store.set_canonical("short", by="editor")
        assert [c.canonical for c in store.clusters()] == ["short"]
        store.set_canonical("longest")  # the latest choice wins
        assert store.cluster("popular").canonical == "longest"
        with pytest.raises(InvalidParamsError):
            store.set_canonical_rule("newest")
        with pytest.raises(UnknownDocumentError):
            store.set_canonical("nobody")
    with engine.connect() as conn:
        row = conn.execute(text(f'SELECT canonical, chosen FROM "{schema}".cluster_canonical '
                                f'WHERE canonical_doc_id = 2')).one()  # fmt: skip
    assert tuple(row) == ("longest", "declared")


def test_the_store_remembers_that_it_keeps_texts(engine: Engine, schema: str) -> None:
    with DedupStore(engine, schema=schema, keep_text=True) as store:
        store.add("a", "one text that the store keeps for its reviewers to read later")
    with DedupStore(engine, schema=schema) as store:
        assert store.keep_text and store.settings.keep_text
        store.add("b", "another text that the store keeps for its reviewers to read later")
        assert store.stats().to_dict()["settings"]["keep_text"] is True
    with engine.connect() as conn:
        bodies = conn.execute(text(f'SELECT count(body) FROM "{schema}".documents')).scalar()
    assert bodies == 2


def test_clusters_at_says_nothing_the_caller_did_not_ask_for(
    loaded: DedupStore, database_url: str
) -> None:
    """Called in a session with no temporary table yet, it printed ``NOTICE: schema "pg_temp"
    does not exist, skipping`` in psql."""
    import psycopg

    notices: list[str] = []
    conninfo = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo) as conn:
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
        rows = conn.execute(f'SELECT * FROM "{loaded.schema}".clusters_at(0.5)').fetchall()
    assert rows and notices == []
