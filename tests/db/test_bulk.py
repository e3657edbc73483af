"""Bulk loads: the same store as the incremental path, indexes rebuilt, all or nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from dedup_store import AddResult, DedupStore, Document, FingerprintParams
from dedup_store.core.keyindex import HashedKeys
from dedup_store.db.write import batch as batch_write
from dedup_store.errors import EmptyDocumentError
from dedup_store.ingest import pipeline
from dedup_store.ingest.inputs import read_inputs
from dedup_store.service import BULK_MINIMUM
from tests.conftest import drop_schema
from tests.db.corpus import PlantedCorpus
from tests.db.test_hot_keys import _edits
from tests.db.test_migrations import _diff as _migration_diff
from tests.snapshots import snapshot
from tests.spark.corpora import hot_tables, real_documents

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")


@pytest.fixture
def other_schema(engine: Engine) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(engine, name)


def _load(
    engine: Engine, schema: str, docs: list[Any], bulk: bool, params: FingerprintParams, **kw: Any
) -> list[AddResult]:
    results: list[AddResult] = []
    with DedupStore(engine, params, schema=schema) as store:
        summary = store.ingest(
            docs, bulk=bulk, on_batch=lambda done, _errors: results.extend(done), **kw
        )
    assert summary.bulk is bulk
    return results


def _tables(engine: Engine, schema: str) -> dict[str, Any]:
    """What a snapshot leaves out: hot keys, secondary keys, the indexes and constraints with
    their definitions (schema name removed) and the bound of their settled tier."""
    with engine.connect() as conn:
        indexes = conn.execute(
            text("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = :s ORDER BY 1"),
            {"s": schema},
        ).all()
        constraints = conn.execute(
            text(
                "SELECT conname, pg_get_constraintdef(oid), convalidated FROM pg_constraint "
                "WHERE connamespace = CAST(:s AS regnamespace) ORDER BY 1"
            ),
            {"s": schema},
        ).all()
        settled = conn.execute(text(f'SELECT settled_through FROM "{schema}".key_tiers')).all()
    return {
        **hot_tables(engine, schema),
        "indexes": [(name, d.replace(schema, "S")) for name, d in indexes],
        "constraints": [(name, d.replace(schema, "S"), valid) for name, d, valid in constraints],
        "settled_through": settled,
    }


def _assert_same(engine: Engine, incremental: str, bulk: str) -> dict[str, Any]:
    """The incremental store holds what the bulk store holds, and once both are settled (as
    a bulk load leaves a store) the same indexes."""
    expected, actual = snapshot(engine, incremental), snapshot(engine, bulk)
    for part in ("documents", "sample_keys", "edges", "clusters"):
        assert actual[part] == expected[part], part
    assert actual["labels_are_members"]
    for name in (incremental, bulk):
        with DedupStore(engine, schema=name) as store:
            store.settle()
    assert _tables(engine, bulk) == _tables(engine, incremental)
    return actual


def _hot_documents() -> list[Document]:
    """120 edits of one text (hot band and block keys at a limit of 5) among 60 others."""
    docs = [Document(f"e{i}", t) for i, t in enumerate(_edits(11, 120))]
    corpus = PlantedCorpus(12)
    docs += [Document(f"d{i}", corpus.original()) for i in range(60)]
    docs += corpus.families(20, prefix="f")
    return corpus.shuffled(docs)


@pytest.mark.parametrize(
    ("corpus", "params", "batch_size", "workers"),
    [
        ("examples", FingerprintParams(), 7, 0),
        ("real", FingerprintParams(), 500, 0),
        ("real", FingerprintParams(), 500, 2),
        ("hot", FingerprintParams(hot_key_limit=5), 16, 0),
        ("hot", FingerprintParams(hot_key_limit=5), 16, 1),
        ("hot", FingerprintParams(hot_key_limit=0), 16, 0),
    ],
)
def test_a_bulk_load_stores_what_the_incremental_path_stores(
    engine: Engine,
    schema: str,
    other_schema: str,
    corpus: str,
    params: FingerprintParams,
    batch_size: int,
    workers: int,
) -> None:
    """Also with the batches fingerprinted in worker processes (the bulk load only)."""
    docs: list[Any] = {
        "examples": lambda: list(read_inputs([EXAMPLES])),
        "real": real_documents,
        "hot": _hot_documents,
    }[corpus]()
    kw = {"batch_size": batch_size, "on_error": "skip"}
    one_by_one = _load(engine, schema, docs, False, params, **kw)
    in_bulk = _load(engine, other_schema, docs, True, params, workers=workers, **kw)
    assert in_bulk == one_by_one
    stored = _assert_same(engine, schema, other_schema)
    assert len(stored["edges"]) > 10
    if params.hot_key_limit:
        assert _tables(engine, other_schema)["secondary"] or corpus != "hot"


def test_edges_keep_their_foreign_keys_through_a_bulk_load(engine: Engine, schema: str) -> None:
    """A bulk load writes its edges without the foreign keys to ``documents`` and adds them
    back at the end: they are the models' again, and an edge to no document is refused."""
    docs: list[Any] = real_documents()[:600]
    _load(engine, schema, docs, True, FingerprintParams(), batch_size=200)
    # the per-slot key tables and indexes follow the parameters, not the models
    assert [d for d in _migration_diff(engine, schema) if d[0] in ("add_fk", "remove_fk")] == []
    constraints = {name: valid for name, _, valid in _tables(engine, schema)["constraints"]}
    assert constraints["edges_a_fkey"] and constraints["edges_b_fkey"]
    with engine.connect() as conn:
        assert conn.execute(text(f'SELECT count(*) FROM "{schema}".edges')).scalar_one() > 10
        with pytest.raises(IntegrityError, match="edges_b_fkey"):
            conn.execute(
                text(
                    f'INSERT INTO "{schema}".edges (a, b, method, jaccard, containment, hamming) '
                    f"VALUES (1, 1000000, 'exact', 1, 1, 0)"
                )
            )


