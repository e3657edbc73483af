"""Several writer processes at once end with the clusters a one-by-one run gives.

Each writer process (``spawn``, its own :class:`DedupStore` on the database URL) adds a shuffled
share of a corpus of near-duplicate families, chains and bridges, in small batches; shares
overlap, so the same cluster is built from several processes and some ids are added twice. No
process may see an exception (serialization failures and deadlocks are retried inside the
store). The end state is compared with a separate store fed the same distinct documents one by
one, and with the connected components of its own edges.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
import uuid
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, Document, FingerprintParams, Status
from dedup_store.db import migrate
from tests.db.corpus import (
    PlantedCorpus,
    edge_partition,
    label_partition,
    stored_edges,
)
from tests.db.test_clusters import check_consistent

WRITERS = 4
BATCH_SIZES = (3, 5, 8, 13)
SHARED = 0.3  # share of documents given to two writers
TIMEOUT = 240.0
CREATE_ROUNDS = 4


def concurrent_corpus() -> list[Document]:
    """Families of near-duplicates, path-shaped chains and bridges, shuffled."""
    corpus = PlantedCorpus(seed=31, words=(150, 250))
    docs = corpus.families(50, close=3, far=1)
    for prefix in ("a", "b", "c"):
        docs += corpus.chain(8, prefix, window=200, step=25)
    for prefix in ("x", "y"):
        left, right = corpus.original(), corpus.original()
        docs += corpus.bridge(left, right, prefix)
        docs += [Document(f"{prefix}left{v}", corpus.edit(left, v)) for v in (1, 2)]
        docs += [Document(f"{prefix}right{v}", corpus.edit(right, v)) for v in (1, 2)]
    return corpus.shuffled(docs)


def shares(docs: list[Document], seed: int) -> list[list[tuple[str, str]]]:
    """One shuffled share per writer; every document goes to one writer, some to two."""
    rng = np.random.default_rng(seed)
    out: list[list[tuple[str, str]]] = [[] for _ in range(WRITERS)]
    for doc in docs:
        owners = rng.choice(WRITERS, size=2 if rng.random() < SHARED else 1, replace=False)
        for owner in owners.tolist():
            out[owner].append((doc.id, doc.text))
    for share in out:
        rng.shuffle(share)
    return out


def writer(
    url: str,
    schema: str,
    share: list[tuple[str, str]],
    batch_size: int,
    barrier: Barrier,
    results: Queue[Any],
) -> None:
    """Add ``share`` in batches once every writer is ready; report statuses or the traceback."""
    try:
        with DedupStore(url, schema=schema, create=False) as store:
            barrier.wait(timeout=TIMEOUT)
            started = time.time()
            statuses: list[tuple[str, str]] = []
            for start in range(0, len(share), batch_size):
                added = store.add_many(share[start : start + batch_size])
                statuses += [(r.external_id, r.status.value) for r in added]
        results.put(((started, time.time(), statuses), None))
    except BaseException:
        results.put((None, traceback.format_exc()))


def creator(url: str, schemas: list[str], name: str, barrier: Barrier, results: Queue[Any]) -> None:
    """Open (and so create) each store in ``schemas`` at the same moment as the other process."""
    try:
        for schema in schemas:
            barrier.wait(timeout=TIMEOUT)
            with DedupStore(url, schema=schema) as store:
                store.add(name, f"The {name} process created the store {schema} and wrote this.")
        results.put((None, None))
    except BaseException:
        results.put((None, traceback.format_exc()))


def run_processes(target: Any, args: list[tuple[Any, ...]]) -> list[Any]:
    """Start one spawned process per argument tuple (plus barrier and queue); their reports."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(args))
    results: Queue[Any] = context.Queue()
    processes = [context.Process(target=target, args=(*a, barrier, results)) for a in args]
    for process in processes:
        process.start()
    try:
        reports = [results.get(timeout=TIMEOUT) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=TIMEOUT)
    errors = [error for _, error in reports if error is not None]
    assert not errors, "\n".join(errors)
    assert [p.exitcode for p in processes] == [0] * len(processes)
    return [report for report, _ in reports]


@pytest.fixture
def reference_schema(engine: Engine) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


def edge_set(engine: Engine, schema: str) -> set[tuple[frozenset[bytes], str]]:
    """Stored edges between exact groups as ``({hash, hash}, method)``.

    Independent of who came first: exact copies are linked to whichever document of their
    group was stored first, and other documents' matches go to that one only.
    """
    with engine.connect() as conn:
        rows = conn.execute(text(f'SELECT id, exact_hash FROM "{schema}".documents'))
        group = {row[0]: bytes(row[1]) for row in rows}
        edges = stored_edges(conn, schema)
    return {
        (frozenset({group[a], group[b]}), e[0])
        for (a, b), e in edges.items()
        if group[a] != group[b]
    }


def test_concurrent_writers_build_the_sequential_clusters(
    database_url: str, engine: Engine, schema: str, reference_schema: str
) -> None:
    docs = concurrent_corpus()
    DedupStore(engine, FingerprintParams(), schema=schema).close()
    args = [
        (database_url, schema, share, BATCH_SIZES[i])
        for i, share in enumerate(shares(docs, seed=8))
    ]
    spans = run_processes(writer, args)
    assert max(s[0] for s in spans) < min(s[1] for s in spans), "the writers overlapped in time"
    reports = [s[2] for s in spans]

    written = [e for statuses in reports for e, s in statuses if s != Status.SKIPPED.value]
    assert sorted(written) == sorted(d.id for d in docs), "each id is written exactly once"
    twice = sum(len(statuses) for statuses in reports) - len(docs)
    assert twice >= len(docs) // 5

    with DedupStore(engine, FingerprintParams(), schema=reference_schema) as reference:
        for doc in docs:
            reference.add(doc.id, doc.text)
    expected = label_partition(engine, reference_schema)
    assert expected == edge_partition(engine, reference_schema)
    assert sum(len(group) > 2 for group in expected) >= 50

    with DedupStore(engine, schema=schema, create=False) as store:
        assert check_consistent(store, engine) == expected
    assert edge_set(engine, schema) == edge_set(engine, reference_schema)


def test_two_processes_create_the_same_store(database_url: str, engine: Engine) -> None:
    schemas = [f"t_{uuid.uuid4().hex[:12]}" for _ in range(CREATE_ROUNDS)]
    try:
        run_processes(creator, [(database_url, schemas, name) for name in ("one", "two")])
        for schema in schemas:
            assert migrate.current(engine, schema) == migrate.head()
            with DedupStore(engine, schema=schema, create=False) as store:
                assert store.params == FingerprintParams()
                assert store.stats().documents == 2
            with engine.connect() as conn:
                rows = conn.execute(text(f'SELECT count(*) FROM "{schema}".params')).scalar()
            assert rows == 1
    finally:
        with engine.begin() as conn:
            for schema in schemas:
                conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
