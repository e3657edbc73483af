"""Bulk and incremental ingest into PostgreSQL: throughput, ``check`` latency, storage, against
datasketch.

One run, on one seeded corpus (:mod:`benchmarks.ingest_corpus`) of ``--docs`` documents plus
``--append`` more:

1. The documents are generated into a temporary file before any timer starts (printed as
   ``generated before timing``); the timed ingests read that file line by line, as an ingest of
   a dump would (``reading the file alone``: a tenth of a second per 100k short documents).
2. **Load**: ``DedupStore.ingest`` of the first ``--docs`` documents into a fresh schema of the
   test database (default parameters, ``keep_text`` off). On an empty store this is a bulk load
   (``--no-bulk`` forces the incremental path): fingerprints, keys, edges, clusters, and the
   lookup indexes built, so ``check`` is ready when the call returns. The rate is documents
   over the wall time of that one call; each batch's completion is timestamped (``on_batch``)
   to give the rate of every 10 % slice.
3. **Append**: the next ``--append`` documents, incrementally (``bulk=False``), into that store
   (into the recent tier of its key indexes); after ``check``, ``DedupStore.settle`` moves them
   into the settled tier, timed.
4. ``check`` latency over ``--check-queries`` texts (half near-duplicates of documents at random
   positions of the store, half new documents), 50 untimed warm-up calls first, on the store as
   the ingests left it, then after ``ANALYZE`` (``--no-analyze`` skips this).
5. Storage: ``pg_total_relation_size`` (heap, TOAST, indexes) of the fingerprint tables divided
   by the number of documents (``documents.body`` is NULL: ``keep_text`` is off).
6. **Incremental baseline**: the first ``--incremental-docs`` documents (by default the load's
   own ``--docs``) into another fresh schema with ``bulk=False`` (one transaction per batch,
   indexes maintained per row): the rate the load is compared with, the same documents into an
   empty store by the other path; and the rate of its first ``--append`` documents, which the
   append is compared with (and, for reference, the load too: a small store's indexes are
   cheaper to maintain than a large one's, so that rate is higher than the whole run's).
7. Peers, on the first ``--peer-docs`` documents: datasketch ``MinHashLSH(threshold=0.8,
   num_perm=84)`` in memory (and with its Redis storage unless ``--no-redis``). End to end:
   shingling (lower-cased words split on white space, ``shingle_size``-word shingles as UTF-8
   bytes), ``MinHash.bulk`` (chunks of 5,000) and ``insert`` in an ``insertion_session``. Queries:
   shingling, ``MinHash.update_batch`` and ``query``.

The load and the baseline start after a ``CHECKPOINT``, so that neither writes out what an earlier
step left dirty; the append follows the load at once, as it would in use. ``--workers`` (default
1) is given to every ingest of the run, ours and the baseline's.

Run it as ``python -m benchmarks.ingest`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from benchmarks.ingest_corpus import GeneratedFile, IngestCorpus, read_documents
from benchmarks.ingest_neighbours import neighbours, print_neighbours, stored_simhashes
from dedup_store import (
    AddResult,
    DedupStore,
    Document,
    IngestSummary,
    RecordError,
    Status,
    pipeline,
)
from dedup_store.config import normalize_url
from dedup_store.core import FingerprintParams
from dedup_store.db.names import quote

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
TABLES = ("documents", "settled_keys", "recent_keys", "sample_keys", "edges")
WARM_UP = 50
BEFORE_ANALYZE = 200
PEER_CHUNK = 5000
SLICES = 10


# -- our store ----------------------------------------------------------------------------------


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


# -- datasketch ---------------------------------------------------------------------------------


@dataclasses.dataclass
class PeerRun:
    """Seconds spent by datasketch on ``documents`` inserts and ``queries`` queries."""

    documents: int
    prep_seconds: float = 0.0
    minhash_seconds: float = 0.0
    insert_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    queries: int = 0
    query_latencies: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def insert_rate(self, backend: str) -> float:
        """Documents per second end to end: shingling, MinHash computation and inserts."""
        seconds = self.prep_seconds + self.minhash_seconds + self.insert_seconds[backend]
        return self.documents / seconds

    def query_rate(self, backend: str) -> float:
        """Queries per second: shingling, MinHash computation and the LSH query."""
        return 1000 * self.queries / sum(self.query_latencies[backend])


def _shingles(texts: Sequence[str], size: int) -> list[list[bytes]]:
    """What a datasketch user feeds it: ``size``-word shingles of the lower-cased words."""
    shingles = []
    for text in texts:
        words = text.lower().split()
        count = max(1, len(words) - size + 1)
        shingles.append([" ".join(words[i : i + size]).encode("utf-8") for i in range(count)])
    return shingles


class _Clock(dict[str, float]):
    """Seconds accumulated per name."""

    def __missing__(self, key: str) -> float:
        return 0.0

    def add(self, key: str, started: float) -> float:
        """Add the time since ``started`` to ``key``; returns the current time."""
        now = time.perf_counter()
        self[key] += now - started
        return now


def _peer_indexes(redis_basename: bytes | None) -> dict[str, Any]:
    from datasketch import MinHashLSH

    indexes = {"memory": MinHashLSH(threshold=0.8, num_perm=84)}
    if redis_basename is not None:
        indexes["redis"] = MinHashLSH(
            threshold=0.8,
            num_perm=84,
            storage_config={
                "type": "redis",
                "basename": redis_basename,
                "redis": {"host": "127.0.0.1", "port": 6379},
            },
        )
    return indexes


def run_peers(
    path: Path,
    count: int,
    queries: Sequence[str],
    params: FingerprintParams,
    redis_basename: bytes | None,
) -> PeerRun:
    """Insert the first ``count`` documents into each datasketch index, then query them."""
    from datasketch import MinHash

    indexes = _peer_indexes(redis_basename)
    clock = _Clock()
    with ExitStack() as stack:
        sessions = {
            name: stack.enter_context(lsh.insertion_session()) for name, lsh in indexes.items()
        }
        for chunk in _chunks(read_documents(path, count), PEER_CHUNK):
            now = time.perf_counter()
            shingles = _shingles([text for _, text in chunk], params.shingle_size)
            now = clock.add("prep", now)
            minhashes = MinHash.bulk(shingles, num_perm=84)
            now = clock.add("minhash", now)
            for name, session in sessions.items():
                for (key, _), minhash in zip(chunk, minhashes, strict=True):
                    session.insert(key, minhash)
                now = clock.add(name, now)
        closing = time.perf_counter()
    if "redis" in indexes:
        clock.add("redis", closing)
    run = PeerRun(
        count,
        clock["prep"],
        clock["minhash"],
        {name: clock[name] for name in indexes},
        len(queries),
    )
    for name, lsh in indexes.items():
        run.query_latencies[name] = [_query_ms(lsh, q, params.shingle_size) for q in queries]
    return run


def _query_ms(lsh: Any, text: str, size: int) -> float:
    from datasketch import MinHash

    started = time.perf_counter()
    minhash = MinHash(num_perm=84)
    minhash.update_batch(_shingles([text], size)[0])
    lsh.query(minhash)
    return (time.perf_counter() - started) * 1000


def _chunks(items: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    chunk: list[tuple[str, str]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def clean_redis(basename: bytes) -> int:
    """Delete every Redis key of the benchmark's index; returns how many."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379)
    keys = list(client.scan_iter(match=basename + b"*", count=10_000))
    for start in range(0, len(keys), 10_000):
        client.delete(*keys[start : start + 10_000])
    return len(keys)


