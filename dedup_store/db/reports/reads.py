"""Reads for the caller: documents by id, clusters, pairs, export and the store's counts."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, text

from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates import hot
from dedup_store.db.candidates.stored import find_documents as find_documents
from dedup_store.db.matches.scoring import combined_score_sql
from dedup_store.db.rows import key_rows
from dedup_store.db.schema import settings
from dedup_store.db.schema.names import qualified
from dedup_store.results import Method

#: Options of the streamed reports: a server-side cursor fetched in chunks. Given per statement,
#: so a caller's Connection keeps its own options.
_STREAM = {"yield_per": 5000}


def cluster_ids(conn: Connection, schema: str, doc_ids: Sequence[int]) -> dict[int, int]:
    """``{document id: cluster id}``."""
    if not doc_ids:
        return {}
    rows = conn.execute(
        text(f"SELECT id, cluster_id FROM {qualified(schema)}.documents WHERE id = ANY(:ids)"),
        {"ids": list(doc_ids)},
    )
    return {row[0]: row[1] for row in rows}


def cluster_rows(
    conn: Connection,
    schema: str,
    label: int | None,
    min_size: int,
    min_similarity: float | None = None,
) -> Iterator[Any]:
    """Members of one cluster (``label``) or of every cluster of ``min_size`` or more; with
    ``min_similarity``, of the clusters over the merging edges of at least that score
    (:func:`stricter_statement`).

    Rows ``(cluster_id, representative, external_id, created_at, canonical)``, grouped by
    cluster, oldest member first.
    """
    s = qualified(schema)
    where = "m.cluster_id = :label" if label is not None else "z.size >= :min_size"
    statement = f"""
        SELECT m.cluster_id, m.representative, m.external_id, m.created_at, z.canonical
        FROM {s}.cluster_members m JOIN {s}.cluster_sizes z ON z.cluster_id = m.cluster_id
        WHERE {where}
        ORDER BY z.first_seen, m.cluster_id, m.doc_id
    """
    if min_similarity is not None:
        statement = stricter_statement(s)
    parameters = {"label": label, "min_size": min_size, "min_similarity": min_similarity}
    result = conn.execute(text(statement), parameters, execution_options=_STREAM)
    try:
        yield from result
    finally:
        result.close()


def document_cluster_statement(schema: str) -> str:
    """The rows of :func:`cluster_rows` of the cluster of document ``:external_id`` (none: no
    such document), in one statement."""
    s = qualified(schema)
    return f"""
        SELECT m.cluster_id, m.representative, m.external_id, m.created_at, z.canonical
        FROM {s}.cluster_members m JOIN {s}.cluster_sizes z ON z.cluster_id = m.cluster_id
        WHERE m.cluster_id = (
            SELECT cluster_id FROM {s}.documents WHERE external_id = :external_id
        )
        ORDER BY m.doc_id
    """


def stricter_statement(s: str) -> str:
    """The statement of :func:`cluster_rows` for clusters at ``:min_similarity`` (the SQL
    function ``clusters_at``) of ``:min_size`` or more members. Each lies inside one stored
    cluster; its canonical document is that cluster's when a member, else its oldest member.
    """
    return f"""
        WITH c AS MATERIALIZED (SELECT * FROM {s}.clusters_at(:min_similarity)),
        z AS (
            SELECT cluster_id, min(doc_id) AS oldest FROM c
            GROUP BY cluster_id HAVING count(*) >= :min_size
        ),
        m AS (
            SELECT c.cluster_id, c.doc_id, d.external_id, d.created_at,
                   bool_or(k.canonical_doc_id = c.doc_id)
                       OVER (PARTITION BY c.cluster_id) AS holds_canonical,
                   k.canonical_doc_id = c.doc_id AS is_canonical,
                   min(d.created_at) OVER (PARTITION BY c.cluster_id) AS first_seen
            FROM c JOIN z ON z.cluster_id = c.cluster_id
            JOIN {s}.documents d ON d.id = c.doc_id
            JOIN {s}.cluster_canonical k ON k.cluster_id = d.cluster_id
        )
        SELECT m.cluster_id, r.external_id, m.external_id, m.created_at,
               coalesce(
                   max(m.external_id) FILTER (WHERE m.is_canonical)
                       OVER (PARTITION BY m.cluster_id),
                   r.external_id)
        FROM m JOIN {s}.documents r ON r.id = m.cluster_id
        ORDER BY m.first_seen, m.cluster_id, m.doc_id
    """


#: The order of ``pairs --pending``: excerpts, then SimHash-only matches, then the rest, each
#: closest to the store's threshold first.
_DOUBT_ORDER = (
    "CASE method WHEN 'containment' THEN 0 WHEN 'simhash' THEN 1 ELSE 2 END, "
    "abs(score - :threshold), a_doc_id, b_doc_id"
)


def pair_rows(
    conn: Connection,
    schema: str,
    params: FingerprintParams,
    min_similarity: float | None = None,
    pending: bool = False,
    expand: bool = False,
) -> Iterator[Any]:
    """Every stored edge with both external ids and its verdict, oldest first; only those of
    at least ``min_similarity``; with ``pending``, only the undecided ones other than exact
    copies, the most doubtful first; with ``expand``, every pair the edges imply through exact
    groups instead (the view ``duplicate_pairs_expanded``).

    Rows of columns named as the fields of :class:`~dedup_store.results.Pair`: ``a, b, method,
    jaccard, containment, hamming, meta_score, score, found_at, excerpt, verdict,
    via_exact_of``.
    """
    where = ["score >= :min_similarity"] if min_similarity is not None else []
    if pending:
        where += ["verdict IS NULL", "method <> 'exact'"]
    view, via = (
        ("duplicate_pairs_expanded", "via_exact_of") if expand else ("duplicate_pairs", "false")
    )
    result = conn.execute(
        text(
            "SELECT a, b, method, jaccard, containment, hamming, meta_score, score, found_at, "
            f"excerpt, verdict, {via} AS via_exact_of FROM {qualified(schema, view)} "
            f"{'WHERE ' + ' AND '.join(where) if where else ''} "
            f"ORDER BY {_DOUBT_ORDER if pending else 'a_doc_id, b_doc_id'}"
        ),
        {"min_similarity": min_similarity, "threshold": params.threshold},
        execution_options=_STREAM,
    )
    try:
        yield from result
    finally:
        result.close()


def export_rows(conn: Connection, schema: str, params: FingerprintParams) -> Iterator[Any]:
    """Every document with its cluster and its best match with an older document:
    ``(id, cluster_id, representative, created_at, meta, match, method, jaccard, meta_score,
    score)`` (the last five ``NULL`` without a match)."""
    s = qualified(schema)
    ranks = ", ".join(f"'{m.value}'" for m in Method)
    result = conn.execute(
        text(
            f"""SELECT d.external_id, d.cluster_id, r.external_id, d.created_at, d.meta,
                   m.external_id, m.method, m.jaccard, m.meta_score, m.score
            FROM {s}.documents d JOIN {s}.documents r ON r.id = d.cluster_id
            LEFT JOIN LATERAL (
                SELECT o.external_id, e.method, e.jaccard, e.meta_score, e.score
                FROM (SELECT e.*,
                             {combined_score_sql("e.jaccard", "e.meta_score", ":meta_weight")}
                                 AS score
                      FROM {s}.edges e WHERE e.b = d.id) e
                JOIN {s}.documents o ON o.id = e.a
                ORDER BY array_position(ARRAY[{ranks}], e.method), e.score DESC, o.external_id
                LIMIT 1
            ) m ON true
            ORDER BY d.id"""
        ),
        {"meta_weight": params.meta_weight},
        execution_options=_STREAM,
    )
    try:
        yield from result
    finally:
        result.close()


def stats_row(conn: Connection, schema: str, params: FingerprintParams) -> dict[str, Any]:
    """Counts over the whole store."""
    s = qualified(schema)
    documents, clusters, dup_clusters, dup_docs = conn.execute(
        text(
            f"""SELECT coalesce(sum(size), 0), count(*), count(*) FILTER (WHERE size > 1),
                       coalesce(sum(size) FILTER (WHERE size > 1), 0)
                FROM (SELECT count(*) AS size FROM {s}.documents GROUP BY cluster_id) c"""
        )
    ).one()
    by_method_rows = conn.execute(text(f"SELECT method, count(*) FROM {s}.edges GROUP BY method"))
    by_method: dict[str, int] = {row[0]: row[1] for row in by_method_rows}
    hottest = conn.execute(
        text(
            f"SELECT d.external_id, h.documents FROM (SELECT key, count(*) AS documents, "
            f"min(doc_id) AS oldest FROM {s}.sample_keys GROUP BY key "
            "ORDER BY count(*) DESC, key LIMIT 5) h "
            f"JOIN {s}.documents d ON d.id = h.oldest ORDER BY h.documents DESC, h.key"
        )
    )
    recent = conn.execute(
        text(f"SELECT count(*) FROM {s}.documents WHERE id > :settled"),
        {"settled": key_rows.settled_through(conn, schema)},
    ).scalar_one()
    verdict_count = conn.execute(text(f"SELECT count(*) FROM {s}.verdicts")).scalar_one()
    return {
        "settings": {**dataclasses.asdict(settings.load(conn, schema)), "verdicts": verdict_count},
        "hottest_excerpt_keys": {
            f"#{rank} in {row[0]}": int(row[1]) for rank, row in enumerate(hottest, 1)
        },
        **hot.hot_stats(conn, schema, params),
        "recent_documents": int(recent),
        "documents": int(documents),
        "clusters": int(clusters),
        "duplicate_clusters": int(dup_clusters),
        "documents_in_duplicate_clusters": int(dup_docs),
        "edges": sum(by_method.values()),
        "edges_by_method": by_method,
        "storage": storage_row(conn, schema),
    }


def storage_row(conn: Connection, schema: str) -> dict[str, int]:
    """Bytes of the store's tables (with their TOAST) and of its indexes, and the server's
    ``shared_buffers``, which the pages that lookups and writes touch at random must fit in."""
    tables, indexes, buffers = conn.execute(
        text(
            "SELECT coalesce(sum(pg_table_size(c.oid)) FILTER (WHERE c.relkind = 'r'), 0), "
            "coalesce(sum(pg_relation_size(c.oid)) FILTER (WHERE c.relkind = 'i'), 0), "
            "pg_size_bytes(current_setting('shared_buffers')) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = :schema"
        ),
        {"schema": schema},
    ).one()
    return {"tables": int(tables), "indexes": int(indexes), "shared_buffers": int(buffers)}


def count_clusters(conn: Connection, schema: str) -> tuple[int, int]:
    """The number of clusters, single documents included, and of those of two documents or
    more, as :func:`stats_row` counts them (without its other counts)."""
    documents = qualified(schema, "documents")
    statement = (
        "SELECT count(*), count(*) FILTER (WHERE size > 1) "
        f"FROM (SELECT count(*) AS size FROM {documents} GROUP BY cluster_id) c"
    )
    every, duplicates = conn.execute(text(statement)).one()
    return int(every), int(duplicates)


def count_documents(conn: Connection, schema: str, limit: int) -> int:
    """The number of stored documents, counting no further than ``limit``."""
    statement = f"SELECT count(*) FROM (SELECT 1 FROM {qualified(schema, 'documents')} LIMIT :n) d"
    return int(conn.execute(text(statement), {"n": limit}).scalar_one())
