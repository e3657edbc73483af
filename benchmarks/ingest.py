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
   (their keys inserted into the store's key index); after ``check``, ``DedupStore.settle``
   packs that index again, timed.
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
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from benchmarks.common import add_seed, add_store_options, add_url, drop_schema, scratch_schema
from benchmarks.ingest_corpus import GeneratedFile, IngestCorpus, read_documents
from benchmarks.ingest_neighbours import neighbours, print_neighbours, stored_simhashes
from benchmarks.ingest_peers import PeerRun, clean_redis, run_peers
from benchmarks.ingest_report import (
    load,
    print_checks,
    print_ingest,
    print_peers,
    print_storage,
    print_verdict,
    revision,
)
from benchmarks.ingest_store import (
    CheckRun,
    IngestRun,
    check_phases,
    check_queries,
    checkpoint,
    ingest,
    last_id,
    profiled_ingest,
    storage,
)
from dedup_store import (
    DedupStore,
)
from dedup_store.config import normalize_url
from dedup_store.core import FingerprintParams


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    _corpus_options(parser)
    _store_options(parser)
    _measure_options(parser)
    args = parser.parse_args(argv)
    if args.incremental_docs is None:
        args.incremental_docs = args.docs
    return args


def _corpus_options(parser: argparse.ArgumentParser) -> None:
    """How many documents, of what kind, in which phases."""
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


def _store_options(parser: argparse.ArgumentParser) -> None:
    """The stores' parameters and the database, up to ``--seed`` and ``--url``."""
    add = parser.add_argument
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
    add(
        "--simhash-key-max-shingles",
        type=int,
        default=FingerprintParams.simhash_key_max_shingles,
        help="the store's longest document with SimHash block keys (0: no limit; default "
        "%(default)s)",
    )
    add_seed(parser, 1, "seed of the corpus and the queries")
    add_url(parser)
    add(
        "--embedded",
        action="store_true",
        help="run against the embedded server (the default of dedup-store; --url is ignored)",
    )


def _measure_options(parser: argparse.ArgumentParser) -> None:
    """What is measured beside the ingests, and what is kept."""
    add = parser.add_argument
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
    add_store_options(parser, keep="keep the schema (bench_ingest_<pid>) afterwards")
    add("--tmp", type=Path, default=None, help="directory of the generated file")


def store_params(args: argparse.Namespace) -> FingerprintParams:
    """The parameters of the stores the run makes."""
    return FingerprintParams(
        simhash_weights=args.simhash_weights,
        simhash_blocks=args.simhash_blocks,
        simhash_key_max_shingles=args.simhash_key_max_shingles,
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
        f"blocks, block keys up to {params.simhash_key_max_shingles} shingles); schema {schema}"
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
                ids, simhashes, counts = stored_simhashes(engine, schema)
                print_neighbours(
                    neighbours(ids, simhashes, last_loaded, params, shingle_counts=counts), params
                )
            print(f"after ingest: {load()}")
            phases, notes = check_phases(store, engine, queries, corpus, args.analyze)
            checks = phases[-1][1]
            if args.append:
                settled = store.settle()
                total = ours.summary.documents + args.append
                print(
                    f"\n== settle: the key index of the documents up to id "
                    f"{settled['settled_through']:,.0f} (of {total:,}; "
                    f"{settled['moved']:,.0f} moved from the recent tier) built anew in "
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
    params = store_params(args)
    with scratch_schema(engine, schema), DedupStore(args.url, params, schema=schema) as store:
        span = (0, args.incremental_docs)
        checkpoint(engine)
        return ingest(store, path, args.batch_size, span, False, args.workers)


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
        from dedup_store.db.server import embedded

        args.url = embedded.start()
        print(f"embedded server: {embedded.status().data_dir}")
    with tempfile.TemporaryDirectory(prefix="dedup-ingest-", dir=args.tmp) as workdir:
        run(args, Path(workdir))


if __name__ == "__main__":
    main()
