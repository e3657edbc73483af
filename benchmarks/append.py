"""Load, then append: a bulk load into an empty store, then more documents incrementally.

Run ``python -m benchmarks.append --docs 1000000 --append 50000``. Prints the load's and the
append's documents per second, the client CPU of the append, the WAL the server wrote during
the append (``pg_current_wal_lsn`` before and after: an index the size of the store that takes
inserts at random leaves writes each touched page whole after every checkpoint), and the store's
bytes per document. The documents are those of :class:`benchmarks.ingest_corpus.IngestCorpus`
(``--words`` words, 20 % edited copies), written to a file before anything is timed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import psycopg

from benchmarks.common import (
    add_seed,
    add_store_options,
    add_url,
    conninfo,
    scratch_schema,
    sqlalchemy_url,
)
from benchmarks.ingest_corpus import IngestCorpus, read_documents
from dedup_store import DedupStore


def _wal_position(url: str) -> int:
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def _store_bytes(url: str, schema: str) -> int:
    with psycopg.connect(conninfo(url)) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            [schema],
        ).fetchone()
    assert row is not None
    return int(row[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000, help="documents of the bulk load")
    parser.add_argument("--append", type=int, default=50_000, help="documents appended after it")
    parser.add_argument("--words", type=int, default=40, help="mean words per document")
    parser.add_argument("--batch-size", type=int, default=5000, help="DedupStore.ingest batches")
    add_seed(parser, 1)
    add_url(parser)
    add_store_options(
        parser, keep="keep the store afterwards", schema=("bench_append", "schema of the store")
    )
    args = parser.parse_args()
    total = args.docs + args.append
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corpus.tsv"
        IngestCorpus(args.seed, args.words, 0.2, 0.02).write(path, total)
        with (
            scratch_schema(args.url, args.schema, args.keep),
            DedupStore(sqlalchemy_url(args.url), schema=args.schema) as store,
        ):
            started = time.perf_counter()
            summary = store.ingest(
                read_documents(path, args.docs), bulk=True, batch_size=args.batch_size
            )
            load = time.perf_counter() - started
            wal, started, cpu = _wal_position(args.url), time.perf_counter(), time.process_time()
            appended = read_documents(path, args.append, args.docs)
            store.ingest(appended, bulk=False, batch_size=args.batch_size)
            append, cpu = time.perf_counter() - started, time.process_time() - cpu
            wal = _wal_position(args.url) - wal
            size = _store_bytes(args.url, args.schema)
    print(
        f"bulk load of {args.docs:,} documents: {load:.1f} s, {args.docs / load:,.0f} docs/s "
        f"(of which building indexes {summary.index_seconds:.1f} s)"
    )
    print(
        f"append of {args.append:,}: {append:.1f} s, {args.append / append:,.0f} docs/s, "
        f"client CPU {cpu:.1f} s, WAL {wal / 2**20:,.0f} MiB"
    )
    print(f"store: {size / total:,.0f} bytes a document")


if __name__ == "__main__":
    main()
