"""COPY from the executors: every partition writes its rows over its own connection.

The rows are encoded with the store's binary COPY helpers
(:mod:`dedup_store.db.server.binary_copy`), so they are the rows
:func:`dedup_store.db.write.batch.insert_documents` writes; they go into the load's staging
tables (:mod:`dedup_store.spark.staging`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pyarrow as pa
from psycopg import sql

from dedup_store.core.arrays import stable_order
from dedup_store.db.rows import key_rows
from dedup_store.db.rows.batch_rows import DOCUMENT_COLUMNS
from dedup_store.db.server import binary_copy

EDGE_COLUMNS = ("a", "b", "method", "jaccard", "containment", "hamming")
#: What a writing partition reports.
WRITTEN_SCHEMA = "rows bigint"


def conninfo(url: str) -> str:
    """A libpq connection URI for a SQLAlchemy PostgreSQL URL (the password kept)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def copy_rows(
    conn: psycopg.Connection[Any], schema: str, table: str, columns: Sequence[str], payload: bytes
) -> None:
    """COPY binary tuples into ``schema.table``."""
    if not payload:
        return
    statement = sql.SQL("COPY {}.{} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(schema),
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
    )
    with conn.cursor() as cur, cur.copy(statement) as out:
        out.write(binary_copy.COPY_HEADER)
        out.write(payload)
        out.write(binary_copy.COPY_TRAILER)