# -- output -------------------------------------------------------------------------------------


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes), as ``uptime`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values`` (NaN for none: ``--check-queries 0``)."""
    return float(np.percentile(np.asarray(values), q)) if len(values) else float("nan")


def ratio(ours: float, theirs: float) -> str:
    """``ours / theirs`` as ``12.3x`` (two decimals below 1)."""
    value = ours / theirs
    return f"{value:.1f}x" if value >= 1 else f"{value:.2f}x"


def revision() -> str:
    """The checked-out commit, and whether the package's files differ from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "dedup_store", "migrations")
    return commit + (" with uncommitted changes in dedup_store" if dirty else "")


def print_ingest(title: str, run: IngestRun, generated: GeneratedFile, read_seconds: float) -> None:
    """Throughput, slices and statuses of an ingest."""
    n, s = run.summary.documents, run.summary
    kind = f"bulk, index build {s.index_seconds:.1f} s" if s.bulk else "incremental"
    print(
        f"\n== {title} ({kind}): {n:,} documents in {run.seconds:.1f} s = "
        f"{n / run.seconds:,.0f} docs/s =="
    )
    print(
        f"statuses: new {s.new:,}, exact duplicates {s.exact_duplicates:,}, near duplicates "
        f"{s.near_duplicates:,}, errors {s.errors}; clusters in the store {s.clusters:,}"
    )
    print(
        f"generated before timing: {generated.seconds:.1f} s ({generated.bytes / 2**20:.0f} MiB, "
        f"{generated.near_duplicates:,} edited copies); reading the file alone: "
        f"{read_seconds:.2f} s"
    )
    print(f"{'slice':<8}{'documents':>22}{'seconds':>10}{'docs/s':>10}")
    for k, (first, count, seconds) in enumerate(run.slices()):
        label = f"{first:,}-{first + count:,}"
        print(f"{k + 1:<8}{label:>22}{seconds:>10.2f}{count / seconds:>10,.0f}")


def print_checks(runs: Sequence[tuple[str, CheckRun]], documents: int, notes: str) -> None:
    """``check`` latency percentiles, one row per phase."""
    print(
        f"\n== check: latency (ms) against {documents:,} documents; {WARM_UP} warm-up calls "
        f"per phase not counted =="
    )
    print(notes)
    print(
        f"{'phase':<34}{'queries':>8}{'p50':>8}{'p95':>8}{'p99':>8}{'mean':>8}{'max':>8}"
        f"{'found near':>12}{'found new':>11}"
    )
    for phase, run in runs:
        lat = run.latencies
        print(
            f"{phase:<34}{len(lat):>8,}{percentile(lat, 50):>8.2f}{percentile(lat, 95):>8.2f}"
            f"{percentile(lat, 99):>8.2f}{statistics.fmean(lat):>8.2f}{max(lat):>8.2f}"
            f"{f'{run.found_near}/{run.near_queries}':>12}"
            f"{f'{run.found_new}/{run.new_queries}':>11}"
        )


def print_storage(rows: list[tuple[str, int, int]], documents: int) -> None:
    """Bytes per document, per table."""
    print(f"\n== storage per document ({documents:,} documents) ==")
    print(f"{'table':<14}{'heap+toast':>12}{'indexes':>10}{'total':>10}{'MiB':>9}")
    for table, heap, indexes in rows:
        print(
            f"{table:<14}{heap / documents:>12,.0f}{indexes / documents:>10,.0f}"
            f"{(heap + indexes) / documents:>10,.0f}{(heap + indexes) / 2**20:>9,.1f}"
        )
    heap, indexes = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(
        f"{'all':<14}{heap / documents:>12,.0f}{indexes / documents:>10,.0f}"
        f"{(heap + indexes) / documents:>10,.0f}{(heap + indexes) / 2**20:>9,.1f}"
    )


def print_peers(peer: PeerRun, ours: IngestRun, checks: CheckRun) -> None:
    """datasketch's rates next to ours on the same subset, with ratios ours/theirs."""
    whole = peer.documents >= ours.summary.documents
    done, seconds = (
        (ours.summary.documents, ours.seconds) if whole else ours.time_at(peer.documents)
    )
    our_insert = done / seconds
    our_query = 1000 * len(checks.latencies) / sum(checks.latencies)
    print(
        f"\n== datasketch MinHashLSH(threshold=0.8, num_perm=84), first {peer.documents:,} "
        f"documents =="
    )
    print(
        f"end to end: shingling {peer.prep_seconds:.1f} s, MinHash.bulk "
        f"{peer.minhash_seconds:.1f} s, inserts "
        + ", ".join(f"{k} {v:.1f} s" for k, v in peer.insert_seconds.items())
    )
    print(
        f"ours on the same documents: the first {done:,} of the load above took "
        f"{seconds:.1f} s = {our_insert:,.0f} docs/s (persisted, indexes "
        f"{'built' if whole else 'not yet built: batch marks'}); check "
        f"{our_query:,.0f} queries/s (store of {ours.summary.documents:,})"
    )
    print(
        f"{'index':<10}{'insert/s':>11}{'ours/them':>11}{'query/s':>10}{'ours/them':>11}"
        f"{'p50 ms':>9}{'p99 ms':>9}"
    )
    for name in peer.insert_seconds:
        lat = peer.query_latencies[name]
        print(
            f"{name:<10}{peer.insert_rate(name):>11,.0f}"
            f"{ratio(our_insert, peer.insert_rate(name)):>11}{peer.query_rate(name):>10,.0f}"
            f"{ratio(our_query, peer.query_rate(name)):>11}{percentile(lat, 50):>9.2f}"
            f"{percentile(lat, 99):>9.2f}"
        )


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--docs", type=int, default=100_000, help="documents of the load into an empty store")
    add("--append", type=int, default=100_000, help="documents added incrementally afterwards")
    add(
        "--incremental-docs",
        type=int,
        default=None,
        help="documents of the incremental baseline into an empty store (default: --docs, "
        "the load's own documents; 0: none)",
    )
    add(
        "--bulk",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="force (or refuse) a bulk load; default: the store decides (empty: bulk)",
    )
    add("--words", type=int, default=40, help="mean words per document (±25%%)")
    add("--dup-rate", type=float, default=0.2, help="share of edited copies of recent documents")
    add("--edit-rate", type=float, default=0.02, help="share of a copy's words replaced (min 1)")
    add("--batch-size", type=int, default=5000, help="DedupStore.ingest batch size")
    add(
        "--workers",
        type=int,
        default=1,
        help="DedupStore.ingest fingerprinting processes, for every ingest of the run (0: "
        "fingerprint in the calling thread)",
    )
    add(
        "--simhash-weights",
        choices=["count", "tfidf", "tfidf-length"],
        default="count",
        help="the store's SimHash feature weights",
    )
    add(
        "--simhash-blocks",
        type=int,
        default=FingerprintParams.simhash_blocks,
        help="the store's SimHash blocks (default %(default)s)",
    )
    add("--seed", type=int, default=1, help="seed of the corpus and the queries")
    add(
        "--url",
        default=os.environ.get("DEDUP_STORE_TEST_URL", DEFAULT_URL),
        help="PostgreSQL URL (default $DEDUP_STORE_TEST_URL or %(default)s)",
    )
    add(
        "--embedded",
        action="store_true",
        help="run against the embedded server (the default of dedup-store; --url is ignored)",
    )
    add("--check-queries", type=int, default=2000, help="check calls to time")
    add(
        "--analyze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="time check on the store as ingested (200 queries), then after ANALYZE",
    )
    add(
        "--peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run datasketch in memory and on Redis",
    )
    add("--peer-docs", type=int, default=None, help="documents given to datasketch (--docs)")
    add("--no-redis", dest="redis", action="store_false", help="datasketch in memory only")
    add(
        "--profile",
        nargs="?",
        const="load",
        choices=["load", "append"],
        default=None,
        help="run the load (or the append) under pyinstrument, print the call trees",
    )
    add("--profile-lines", type=int, default=60, help="lines of each call tree printed")
    add("--keep", action="store_true", help="keep the schema (bench_ingest_<pid>) afterwards")
    add("--tmp", type=Path, default=None, help="directory of the generated file")
    args = parser.parse_args(argv)
    if args.incremental_docs is None:
        args.incremental_docs = args.docs
    return args


def store_params(args: argparse.Namespace) -> FingerprintParams:
    """The parameters of the stores the run makes."""
    return FingerprintParams(
        simhash_weights=args.simhash_weights, simhash_blocks=args.simhash_blocks
    )


def run(args: argparse.Namespace, workdir: Path) -> None:
    """Generate, load, append, check, measure storage, run the baseline and the peers."""
    params = store_params(args)
    schema = f"bench_ingest_{os.getpid()}"
    print(
        f"{args.docs:,} documents (+{args.append:,} appended) of ~{args.words} words, dup-rate "
        f"{args.dup_rate}, edit-rate {args.edit_rate}, batch {args.batch_size}, workers "
        f"{args.workers}, seed {args.seed}; "
        f"params (num_perm {params.num_perm}, bands {params.bands}, shingle "
        f"{params.shingle_size}, verify {params.verify}, simhash_weights "
        f"{params.simhash_weights}, simhash_k {params.simhash_k} of {params.simhash_blocks} "
        f"blocks); schema {schema}"
    )
    print(f"revision {revision()}; start: {load()}")
    corpus = IngestCorpus(args.seed, args.words, args.dup_rate, args.edit_rate)
    total = args.docs + args.append
    near = args.check_queries // 2
    positions = sorted(np.random.default_rng(args.seed + 2).choice(total, near).tolist())
    generated = corpus.write(workdir / "corpus.tsv", total, keep=positions)
    started = time.perf_counter()
    sum(1 for _ in read_documents(generated.path))
    read_seconds = time.perf_counter() - started
    queries = check_queries(corpus, generated, positions, args.check_queries)
    engine = sa.create_engine(normalize_url(args.url))
    drop_schema(engine, schema)
    try:
        with DedupStore(args.url, params, schema=schema) as store:
            span = (0, args.docs)
            checkpoint(engine)
            if args.profile == "load":
                ours = profiled_ingest(
                    store,
                    generated.path,
                    args.batch_size,
                    span,
                    args.bulk,
                    args.profile_lines,
                    args.workers,
                )
            else:
                ours = ingest(store, generated.path, args.batch_size, span, args.bulk, args.workers)
            print_ingest("load", ours, generated, read_seconds)
            last_loaded = last_id(engine, schema)
            appended = None
            if args.append:
                span = (args.docs, args.append)
                if args.profile == "append":
                    appended = profiled_ingest(
                        store,
                        generated.path,
                        args.batch_size,
                        span,
                        False,
                        args.profile_lines,
                        args.workers,
                    )
                else:
                    appended = ingest(
                        store, generated.path, args.batch_size, span, False, args.workers
                    )
                print_ingest("append", appended, generated, read_seconds)
                print_neighbours(
                    neighbours(*stored_simhashes(engine, schema), last_loaded, params), params
                )
            print(f"after ingest: {load()}")
            phases, notes = check_phases(store, engine, queries, corpus, args.analyze)
            checks = phases[-1][1]
            if args.append:
                settled = store.settle()
                print(
                    f"\n== settle: {settled['moved']:,.0f} recent documents into the settled key "
                    f"indexes of {ours.summary.documents + args.append:,} documents in "
                    f"{settled['seconds']:.1f} s =="
                )
        if args.check_queries:
            print_checks(phases, ours.summary.documents + args.append, notes)
        print_storage(storage(engine, schema), ours.summary.documents + args.append)
    finally:
        if not args.keep:
            drop_schema(engine, schema)
    baseline = None
    if args.incremental_docs:
        baseline = incremental_baseline(args, engine, generated.path)
        print_ingest("incremental baseline", baseline, generated, read_seconds)
    engine.dispose()
    peer = None
    if args.peers:
        peer = run_peer_section(args, generated, [t for t, _ in queries], params, ours, checks)
    print_verdict(ours, appended, baseline, checks, peer)
    print(f"\nend: {load()}")
    print(subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())


def incremental_baseline(args: argparse.Namespace, engine: sa.Engine, path: Path) -> IngestRun:
    """The first ``--incremental-docs`` documents into an empty store with ``bulk=False``."""
    schema = f"bench_ingest_incremental_{os.getpid()}"
    drop_schema(engine, schema)
    try:
        params = store_params(args)
        with DedupStore(args.url, params, schema=schema) as store:
            span = (0, args.incremental_docs)
            checkpoint(engine)
            return ingest(store, path, args.batch_size, span, False, args.workers)
    finally:
        drop_schema(engine, schema)


def print_verdict(
    load_run: IngestRun,
    appended: IngestRun | None,
    baseline: IngestRun | None,
    checks: CheckRun,
    peer: PeerRun | None,
) -> None:
    """The figures side by side: load against the incremental path and datasketch, append
    against an empty store, ``check`` latency."""
    rate = load_run.summary.documents / load_run.seconds
    kind = "bulk" if load_run.summary.bulk else "incremental"
    print("\n== summary ==")
    print(
        f"load ({kind}, {load_run.summary.documents:,} documents, text to persisted clusters "
        f"and built indexes): {rate:,.0f} docs/s in {load_run.seconds:.1f} s "
        f"(index build {load_run.summary.index_seconds:.1f} s)"
    )
    if baseline is not None:
        base = baseline.summary.documents / baseline.seconds
        print(
            f"incremental path into an empty store ({baseline.summary.documents:,} documents): "
            f"{base:,.0f} docs/s; load / incremental: {ratio(rate, base)}"
        )
        if appended is not None:
            added = appended.summary.documents / appended.seconds
            first, seconds = baseline.time_at(appended.summary.documents)
            empty = first / seconds
            print(
                f"append ({appended.summary.documents:,} documents, incremental) into the "
                f"{load_run.summary.documents:,}-document store: {added:,.0f} docs/s; the "
                f"first {first:,} into an empty store: {empty:,.0f} docs/s (load / that: "
                f"{ratio(rate, empty)}); append / empty: {added / empty:.2f}"
            )
    lat = checks.latencies
    print(
        f"check: p50 {percentile(lat, 50):.2f} ms, p99 {percentile(lat, 99):.2f} ms "
        f"({len(lat):,} queries)"
    )
    if peer is not None:
        theirs = peer.insert_rate("memory")
        print(
            f"datasketch in memory, end to end ({peer.documents:,} documents): "
            f"{theirs:,.0f} docs/s; ours / datasketch: {ratio(rate, theirs)}"
            + ("" if peer.documents == load_run.summary.documents else " (not the same count)")
        )


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


def run_peer_section(
    args: argparse.Namespace,
    generated: GeneratedFile,
    queries: list[str],
    params: FingerprintParams,
    ours: IngestRun,
    checks: CheckRun,
) -> PeerRun:
    """datasketch on the first ``--peer-docs`` documents; its Redis keys are removed after."""
    count = min(args.peer_docs or args.docs, args.docs)
    basename = f"dedup_bench_{os.getpid()}_{time.time_ns()}".encode() if args.redis else None
    try:
        peer = run_peers(generated.path, count, queries, params, basename)
    finally:
        if basename is not None:
            clean_redis(basename)
    print_peers(peer, ours, checks)
    return peer


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options and run the benchmark in a temporary directory."""
    args = parse_args(argv)
    if args.embedded:
        from dedup_store.db import embedded

        args.url = embedded.start()
        print(f"embedded server: {embedded.status().data_dir}")
    with tempfile.TemporaryDirectory(prefix="dedup-ingest-", dir=args.tmp) as workdir:
        run(args, Path(workdir))


if __name__ == "__main__":
    main()
