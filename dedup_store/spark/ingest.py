"""A whole load with Spark: fingerprint, group keys, verify, label clusters, COPY.

The driver holds the store's lock exclusively for the whole load (so no other writer
interleaves),
allocates the ids from the store's sequence, reads what the store already holds on the
executors (one query per key kind and id range), and relabels the stored clusters the load
merges. The executors fingerprint, pair, score and write: each writing partition COPYs its rows
into the load's staging tables over its own connection, documents (with sample keys) first, then
edges. The driver then publishes them in its one transaction, building the lookup indexes in
bulk (:mod:`dedup_store.spark.staging`): the load becomes visible all at once, or not at all.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType
from sqlalchemy import Connection, create_engine, text

from dedup_store.config import DEFAULT_SCHEMA, normalize_url
from dedup_store.core.params import FingerprintParams
from dedup_store.core.validation import DEFAULT_MAX_BYTES
from dedup_store.db.matches.scoring import merging_methods
from dedup_store.db.reports import reads
from dedup_store.db.rows.batch_rows import allocate_ids
from dedup_store.db.schema import ddl
from dedup_store.db.schema.names import qualified
from dedup_store.db.write import reclustering
from dedup_store.db.write.batch import relabel
from dedup_store.db.write.locks import lock_store
from dedup_store.errors import (
    DedupStoreError,
    EmptyDocumentError,
    InvalidParamsError,
    OwnerRequiredError,
)
from dedup_store.ingest.pipeline import BATCH_BYTES
from dedup_store.ingest.records import (
    batches,
    describe,
    lookup_ids,
    record_error,
    validate_document,
)
from dedup_store.results import Document, IngestSummary, RecordError
from dedup_store.service import DedupStore
from dedup_store.spark.clusters import load_clusters, load_summary
from dedup_store.spark.fingerprints import fingerprint_dataframe
from dedup_store.spark.grouping import Load, group_keys, record_hot
from dedup_store.spark.pairs import EDGE_SCHEMA, score_batch
from dedup_store.spark.session import spark_session
from dedup_store.spark.staging import Staging, clean, publish
from dedup_store.spark.stored import StoredRows, last_id, read_stored
from dedup_store.spark.writer import conninfo, write_documents, write_edges, write_secondary

#: Merging edges up to this many get their connected components on the driver.
DRIVER_COMPONENTS = 2_000_000
#: The stages a load's time is split into (:attr:`SparkIngest.seconds`).
STAGES = (
    "prepare", "fingerprint", "group", "verify", "components", "write", "publish", "indexes"
)  # fmt: skip
_LOAD_COLUMNS = "seq bigint, batch bigint, external_id string, text string, meta string"


@dataclasses.dataclass
class SparkIngest:
    """What a Spark load did.

    Attributes:
        summary: the counts the local ingest reports.
        errors: the bad records (input order), left out of the load.
        seconds: wall time per stage of :data:`STAGES`.
        edges: match edges written.
    """

    summary: IngestSummary
    errors: list[RecordError]
    seconds: dict[str, float]
    edges: int = 0


@dataclasses.dataclass
class _Prepared:
    """Validated records on the driver: the Arrow table to load, and what was left out."""

    table: pa.Table
    places: list[tuple[Document, int]]
    errors: list[tuple[int, RecordError]]
    skipped: int


def ingest_records(
    records: Iterable[Document | tuple[str, str] | tuple[str, str, Any]],
    url: str,
    schema: str = DEFAULT_SCHEMA,
    *,
    spark: SparkSession | None = None,
    master: str = "local[*]",
    params: FingerprintParams | None = None,
    batch_size: int = 2000,
    on_error: Literal["skip", "stop"] = "stop",
    keep_text: bool | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_errors: Callable[[list[RecordError]], None] | None = None,
    driver_components: int = DRIVER_COMPONENTS,
) -> SparkIngest:
    """Load records into the store at ``url`` with Spark; the store is created if needed.

    The records are read and validated on the driver, in the batches of ``batch_size`` records
    the local ingest would use (ids already stored or repeated are skipped, the first copy
    wins), so the load stores the documents, edges, cluster membership, hot keys and secondary
    keys that ``DedupStore.ingest(records, batch_size=batch_size)`` stores.

    Args:
        records: documents or ``(id, text[, meta])`` tuples, in order.
        url: the database URL.
        schema: the store's schema.
        spark: the session to use (default: one on ``master``).
        master: the Spark master URL when no session is given.
        params: fingerprint parameters of a new store (an existing one must agree).
        batch_size: the local ingest's batch size the load reproduces.
        on_error: ``stop`` raises the first bad record before anything is written; ``skip``
            leaves bad records out and reports them.
        keep_text: store each document's original text too (``None``: as the store's
            setting, which a new store takes from here).
        max_bytes: largest accepted text, in UTF-8 bytes.
        on_errors: called with the bad records once they are known.
        driver_components: when the merging edges are at most this many, their connected
            components are computed on the driver (the store's union-find; 16 bytes an edge)
            instead of by rounds of Spark jobs; 0: always in Spark.

    Raises:
        DedupStoreError: the first bad record, with ``on_error="stop"``.
    """
    url = normalize_url(url)
    started = time.perf_counter()
    params, keep_text = _open_for_load(url, params, schema, keep_text)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            prepared = _prepare(conn, schema, records, batch_size, max_bytes, on_error)
        spark = spark or spark_session(master)
        frame = spark.createDataFrame(prepared.table, schema=_LOAD_COLUMNS)
        seconds = {"prepare": time.perf_counter() - started}
        result = _load(
            spark,
            frame,
            _Target(url, schema, params, keep_text, driver_components),
            prepared,
            on_error,
            on_errors,
            seconds,
        )
    finally:
        engine.dispose()
    return result


def ingest_dataframe(
    df: DataFrame,
    url: str,
    schema: str = DEFAULT_SCHEMA,
    *,
    params: FingerprintParams | None = None,
    keep_text: bool | None = None,
    driver_components: int = 0,
) -> SparkIngest:
    """Load a DataFrame of ``(id, text[, meta])`` into the store at ``url``.

    The rows are taken in the DataFrame's order, each as its own batch (as if added one after
    the other: a band or block key pairs a document with the ``hot_key_limit`` oldest documents
    sharing it, a hot one also with documents sharing a secondary key). An id already stored,
    or repeated, is skipped (the first row wins); ``meta``, when present, is a JSON object
    string. An invalid text fails the load before anything is
    written; documents empty after canonicalization are left out and reported.
    ``driver_components`` is that of :func:`ingest_records`.
    """
    url = normalize_url(url)
    started = time.perf_counter()
    params, keep_text = _open_for_load(url, params, schema, keep_text)
    spark = df.sparkSession
    meta = F.col("meta") if "meta" in df.columns else F.lit(None).cast("string")
    numbered = (
        df.select(F.col("id").cast("string").alias("external_id"), "text", meta.alias("meta"))
        .rdd.zipWithIndex()
        .map(lambda pair: (pair[1], *pair[0]))
        .toDF("position bigint, external_id string, text string, meta string")
    )
    dsn = conninfo(url)
    last = last_id(url, schema)
    stored_ids = read_stored(
        spark,
        dsn,
        f"SELECT external_id FROM {qualified(schema)}.documents WHERE id >= %(lo)s AND id < %(hi)s",
        "external_id string",
        last,
    )
    first_rows = numbered.groupBy("external_id").agg(F.min("position").alias("position"))
    kept = (
        numbered.join(first_rows, ["external_id", "position"])
        .join(stored_ids, "external_id", "left_anti")
        .persist()
    )
    total = numbered.count()
    order = kept.select("position").rdd.map(lambda row: row[0]).collect()
    order.sort()
    seq_of = spark.createDataFrame(
        [(p, s) for s, p in enumerate(order)], "position bigint, seq bigint"
    )
    frame = kept.join(seq_of, "position").select(
        "seq", F.col("seq").alias("batch"), "external_id", "text", "meta"
    )
    prepared = _Prepared(pa.table({}), [], [], total - len(order))
    seconds = {"prepare": time.perf_counter() - started}
    try:
        return _load(
            spark,
            frame,
            _Target(url, schema, params, keep_text, driver_components),
            prepared,
            "skip",
            None,
            seconds,
        )
    finally:
        kept.unpersist()


def _open_for_load(
    url: str, params: FingerprintParams | None, schema: str, keep_text: bool | None
) -> tuple[FingerprintParams, bool]:
    """Open (or make) the store a Spark load writes; its parameters, and whether it keeps
    texts (``keep_text``, or the store's setting).

    Raises:
        InvalidParamsError: parameters the Spark path does not compute.
        OwnerRequiredError: the role does not own the store's tables, whose indexes the load
            builds.
    """
    with DedupStore(url, params, schema, create=True, keep_text=keep_text) as store:
        params, keep_text = require_spark_params(store.params), store.keep_text
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            owner = ddl.other_owner(conn, schema)
    finally:
        engine.dispose()
    if owner is not None:
        raise OwnerRequiredError("a Spark load", owner)
    return params, keep_text


def _prepare(
    conn: Connection,
    schema: str,
    records: Iterable[Document | tuple[Any, ...]],
    batch_size: int,
    max_bytes: int,
    on_error: str,
) -> _Prepared:
    """Validate the records in the local ingest's batches; skip stored and repeated ids."""
    columns: dict[str, list[Any]] = {c: [] for c in ("seq", "batch", "external_id", "text", "meta")}
    places: list[tuple[Document, int]] = []
    errors: list[tuple[int, RecordError]] = []
    seen: set[str] = set()
    skipped = 0
    number = 0
    for batch, chunk in enumerate(batches(records, batch_size, BATCH_BYTES)):
        known = reads.find_documents(conn, schema, lookup_ids(chunk))
        for doc in chunk:
            number += 1
            try:
                validate_document(doc, max_bytes)
            except DedupStoreError as e:
                error = record_error(doc, str(e), number)
                if on_error == "stop":
                    raise type(e)(describe(error)) from None
                errors.append((number, error))
                continue
            if doc.id in seen or doc.id in known:
                skipped += 1
                continue
            seen.add(doc.id)
            columns["seq"].append(len(places))
            columns["batch"].append(batch)
            columns["external_id"].append(doc.id)
            columns["text"].append(doc.text)
            columns["meta"].append(
                None
                if doc.meta is None
                else json.dumps(doc.meta, ensure_ascii=False, separators=(",", ":"))
            )
            places.append((doc, number))
    table = pa.table(
        {
            "seq": pa.array(columns["seq"], pa.int64()),
            "batch": pa.array(columns["batch"], pa.int64()),
            "external_id": pa.array(columns["external_id"], pa.string()),
            "text": pa.array(columns["text"], pa.string()),
            "meta": pa.array(columns["meta"], pa.string()),
        }
    )
    return _Prepared(table, places, errors, skipped)


@dataclasses.dataclass(frozen=True)
class _Target:
    """Where and how a load is written."""

    url: str
    schema: str
    params: FingerprintParams
    keep_text: bool
    driver_components: int


def require_spark_params(params: FingerprintParams) -> FingerprintParams:
    """``params``, when a Spark load can write a store made with them: the one statement of
    what a Spark load cannot do, for the library and ``ingest --engine spark`` alike.

    Raises:
        InvalidParamsError: the store weighs its SimHash features with document frequencies
            kept in SQL (``simhash_weights`` other than ``count``), which a Spark load does not
            compute, or scores metadata sets (``meta_fields``), which it does not sign.
    """
    if params.uses_meta:
        refused = f"meta_fields {','.join(params.meta_fields)}"
        why = "its metadata sets are signed and scored by the local engine only"
    elif params.weighted:
        refused = f"simhash_weights {params.simhash_weights}"
        why = "its SimHashes are weighed with document frequencies kept in SQL"
    else:
        return params
    raise InvalidParamsError(
        f"a Spark load cannot write a store with {refused} ({why}): ingest it with the local engine"
    )


def _load(
    spark: SparkSession,
    frame: DataFrame,
    target: _Target,
    prepared: _Prepared,
    on_error: str,
    on_errors: Callable[[list[RecordError]], None] | None,
    seconds: dict[str, float],
) -> SparkIngest:
    url, schema, params = target.url, target.schema, target.params
    keep_text, driver_components = target.keep_text, target.driver_components
    dsn = conninfo(url)
    s = qualified(schema)
    parallelism = max(2, spark.sparkContext.defaultParallelism)
    body = F.col("text") if keep_text else F.lit(None).cast("string")
    engine = create_engine(url)
    staging: Staging | None = None
    try:
        with engine.begin() as conn:
            lock_store(conn, schema)  # so that no other load's staging tables are dropped
            clean(conn, schema)
            staging = Staging.create(conn, schema)
        with engine.connect() as conn, conn.begin():
            lock_store(conn, schema)
            last = int(
                conn.execute(text(f"SELECT coalesce(max(id), 0) FROM {s}.documents")).scalar_one()
            )

            clock = time.perf_counter()
            fingerprints = fingerprint_dataframe(
                frame.repartition(parallelism * 2, "seq").withColumn("body", body),
                params,
                keep=("seq", "batch", "external_id", "meta", "body"),
            ).persist()
            empty, errors = _empty_documents(fingerprints, prepared, on_error, on_errors)
            count = fingerprints.count() - len(empty)
            seconds["fingerprint"] = time.perf_counter() - clock

            clock = time.perf_counter()
            ids = allocate_ids(conn, schema, count)
            first = int(ids[0]) if count else last + 1
            docs = _with_ids(fingerprints.where("NOT empty"), first, empty).persist()
            stored = StoredRows(spark, dsn, schema, last, params)
            exact = _exact_of(docs, stored, first).persist()
            firsts = exact.where(F.col("exact_of").isNull()).select("id")
            grouped = group_keys(conn, Load(docs, firsts, first, last), stored, params)
            candidates = grouped.candidates.persist()
            candidates.count()
            seconds["group"] = time.perf_counter() - clock

            clock = time.perf_counter()
            edges = _edges(docs, exact, candidates, stored, params).persist()
            edge_count = edges.count()
            seconds["verify"] = time.perf_counter() - clock

            clock = time.perf_counter()
            merging = sorted(method.value for method in merging_methods(params))
            clusters, stored_mapping, labels = load_clusters(
                conn, schema, edges, stored, merging, first, driver_components
            )
            seconds["components"] = time.perf_counter() - clock

            clock = time.perf_counter()
            rows = (
                docs.join(exact, "id")
                .join(clusters, "id", "left")
                .withColumn("cluster_id", F.coalesce("cluster_id", "id"))
            )
            _write_staged(rows, edges, grouped.secondary, dsn, schema, staging)
            seconds["write"] = time.perf_counter() - clock
            clock = time.perf_counter()
            relabel(conn, schema, stored_mapping)
            record_hot(conn, schema, grouped.hot_keys)
            seconds["indexes"] = publish(conn, staging, params)["indexes"]
            reclustering.apply_to_new(conn, schema, range(first, first + count))
            seconds["publish"] = time.perf_counter() - clock - seconds["indexes"]
            summary = load_summary(edges, merging, first, count, prepared.skipped, len(errors))
        with engine.connect() as conn:
            summary.clusters, summary.duplicate_clusters = reads.count_clusters(conn, schema)
    finally:
        if staging is not None:  # published: already gone; failed: dropped here
            with engine.begin() as conn:
                staging.drop(conn)
        engine.dispose()
    summary.seconds = sum(seconds.values())
    for cached in (fingerprints, docs, exact, candidates, edges, labels, *grouped.cached):
        cached.unpersist()
    return SparkIngest(summary, [e for _, e in errors], seconds, edge_count)


def _empty_documents(
    fingerprints: DataFrame,
    prepared: _Prepared,
    on_error: str,
    on_errors: Callable[[list[RecordError]], None] | None,
) -> tuple[np.ndarray, list[tuple[int, RecordError]]]:
    """The positions (``seq``) of the documents empty after canonicalization, and their errors
    (reported to ``on_errors``; the first raised with ``on_error`` ``stop``)."""
    empty_rows = fingerprints.where("empty").select("seq").collect()
    empty = np.array(sorted(row[0] for row in empty_rows), dtype=np.int64)
    errors = _errors(prepared, empty)
    if errors and on_error == "stop":
        raise EmptyDocumentError(describe(errors[0][1]))
    if on_errors is not None and errors:
        on_errors([e for _, e in errors])
    return empty, errors


def _exact_of(docs: DataFrame, stored: StoredRows, first: int) -> DataFrame:
    """``(id, exact_of)`` of the new documents: the first document of their exact group, stored
    or new (``NULL`` for the first itself)."""
    hashes = docs.select("id", "exact_hash").unionByName(stored.exact_hashes())
    group_first = F.min("id").over(Window.partitionBy("exact_hash"))
    return (
        hashes.withColumn("first", group_first)  # one shuffle, not a group and a join
        .where(F.col("id") >= first)
        .select("id", F.when(F.col("first") != F.col("id"), F.col("first")).alias("exact_of"))
    )


def _write_staged(
    rows: DataFrame, edges: DataFrame, secondary: DataFrame, dsn: str, schema: str, staging: Staging
) -> None:
    """COPY the documents, edges and secondary keys into the load's staging tables, from the
    executors."""
    tables = staging.tables
    for frame, writer in (
        (rows, write_documents),
        (edges, write_edges),
        (secondary, write_secondary),
    ):
        write = partial(writer, dsn=dsn, schema=schema, tables=tables)
        frame.mapInArrow(write, "rows bigint").collect()


def _errors(prepared: _Prepared, empty: np.ndarray) -> list[tuple[int, RecordError]]:
    """The bad records found on the driver and the empty ones, in input order."""
    found = list(prepared.errors)
    for seq in empty.tolist():
        if seq < len(prepared.places):
            doc, number = prepared.places[seq]
            found.append((number, record_error(doc, EmptyDocumentError.MESSAGE, number)))
        else:  # pragma: no cover - a DataFrame load keeps no places
            found.append((seq, RecordError(None, None, None, EmptyDocumentError.MESSAGE)))
    found.sort(key=lambda item: item[0])
    return found


def _with_ids(fingerprints: DataFrame, first: int, empty: np.ndarray) -> DataFrame:
    """The ids the store's sequence gave, in input order, empty documents left out."""
    if len(empty) == 0:  # no Python round trip of every fingerprint
        return fingerprints.withColumn("id", (F.col("seq") + first).cast("bigint"))
    schema = StructType([*fingerprints.schema.fields, StructField("id", LongType(), False)])

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            seq = np.asarray(batch.column("seq").to_numpy(), dtype=np.int64)
            ids = first + seq - np.searchsorted(empty, seq)
            yield batch.append_column("id", pa.array(ids, pa.int64()))

    return fingerprints.mapInArrow(run, schema)


def _edges(
    docs: DataFrame,
    exact: DataFrame,
    candidates: DataFrame,
    stored: StoredRows,
    params: FingerprintParams,
) -> DataFrame:
    """The verified edges: the candidates' matches, and each exact copy's link to the first
    document of its group."""
    columns = ["id", "exact_hash", "simhash", "shingle_count", "shingles"]
    if params.verify != "exact":
        columns.append("signature")
    features = docs.select(*columns).unionByName(stored.features().select(*columns))

    def side(prefix: str) -> DataFrame:
        names = {"exact_hash": "hash", "shingle_count": "count"}
        return features.select(*(F.col(c).alias(f"{prefix}_{names.get(c, c)}") for c in columns))

    joined = candidates.join(side("x"), F.col("a") == F.col("x_id")).join(
        side("y"), F.col("b") == F.col("y_id")
    )
    settings = params.to_dict()

    def score(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fp_params = FingerprintParams.from_dict(settings)
        for batch in batches:
            yield score_batch(batch, fp_params)

    matches = joined.mapInArrow(score, EDGE_SCHEMA)
    copies = exact.where(F.col("exact_of").isNotNull()).select(
        F.col("exact_of").alias("a"),
        F.col("id").alias("b"),
        F.lit("exact").alias("method"),
        F.lit(1.0).alias("jaccard"),
        F.lit(1.0).alias("containment"),
        F.lit(0).cast("smallint").alias("hamming"),
    )
    return matches.unionByName(copies)
