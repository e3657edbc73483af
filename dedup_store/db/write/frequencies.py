"""Document frequencies of SimHash features, for stores with weighted SimHash features.

A store whose ``simhash_weights`` is ``tfidf`` or ``tfidf-length`` keeps, in SQL:

- ``feature_df``: for every SimHash feature (a word or CJK character shingle hash, as
  ``bigint``), the number of stored documents holding it;
- ``feature_documents``: one row, the number of documents counted;
- ``document_features``: each document's distinct features, so that deleting it takes its
  counts back.

A batch reads the frequencies of its features under the store's lock, exclusive (:func:`read`;
:mod:`dedup_store.db.write.locks`), is weighed with them plus its own counts
(:func:`dedup_store.core.fingerprint.reweighted`), and adds its counts in one statement
(:func:`add`); a delete takes them back in one statement (:func:`remove`). Stores with ``count``
weights leave the tables empty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64
from dedup_store.core.fingerprint import FingerprintBatch, feature_index, reweighted
from dedup_store.core.weights import DocumentFrequencies
from dedup_store.db.schema.encoding import array_literal
from dedup_store.db.schema.names import qualified
from dedup_store.db.server.binary_copy import INT8_OID, copy_payload


def read(conn: Connection, schema: str, features: I64) -> DocumentFrequencies:
    """The stored frequencies of ``features`` (sorted, distinct) and the documents counted."""
    statement, parameters = read_statement(schema, features)
    return frequencies_of(dict(conn.execute(text(statement), parameters).mappings().one()))


def read_statement(schema: str, features: I64) -> tuple[str, dict[str, Any]]:
    """The statement of :func:`read`, with its ``:name`` parameters; :func:`frequencies_of`
    reads its one row."""
    s = qualified(schema)
    statement = (
        f"SELECT (SELECT documents FROM {s}.feature_documents) AS documents, "
        "array_agg(f.feature ORDER BY f.feature) AS features, "
        "array_agg(f.df ORDER BY f.feature) AS counts "
        f"FROM unnest(CAST(:features AS bigint[])) AS n(feature) "
        f"JOIN {s}.feature_df f ON f.feature = n.feature"
    )
    return statement, {"features": array_literal(features.tolist())}


def frequencies_of(row: Mapping[str, Any]) -> DocumentFrequencies:
    """The frequencies in the row of :func:`read_statement`, read by column name."""
    return DocumentFrequencies(
        np.array(row["features"] or [], dtype=np.int64),
        np.array(row["counts"] or [], dtype=np.int64),
        row["documents"] or 0,
    )


def weigh(
    conn: Connection, schema: str, batch: FingerprintBatch, rows: I64 | None
) -> FingerprintBatch:
    """``batch`` weighed with the store's frequencies plus those of its ``rows`` (the rows to be
    written; ``None``: all), as if they were added now; a batch of a store with ``count``
    weights as it is."""
    if not batch.params.weighted:
        return batch
    index = batch.feature_index or feature_index(batch)
    weighed = dataclasses.replace(batch, feature_index=index)
    return reweighted(weighed, read(conn, schema, index.unique), rows)


def add(conn: Connection, schema: str, batch: FingerprintBatch, rows: I64, ids: I64) -> None:
    """Count the features of the written ``rows`` of ``batch`` (internal ids ``ids``): each
    document's distinct features by one binary COPY, the counts by one statement."""
    if not batch.params.weighted or len(rows) == 0:
        return
    index = batch.feature_index or feature_index(batch)
    owner, features = index.pairs(rows)
    position = np.zeros(len(batch), dtype=np.int64)
    position[rows] = np.arange(len(rows))
    order = np.argsort(position[owner], kind="stable")  # by written row
    owner, features = owner[order], features[order]
    per_document = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(np.bincount(position[owner], minlength=len(rows)), out=per_document[1:])
    copy_payload(
        conn,
        schema,
        "document_features",
        ("doc_id", "features"),
        _document_rows(ids, features, per_document),
    )
    counts = index.counts(rows)
    unique, counts = index.unique[counts > 0], counts[counts > 0]
    s = qualified(schema)
    conn.execute(
        text(
            f"""WITH per_feature AS (
                INSERT INTO {s}.feature_df AS t (feature, df)
                SELECT * FROM unnest(CAST(:features AS bigint[]), CAST(:counts AS bigint[]))
                ON CONFLICT (feature) DO UPDATE SET df = t.df + excluded.df
                RETURNING 1
            )
            INSERT INTO {s}.feature_documents AS t (id, documents) VALUES (1, :documents)
            ON CONFLICT (id) DO UPDATE SET documents = t.documents + excluded.documents"""
        ),
        {
            "features": array_literal(unique.tolist()),
            "counts": array_literal(counts.tolist()),
            "documents": len(rows),
        },
    )


def _document_rows(ids: I64, features: I64, offsets: I64) -> bytes:
    """Binary COPY rows ``(doc_id, features)``: document ``i`` has ``ids[i]`` and the
    ``bigint[]`` of ``features[offsets[i]:offsets[i + 1]]``."""
    counts = np.diff(offsets)
    heads = np.empty(
        len(ids),
        dtype=[
            ("fields", ">i2"),
            ("id_len", ">i4"),
            ("id", ">i8"),
            ("len", ">i4"),
            ("head", ">i4", (5,)),
        ],
    )
    heads["fields"], heads["id_len"], heads["id"] = 2, 8, ids
    heads["len"] = 20 + 12 * counts
    heads["head"] = np.array([1, 0, INT8_OID, 0, 1])
    heads["head"][:, 3] = counts
    body = np.empty(len(features), dtype=[("len", ">i4"), ("val", ">i8")])
    body["len"], body["val"] = 8, features
    head_bytes, body_bytes = heads.tobytes(), body.tobytes()
    size = heads.dtype.itemsize
    bounds = (offsets * 12).tolist()
    return b"".join(
        head_bytes[size * i : size * (i + 1)] + body_bytes[bounds[i] : bounds[i + 1]]
        for i in range(len(ids))
    )


def remove(conn: Connection, schema: str, doc_ids: list[int]) -> None:
    """Take back the counts of the documents ``doc_ids`` (before their rows are deleted)."""
    s = qualified(schema)
    conn.execute(
        text(
            f"""WITH gone AS (
                DELETE FROM {s}.document_features WHERE doc_id = ANY(CAST(:ids AS bigint[]))
                RETURNING features
            ), counts AS (
                SELECT feature, count(*) AS n FROM gone, unnest(gone.features) AS feature
                GROUP BY feature
            ), kept AS (
                UPDATE {s}.feature_df t SET df = t.df - c.n FROM counts c
                WHERE t.feature = c.feature AND t.df > c.n
                RETURNING 1
            ), dropped AS (
                DELETE FROM {s}.feature_df t USING counts c
                WHERE t.feature = c.feature AND t.df <= c.n
                RETURNING 1
            )
            UPDATE {s}.feature_documents
            SET documents = documents - (SELECT count(*) FROM gone)"""
        ),
        {"ids": array_literal(doc_ids)},
    )
