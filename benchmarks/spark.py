"""Spark ingest against the local ingest: docs/s on the same generated documents, and where the
Spark load spends its time (fingerprint, group, verify, components, write).

Both runs load the same documents (:class:`benchmarks.ingest_corpus.IngestCorpus`, 20 %
near-duplicates) into fresh schemas of the same server, with the same batch size; the Spark run
uses a ``local[N]`` session started beforehand (its start is reported apart). The two stores
are compared (documents, edges, cluster count) so a fast but wrong run cannot pass.

Run::

    python -m benchmarks.spark --documents 100000 --master 'local[2]'
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from benchmarks.common import add_seed, add_store_options, add_url, drop_schema
from benchmarks.ingest_corpus import IngestCorpus
from dedup_store import DedupStore
from dedup_store.config import normalize_url


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--documents", type=int, default=100_000, help="documents to load (%(default)s)")
    add("--words", type=int, default=40, help="mean words per document (%(default)s)")
    add_seed(parser, 1, "corpus seed (%(default)s)")
    add("--batch-size", type=int, default=2000, help="batch size of both runs (%(default)s)")
    add("--master", default="local[2]", help="Spark master (%(default)s)")
    add("--driver-memory", default="4g", help="Spark driver heap (%(default)s)")
    add_url(parser)
    add(
        "--spark-components",
        action="store_true",
        help="connected components by Spark rounds, not on the driver (any edge count)",
    )
    add_store_options(parser, keep="keep the two schemas")
    add("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args(argv)


def counts(engine: sa.Engine, schema: str) -> dict[str, int]:
    """Documents, edges and clusters of a store."""
    s = f'"{schema}"'
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                f"SELECT (SELECT count(*) FROM {s}.documents), (SELECT count(*) FROM {s}.edges), "
                f"(SELECT count(DISTINCT cluster_id) FROM {s}.documents)"
            )
        ).one()
    return {"documents": int(row[0]), "edges": int(row[1]), "clusters": int(row[2])}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both loads; returns the figures."""
    from dedup_store.spark import ingest_records, spark_session
    from dedup_store.spark.ingest import DRIVER_COMPONENTS

    url = normalize_url(args.url)
    corpus = IngestCorpus(seed=args.seed, words=args.words)
    documents = [doc for chunk, _, _ in corpus.chunks(args.documents) for doc in chunk]
    engine = sa.create_engine(url)
    local_schema, spark_schema = (f"bench_{k}_{uuid.uuid4().hex[:8]}" for k in ("local", "spark"))
    try:
        started = time.perf_counter()
        with DedupStore(url, schema=local_schema) as store:
            store.ingest(documents, batch_size=args.batch_size)
        local_seconds = time.perf_counter() - started

        started = time.perf_counter()
        spark = spark_session(args.master, "dedup-store-benchmark", args.driver_memory)
        spark.sparkContext.setLogLevel("ERROR")
        session_seconds = time.perf_counter() - started
        started = time.perf_counter()
        result = ingest_records(
            documents,
            url,
            spark_schema,
            spark=spark,
            batch_size=args.batch_size,
            driver_components=0 if args.spark_components else DRIVER_COMPONENTS,
        )
        spark_seconds = time.perf_counter() - started
        spark.stop()
        local_counts, spark_counts = counts(engine, local_schema), counts(engine, spark_schema)
    finally:
        if not args.keep:
            for schema in (local_schema, spark_schema):
                drop_schema(engine, schema)
        engine.dispose()
    return {
        "documents": args.documents,
        "master": args.master,
        "components": "spark" if args.spark_components else "driver",
        "local_seconds": round(local_seconds, 2),
        "local_docs_per_s": round(args.documents / local_seconds),
        "spark_session_seconds": round(session_seconds, 2),
        "spark_seconds": round(spark_seconds, 2),
        "spark_docs_per_s": round(args.documents / spark_seconds),
        "spark_stages": {k: round(v, 2) for k, v in result.seconds.items()},
        "local_store": local_counts,
        "spark_store": spark_counts,
        "same_counts": local_counts == spark_counts,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its figures."""
    args = parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"documents          {figures['documents']:,} ({figures['master']}, components on the "
        f"{figures['components']})"
    )
    print(
        f"local ingest       {figures['local_seconds']} s, {figures['local_docs_per_s']:,} docs/s"
    )
    print(
        f"spark ingest       {figures['spark_seconds']} s, {figures['spark_docs_per_s']:,} docs/s"
        f" (session start {figures['spark_session_seconds']} s apart)"
    )
    for stage, seconds in figures["spark_stages"].items():
        print(f"  {stage:<16} {seconds} s")
    print(f"stores             local {figures['local_store']}, spark {figures['spark_store']}")


if __name__ == "__main__":
    main()