def document_payload(batch: pa.RecordBatch) -> bytes:
    """The ``documents`` rows of an Arrow batch of the load's document columns."""
    n = batch.num_rows
    if n == 0:
        return b""

    def column(name: str, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
        return np.asarray(batch.column(name).to_numpy(zero_copy_only=False), dtype=dtype)

    def matrix(name: str, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
        values = batch.column(name).flatten().to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=dtype).reshape(n, -1)

    ids = column("id", np.int64)
    hashes = np.frombuffer(b"".join(batch.column("exact_hash").to_pylist()), dtype="V16")
    prefix = binary_copy.fixed_prefix(
        len(DOCUMENT_COLUMNS),
        [
            (ids, ">i8"),
            (column("cluster_id", np.int64), ">i8"),
            (column("simhash", np.int64), ">i8"),
            (hashes, "V16"),
            binary_copy.array_matrix(matrix("signature", np.int32)),
            (column("shingle_count", np.int32), ">i4"),
            (column("token_count", np.int32), ">i4"),
            (column("length", np.int32), ">i4"),
        ],
    )
    width = len(prefix) // n
    shingles = batch.column("shingles")
    offsets = np.asarray(shingles.offsets.to_numpy(), dtype=np.int64)
    values = np.asarray(shingles.values.to_numpy(zero_copy_only=False), dtype=np.int32)
    offsets = offsets - offsets[0]
    shingle_fields = binary_copy.int4_array_fields(values[: offsets[-1]], offsets)
    external_ids = batch.column("external_id").to_pylist()
    languages = batch.column("language").to_pylist()
    metas = batch.column("meta").to_pylist()
    bodies = batch.column("body").to_pylist()
    exact_of = batch.column("exact_of").to_pylist()
    parts: list[bytes] = []
    for i in range(n):
        meta, body = metas[i], bodies[i]
        parts += [
            prefix[width * i : width * (i + 1)],
            binary_copy.field(external_ids[i].encode("utf-8")),
            binary_copy.field(languages[i].encode("utf-8")),
            # the meta column holds the JSON text the driver encoded as the store does
            binary_copy.field(None if meta is None else b"\x01" + meta.encode("utf-8")),
            binary_copy.field(None if body is None else body.encode("utf-8")),
            shingle_fields[i],
            binary_copy.field(struct.pack("!q", exact_of[i]) if exact_of[i] else None),
        ]
    return b"".join(parts)


def slot_rows(batch: pa.RecordBatch) -> bytes:
    """The ``slot_keys`` rows of the batch's first documents of their exact group
    (:meth:`dedup_store.db.rows.key_rows.KeyRows.of`), as binary COPY tuples."""
    chosen = batch.filter(pa.compute.is_null(batch.column("exact_of")))
    n = chosen.num_rows

    def matrix(name: str) -> npt.NDArray[np.int64]:
        values = np.asarray(chosen.column(name).flatten().to_numpy(zero_copy_only=False))
        return values.astype(np.int64).reshape(n, len(values) // max(n, 1))

    ids = np.asarray(chosen.column("id").to_numpy(), dtype=np.int64)
    rows = key_rows.KeyRows.of(ids, matrix("band_keys"), matrix("block_keys"))
    return binary_copy.fixed_rows([rows.key, rows.doc, rows.kind, rows.slot]) if len(rows) else b""


def sample_rows(batch: pa.RecordBatch) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    """``(key, doc_id)`` of the sample keys of the batch's first documents of their exact
    group, in key order."""
    firsts = pa.compute.is_null(batch.column("exact_of"))
    chosen = batch.filter(firsts)
    samples = chosen.column("sample_keys")
    offsets: npt.NDArray[np.int64] = np.asarray(samples.offsets.to_numpy(), dtype=np.int64)
    counts = offsets[1:] - offsets[:-1]
    keys = np.asarray(samples.flatten().to_numpy(zero_copy_only=False), dtype=np.int32)
    docs = np.repeat(np.asarray(chosen.column("id").to_numpy(), dtype=np.int64), counts)
    order = stable_order(keys)
    return keys[order], docs[order]


def edge_payload(batch: pa.RecordBatch) -> bytes:
    """The ``edges`` rows of an Arrow batch with the columns of :data:`EDGE_COLUMNS`."""
    row = struct.Struct("!hiqiq")
    tail = struct.Struct("!ididih")
    parts: list[bytes] = []
    columns = [batch.column(c).to_pylist() for c in EDGE_COLUMNS]
    for a, b, method, jaccard, containment, hamming in zip(*columns, strict=True):
        name = method.encode("ascii")
        parts += [
            row.pack(6, 8, a, 8, b),
            struct.pack("!i", len(name)),
            name,
            tail.pack(8, jaccard, 8, containment, 2, hamming),
        ]
    return b"".join(parts)


def write_documents(
    batches: Iterable[pa.RecordBatch], dsn: str, schema: str, tables: Mapping[str, str]
) -> Iterator[pa.RecordBatch]:
    """COPY a partition's documents, their sample keys and their band and block keys in one
    transaction, into the tables ``tables["documents"]``, ``tables["sample_keys"]`` and
    ``tables["slot_keys"]``."""

    def write(conn: psycopg.Connection[Any], batch: pa.RecordBatch) -> None:
        payload = document_payload(batch)
        copy_rows(conn, schema, tables["documents"], DOCUMENT_COLUMNS, payload)
        copy_rows(conn, schema, tables[key_rows.SETTLED], key_rows.COLUMNS, slot_rows(batch))
        keys, docs = sample_rows(batch)
        if len(keys):
            rows = binary_copy.fixed_rows([keys, docs])
            copy_rows(conn, schema, tables["sample_keys"], ("key", "doc_id"), rows)

    return _write_partition(batches, dsn, write)


def write_edges(
    batches: Iterable[pa.RecordBatch], dsn: str, schema: str, tables: Mapping[str, str]
) -> Iterator[pa.RecordBatch]:
    """COPY a partition's edges in one transaction, into the table ``tables["edges"]``."""

    def write(conn: psycopg.Connection[Any], batch: pa.RecordBatch) -> None:
        copy_rows(conn, schema, tables["edges"], EDGE_COLUMNS, edge_payload(batch))

    return _write_partition(batches, dsn, write)


def write_secondary(
    batches: Iterable[pa.RecordBatch], dsn: str, schema: str, tables: Mapping[str, str]
) -> Iterator[pa.RecordBatch]:
    """COPY a partition's ``secondary_keys`` rows (columns ``kind, slot, key, doc_id``) in one
    transaction, into the table ``tables["secondary_keys"]``."""

    def write(conn: psycopg.Connection[Any], batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        rows = np.empty(n, dtype=_SECONDARY_ROW)
        rows["count"], rows["l0"], rows["l1"], rows["l2"], rows["l3"] = 4, 2, 2, 8, 8
        for name, column in (("v0", "kind"), ("v1", "slot"), ("v2", "key"), ("v3", "doc_id")):
            rows[name] = batch.column(column).to_numpy()
        columns = ("kind", "slot", "key", "doc_id")
        copy_rows(conn, schema, tables["secondary_keys"], columns, rows.tobytes())

    return _write_partition(batches, dsn, write)


_SECONDARY_ROW = np.dtype(
    [
        ("count", ">i2"),
        ("l0", ">i4"),
        ("v0", ">i2"),
        ("l1", ">i4"),
        ("v1", ">i2"),
        ("l2", ">i4"),
        ("v2", ">i8"),
        ("l3", ">i4"),
        ("v3", ">i8"),
    ]
)


def _write_partition(
    batches: Iterable[pa.RecordBatch],
    dsn: str,
    write: Callable[[psycopg.Connection[Any], pa.RecordBatch], None],
) -> Iterator[pa.RecordBatch]:
    """Write every batch of a partition on one connection, in one transaction; yields the
    number of rows written."""
    written = 0
    with psycopg.connect(dsn) as conn:
        for batch in batches:
            write(conn, batch)
            written += batch.num_rows
    yield _count(written)


def _count(rows: int) -> pa.RecordBatch:
    """The one-row result of a partition's write: how many rows it wrote."""
    return pa.RecordBatch.from_arrays([pa.array([rows], pa.int64())], names=["rows"])