def test_a_forked_child_loads_in_bulk_after_its_parent_did(
    engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    """A process forked after a bulk load (a prefork server, a job queue's workers) starts its
    own indexing threads: its own bulk load stores what the parent's did."""
    docs: list[Any] = real_documents()[:300]
    _load(engine, schema, docs, True, FingerprintParams(), batch_size=100)
    pid = os.fork()
    if pid == 0:  # the child: exit 0 once its load is stored
        code = 1
        try:
            with DedupStore(database_url, schema=other_schema) as store:
                code = 0 if store.ingest(docs, bulk=True, batch_size=100).bulk else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's bulk load did not finish")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    expected, actual = snapshot(engine, schema), snapshot(engine, other_schema)
    for part in ("documents", "sample_keys", "edges", "clusters"):
        assert actual[part] == expected[part], part


def test_worker_processes_change_nothing_in_an_incremental_ingest(
    engine: Engine, schema: str, other_schema: str
) -> None:
    docs: list[Any] = _hot_documents()
    params = FingerprintParams(hot_key_limit=5)
    changed = [Document(d.id, d.text + " an added closing sentence") for d in docs[:30]]
    answers = []
    for name, workers in ((schema, 0), (other_schema, 2)):
        results = _load(engine, name, docs, False, params, batch_size=16, workers=workers)
        results += _load(
            engine, name, changed, False, params, batch_size=16, workers=workers, update=True
        )
        answers.append(results)
    assert answers[0] == answers[1]
    _assert_same(engine, schema, other_schema)


def test_a_bulk_load_into_a_stored_corpus_meets_the_stored_documents(
    engine: Engine, schema: str, other_schema: str
) -> None:
    docs: list[Any] = _hot_documents()
    params = FingerprintParams(hot_key_limit=5)
    head, tail = docs[:70], docs[70:]
    for name, bulk in ((schema, False), (other_schema, True)):
        _load(engine, name, head, False, params, batch_size=16)
        _load(engine, name, tail + head[:5], bulk, params, batch_size=16)
    _assert_same(engine, schema, other_schema)
    with DedupStore(engine, schema=other_schema) as store:
        assert store.check(docs[3].text).matches


def test_ingest_chooses_a_bulk_load_for_a_load_large_against_the_store(
    engine: Engine, schema: str, other_schema: str
) -> None:
    corpus = PlantedCorpus(3)
    docs = [Document(f"d{i}", corpus.original()) for i in range(BULK_MINIMUM + 10)]
    with DedupStore(engine, schema=schema) as store:
        assert store.ingest(iter(docs[:5])).bulk  # empty store, size unknown
        assert not store.ingest(docs[5:10]).bulk  # a few documents
        assert not store.ingest(docs[:10], update=True).bulk
        assert store.ingest(docs[10:]).bulk  # BULK_MINIMUM, and four times the store
        assert not store.ingest(iter(docs[:3])).bulk  # size unknown, store not empty
        assert store.stats().documents == BULK_MINIMUM + 10
    with DedupStore(engine, schema=other_schema) as store:
        # an empty store, but rebuilding its indexes costs more than a few documents save
        assert not store.ingest(docs[: BULK_MINIMUM - 1]).bulk


@pytest.mark.parametrize("workers", [0, 1])
def test_a_bad_record_stops_a_bulk_load_after_committing_the_batches_before_it(
    engine: Engine, schema: str, other_schema: str, workers: int
) -> None:
    corpus = PlantedCorpus(4)
    docs = [Document(f"d{i}", corpus.original()) for i in range(30)]
    docs.insert(25, Document("bad", "... !!! ...", source="dump.jsonl", line=26))
    for name, bulk in ((schema, False), (other_schema, True)):
        with (
            DedupStore(engine, schema=name) as store,
            pytest.raises(EmptyDocumentError, match=r"dump\.jsonl.*26"),
        ):
            store.ingest(docs, batch_size=10, bulk=bulk, workers=workers)
    _assert_same(engine, schema, other_schema)
    with DedupStore(engine, schema=other_schema) as store:
        assert store.stats().documents == 20
        assert store.check(docs[4].text).matches[0].external_id == "d4"


def test_a_failed_insert_into_the_in_memory_index_stops_the_load_and_stores_nothing(
    engine: Engine, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs: list[Any] = real_documents()[:900]
    _load(engine, schema, docs[:100], False, FingerprintParams(), batch_size=100)
    before = _tables(engine, schema)
    added = HashedKeys.add
    calls = 0

    def add_then_fail(index: HashedKeys, group: Any, keys: Any, ids: Any) -> None:
        nonlocal calls
        calls += 1
        if calls > 24 * 4:  # the stored documents' keys and some batches' go in first
            raise MemoryError("no room for the key table")
        added(index, group, keys, ids)

    monkeypatch.setattr(HashedKeys, "add", add_then_fail)
    with DedupStore(engine, schema=schema) as store, pytest.raises(MemoryError, match="no room"):
        store.ingest(docs[100:], batch_size=100, bulk=True)
    assert calls > 24 * 4
    monkeypatch.undo()
    assert _tables(engine, schema) == before
    with DedupStore(engine, schema=schema) as store:
        assert store.stats().documents == 100
        assert store.ingest(docs, batch_size=100, bulk=True).skipped == 100
        assert store.stats().documents == len(docs)


def test_a_batch_failing_on_the_server_with_batches_queued_behind_it_stores_nothing(
    engine: Engine, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches are staged while the ones before them are written (up to
    :data:`WRITTEN_AHEAD` queued): a failure in writing one is the error raised, and the load
    stores nothing."""
    docs: list[Any] = real_documents()[:1500]
    _load(engine, schema, docs[:100], False, FingerprintParams(), batch_size=100)
    before = _tables(engine, schema)
    merged, staged = batch_write.merge_clusters, pipeline.stage_batch
    merges = stages = 0

    def merge_then_fail(*args: Any, **kwargs: Any) -> dict[int, int]:
        nonlocal merges
        merges += 1
        if merges == 3:
            raise RuntimeError("the third batch's merge failed")
        return merged(*args, **kwargs)

    def stage(*args: Any, **kwargs: Any) -> Any:
        nonlocal stages
        stages += 1
        return staged(*args, **kwargs)

    monkeypatch.setattr(batch_write, "merge_clusters", merge_then_fail)
    monkeypatch.setattr(pipeline, "stage_batch", stage)
    with (
        DedupStore(engine, schema=schema) as store,
        pytest.raises(RuntimeError, match="third batch"),
    ):
        store.ingest(docs[100:], batch_size=100, bulk=True)
    assert stages > 3  # batches were staged behind the one that failed
    monkeypatch.undo()
    assert _tables(engine, schema) == before
    with DedupStore(engine, schema=schema) as store:
        assert store.stats().documents == 100


KILLED_LOAD = textwrap.dedent(
    """
    import os, signal, sys
    from dedup_store import DedupStore
    from tests.spark.corpora import real_documents

    url, schema, after = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def progress(fingerprinted, stored):
        if stored >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    with DedupStore(url, schema=schema) as store:
        store.ingest(real_documents(), batch_size=300, on_error="skip", bulk=True,
                     on_progress=progress)
    """
)


def test_a_killed_bulk_load_leaves_the_store_as_it_was_and_a_rerun_completes_it(
    engine: Engine, database_url: str, schema: str, other_schema: str
) -> None:
    docs: list[Any] = real_documents()
    head = docs[:400]
    for name in (schema, other_schema):
        _load(engine, name, head, False, FingerprintParams(), batch_size=300)
    before = _tables(engine, schema)
    root = Path(__file__).resolve().parents[2]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_LOAD, database_url, schema, "1500"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert _tables(engine, schema) == before  # the indexes dropped by the load are back
    with DedupStore(engine, schema=schema) as store:
        assert store.stats().documents == len(head)
        assert store.check(head[0][1]).matches
        summary = store.ingest(docs, batch_size=300, on_error="skip", bulk=True)
    assert summary.skipped == len(head)
    _load(engine, other_schema, docs, True, FingerprintParams(), batch_size=300, on_error="skip")
    # the killed load drew ids from the store's sequence: compare by external id
    assert _by_external_id(engine, schema) == _by_external_id(engine, other_schema)


def _by_external_id(engine: Engine, schema: str) -> dict[str, Any]:
    s = f'"{schema}"'
    with engine.connect() as conn:
        edges = conn.execute(
            text(
                f"SELECT x.external_id, y.external_id, e.method, e.jaccard, e.hamming "
                f"FROM {s}.edges e JOIN {s}.documents x ON x.id = e.a "
                f"JOIN {s}.documents y ON y.id = e.b ORDER BY 1, 2"
            )
        ).all()
        documents = conn.execute(
            text(f"SELECT external_id, simhash, exact_of IS NULL FROM {s}.documents ORDER BY 1")
        ).all()
    return {
        "edges": [tuple(r) for r in edges],
        "documents": [tuple(r) for r in documents],
        "clusters": snapshot(engine, schema)["clusters"],
    }


def _visible_pages(engine: Engine, schema: str, table: str) -> tuple[int, int]:
    """``(pages, all-visible pages)`` of ``table`` as ANALYZE counts them."""
    with engine.begin() as conn:
        conn.execute(text(f'ANALYZE "{schema}".{table}'))
        row = conn.execute(
            text("SELECT relpages, relallvisible FROM pg_class WHERE oid = CAST(:t AS regclass)"),
            {"t": f'"{schema}".{table}'},
        ).one()
    return int(row[0]), int(row[1])


def test_a_bulk_load_into_an_empty_store_leaves_no_work_for_vacuum(
    engine: Engine, schema: str, other_schema: str
) -> None:
    """Its rows are written frozen, their pages all-visible, as a VACUUM would leave them
    after reading them all; the store is the one the incremental path makes."""
    corpus = PlantedCorpus(5)
    docs = [Document(f"d{i}", corpus.original()) for i in range(BULK_MINIMUM * 2)]
    params = FingerprintParams()
    _load(engine, schema, docs, False, params)
    _load(engine, other_schema, docs, True, params)
    _assert_same(engine, schema, other_schema)
    for table in ("documents", "sample_keys"):
        pages, visible = _visible_pages(engine, other_schema, table)
        assert pages > 1 and visible == pages
