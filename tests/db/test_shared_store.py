"""One store shared by many threads (as the HTTP server shares it): concurrent adds and checks
give the store a serial run of the same adds, in their commit order, gives."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document
from dedup_store.db.schema.names import qualified

pytestmark = pytest.mark.db

THREADS = 8


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    """Debian's copyright files: many near duplicates of one another."""
    return [Document(d.id, d.text) for d in copyright_docs()][:320]


@pytest.fixture
def replay_schema(engine: Engine, schema: str) -> Iterator[str]:
    name = f"{schema}_serial"
    yield name
    with engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {qualified(name)} CASCADE"))


def test_threads_sharing_one_store_end_as_a_serial_run_in_commit_order(
    database_url: str, schema: str, replay_schema: str, engine: Engine, corpus: list[Document]
) -> None:
    errors: list[BaseException] = []
    statuses: dict[str, str] = {}
    with DedupStore(database_url, schema=schema, pool_size=THREADS) as store:
        start = threading.Barrier(THREADS)

        def work(share: list[Document]) -> None:
            start.wait()
            try:
                for doc in share:
                    store.check(doc.text)
                    statuses[doc.id] = store.add(doc.id, doc.text).status.value
            except BaseException as e:
                errors.append(e)

        threads = [
            threading.Thread(target=work, args=(corpus[k::THREADS],)) for k in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        shared = {frozenset(c.members) for c in store.clusters()}
        pairs = {(p.a, p.b, p.method) for p in store.pairs()}
    with engine.connect() as conn:
        order = [
            row[0]
            for row in conn.execute(
                text(f"SELECT external_id FROM {qualified(schema, 'documents')} ORDER BY id")
            )
        ]
    assert sorted(order) == sorted(d.id for d in corpus)
    texts = {d.id: d.text for d in corpus}
    with DedupStore(database_url, schema=replay_schema) as serial:
        replayed = {i: serial.add(i, texts[i]).status.value for i in order}
        assert {frozenset(c.members) for c in serial.clusters()} == shared
        assert {(p.a, p.b, p.method) for p in serial.pairs()} == pairs
    assert replayed == statuses
