"""Our side of :mod:`benchmarks.ingest`: the timed ``DedupStore.ingest`` and ``check`` calls,
and the SQL that measures the store (storage, statistics, ``CHECKPOINT``, autovacuum).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from benchmarks.ingest_corpus import GeneratedFile, IngestCorpus, read_documents
from dedup_store import (
    AddResult,
    DedupStore,
    Document,
    IngestSummary,
    RecordError,
    Status,
)
from dedup_store.db.schema.names import quote
from dedup_store.ingest import pipeline

TABLES = ("documents", "slot_keys", "sample_keys", "edges")
WARM_UP = 50
BEFORE_ANALYZE = 200
SLICES = 10


@dataclasses.dataclass
class IngestRun:
    """One timed ``DedupStore.ingest`` call.

    Attributes:
        seconds: wall time of the call.
        summary: what the store reported.
        marks: ``(documents done, seconds since the start)`` after every batch.
    """

    seconds: float
    summary: IngestSummary
    marks: list[tuple[int, float]]

    def time_at(self, documents: int) -> tuple[int, float]:
        """The first batch mark at or after ``documents`` documents."""
        return next(m for m in self.marks if m[0] >= documents)

    def slices(self, parts: int = SLICES) -> list[tuple[int, int, float]]:
        """``(first document, documents, seconds)`` of each slice, cut at batch boundaries."""
        total = self.marks[-1][0]
        rows: list[tuple[int, int, float]] = []
        done, at = 0, 0.0
        for k in range(1, parts + 1):
            mark = self.time_at(-(-total * k // parts))
            if mark[0] > done:
                rows.append((done, mark[0] - done, mark[1] - at))
                done, at = mark
        return rows


def ingest(
    store: DedupStore,
    path: Path,
    batch_size: int,
    span: tuple[int, int],
    bulk: bool | None,
    workers: int = 0,
) -> IngestRun:
    """Ingest ``span`` = ``(first, count)`` documents of the file, timing the call and each
    batch (``bulk`` and ``workers``: as :meth:`DedupStore.ingest`)."""
    marks: list[tuple[int, float]] = []
    count = 0

    def on_batch(results: Sequence[AddResult], errors: list[RecordError]) -> None:
        nonlocal count
        count += len(results) + len(errors)
        marks.append((count, time.perf_counter() - started))

    first, limit = span
    documents = read_documents(path, limit, first)
    # the lines before ``first`` are skipped here, before the clock starts
    head = list(itertools.islice(documents, 1))
    records = (Document(i, text) for i, text in itertools.chain(head, documents))
    started = time.perf_counter()
    summary = store.ingest(
        records, batch_size=batch_size, on_batch=on_batch, bulk=bulk, workers=workers
    )
    seconds = time.perf_counter() - started
    marks.append((count, seconds))
    summary.clusters = store.stats().clusters  # not timed: a whole-store aggregate
    return IngestRun(seconds, summary, marks)


def profiled_ingest(
    store: DedupStore,
    path: Path,
    batch_size: int,
    span: tuple[int, int],
    bulk: bool | None,
    lines: int,
    workers: int = 0,
) -> IngestRun:
    """:func:`ingest` under pyinstrument, printing the call trees of both threads.

    ``DedupStore.ingest`` fingerprints on the calling thread while a writer thread runs the SQL
    of the previous batch (in a bulk load, the calling thread stages each batch while the
    connection's lane thread writes the one before); the writer is profiled by wrapping the
    pipeline's per-batch write.
    """
    from pyinstrument import Profiler

    main, writer = (Profiler(interval=0.005, async_mode="disabled") for _ in range(2))
    originals = {name: getattr(pipeline, name) for name in ("write_batch", "commit_batch")}

    def profiled(name: str) -> Any:
        original = originals[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            if writer.is_running:  # commit_batch inside write_batch
                return original(*args, **kwargs)
            writer.start()
            try:
                return original(*args, **kwargs)
            finally:
                writer.stop()

        return call

    # the writer thread's per-batch call (a bulk load's lane thread runs commit_batch)
    for name in originals:
        setattr(pipeline, name, profiled(name))
    main.start()
    try:
        run = ingest(store, path, batch_size, span, bulk, workers)
    finally:
        main.stop()
        for name, original in originals.items():
            setattr(pipeline, name, original)
    for title, profiler in (("calling thread", main), ("writer thread", writer)):
        print(f"\n== profile: {title} (pyinstrument, seconds) ==")
        tree = profiler.output_text(unicode=True, color=False, short_mode=True)
        print("\n".join(tree.splitlines()[:lines]))
    return run


@dataclasses.dataclass
class CheckRun:
    """Latencies (ms) of ``check`` calls and what they found."""

    latencies: list[float]
    found_near: int
    near_queries: int
    found_new: int
    new_queries: int


def check_queries(
    corpus: IngestCorpus, generated: GeneratedFile, positions: list[int], count: int
) -> list[tuple[str, bool]]:
    """``(text, is near-duplicate)``: half edited copies of stored documents, half new ones."""
    near = corpus.near_duplicate_texts([generated.kept[p] for p in positions])
    fresh = corpus.fresh_texts(count - len(near))
    queries = [(t, True) for t in near] + [(t, False) for t in fresh]
    order = np.random.default_rng(corpus.seed + 3).permutation(len(queries))
    return [queries[i] for i in order]


def run_checks(
    store: DedupStore, queries: Sequence[tuple[str, bool]], warm_up: Sequence[str]
) -> CheckRun:
    """Time one ``check`` per query."""
    for text in warm_up:
        store.check(text)
    latencies: list[float] = []
    found = {True: 0, False: 0}
    for text, is_near in queries:
        started = time.perf_counter()
        result = store.check(text)
        latencies.append((time.perf_counter() - started) * 1000)
        found[is_near] += result.status is not Status.NEW
    near = sum(1 for _, is_near in queries if is_near)
    return CheckRun(latencies, found[True], near, found[False], len(queries) - near)


def storage(engine: sa.Engine, schema: str) -> list[tuple[str, int, int]]:
    """``(table, bytes of heap and TOAST, bytes of indexes)`` of the fingerprint tables."""
    rows = []
    with engine.connect() as conn:
        for table in TABLES:
            name = f'"{schema}".{table}'
            total, indexes = conn.execute(
                sa.text(
                    "SELECT pg_total_relation_size(CAST(:t AS regclass)), "
                    "pg_indexes_size(CAST(:t AS regclass))"
                ),
                {"t": name},
            ).one()
            rows.append((table, int(total) - int(indexes), int(indexes)))
    return rows


def analyze(engine: sa.Engine, schema: str) -> float:
    """``ANALYZE`` the store's tables; returns the seconds it took."""
    started = time.perf_counter()
    with engine.begin() as conn:
        for table in TABLES:
            conn.execute(sa.text(f'ANALYZE "{schema}".{table}'))
    return time.perf_counter() - started


def server_setting(engine: sa.Engine, name: str) -> str:
    """A PostgreSQL setting, as ``SHOW`` prints it."""
    with engine.connect() as conn:
        return str(conn.execute(sa.text("SELECT current_setting(:n)"), {"n": name}).scalar_one())


def autovacuum_work(engine: sa.Engine) -> list[str]:
    """What the server's autovacuum workers are doing now (``VACUUM ANALYZE s.documents``...):
    a ``check`` phase that starts right after an ingest may share the cores with them."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT query FROM pg_stat_activity "
                "WHERE backend_type = 'autovacuum worker' AND query <> '' ORDER BY query"
            )
        ).scalars()
        return [str(q).removeprefix("autovacuum: ") for q in rows]


def analyzed(engine: sa.Engine, schema: str) -> bool:
    """Whether every fingerprint table has planner statistics (ANALYZE or autoanalyze ran)."""
    with engine.connect() as conn:
        missing = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = :s "
                "AND relname = ANY(:t) AND last_analyze IS NULL AND last_autoanalyze IS NULL"
            ),
            {"s": schema, "t": list(TABLES)},
        ).scalar_one()
    return int(missing) == 0


def last_id(engine: sa.Engine, schema: str) -> int:
    """The largest document id of the store (0: none)."""
    with engine.connect() as conn:
        found = conn.execute(sa.text(f"SELECT max(id) FROM {quote(schema)}.documents")).scalar()
    return int(found or 0)


def drop_schema(engine: sa.Engine, schema: str) -> None:
    """Drop the benchmark's schema and everything in it."""
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE"))


def checkpoint(engine: sa.Engine) -> None:
    """``CHECKPOINT``, so that a timed ingest does not write out the pages an earlier step
    (an earlier ingest, a dropped schema) left dirty: each starts from the same state."""
    with engine.begin() as conn:
        conn.execute(sa.text("CHECKPOINT"))


def check_phases(
    store: DedupStore,
    engine: sa.Engine,
    queries: Sequence[tuple[str, bool]],
    corpus: IngestCorpus,
    analyze_after: bool,
) -> tuple[list[tuple[str, CheckRun]], str]:
    """``check`` timed on the store as the ingest left it, then after ``ANALYZE`` if asked.

    Without autovacuum (or before it gets to the new tables) the planner has no statistics of
    the fingerprint tables; the first phase shows what ``check`` costs then, on at most
    ``BEFORE_ANALYZE`` queries.
    """
    had_stats = analyzed(engine, store.schema)
    notes = (
        f"server: autovacuum {server_setting(engine, 'autovacuum')}, "
        f"max_parallel_workers_per_gather "
        f"{server_setting(engine, 'max_parallel_workers_per_gather')}; tables "
        f"{'had' if had_stats else 'had no'} planner statistics after the ingest"
    )
    label = "as ingested" + ("" if had_stats else " (no statistics)")
    busy = [f"{label}: {', '.join(autovacuum_work(engine)) or 'none'}"]
    if not analyze_after:
        phases = [(label, run_checks(store, queries, corpus.fresh_texts(WARM_UP)))]
        return phases, f"{notes}\nautovacuum at work as the phase started: {busy[0]}"
    phases = [(label, run_checks(store, queries[:BEFORE_ANALYZE], corpus.fresh_texts(WARM_UP)))]
    seconds = analyze(engine, store.schema)
    notes += f"; ANALYZE of the store's tables took {seconds:.1f} s (not in the ingest time)"
    busy.append(f"after ANALYZE: {', '.join(autovacuum_work(engine)) or 'none'}")
    phases.append(("after ANALYZE", run_checks(store, queries, corpus.fresh_texts(WARM_UP))))
    return phases, f"{notes}\nautovacuum at work as each phase started: {'; '.join(busy)}"
