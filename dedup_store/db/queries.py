"""Reads: params, the one-statement candidate lookup of ``check``, and the reporting queries."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from sqlalchemy import Connection, TextClause, text

from dedup_store.core.fingerprint import Fingerprint
from dedup_store.core.params import FingerprintParams
from dedup_store.db import hot
from dedup_store.db.candidates import BAND, BLOCK, slot_lookup, sparse_excerpt_keys, top32
from dedup_store.db.names import qualified
from dedup_store.db.verify import (
    QUERY_INTERSECTION,
    array_literal,
    fetch_document,
    score_parameters,
    scored_pairs_sql,
)

#: Options of the streamed reports: a server-side cursor fetched in chunks. Given per statement,
#: so a caller's Connection keeps its own options.
_STREAM = {"yield_per": 5000}


@dataclasses.dataclass(frozen=True)
class MatchRow:
    """A verified match of a query or stored document with a stored document."""

    doc_id: int
    external_id: str
    cluster_id: int
    method: str
    jaccard: float
    containment: float
    hamming: int


def load_params(conn: Connection, schema: str) -> FingerprintParams | None:
    """The params the store was created with, or ``None`` before they are saved."""
    row = conn.execute(text(f"SELECT params FROM {qualified(schema)}.params WHERE id = 1")).first()
    return None if row is None else FingerprintParams.from_stored(row[0])


def save_params(conn: Connection, schema: str, params: FingerprintParams) -> None:
    """Record the store's params (once)."""
    conn.execute(
        text(f"INSERT INTO {qualified(schema)}.params (id, params) VALUES (1, CAST(:p AS jsonb))"),
        {"p": params.to_json()},
    )


def _key_lookups(s: str, band_count: int, block_count: int, hot_limit: int) -> list[str]:
    """One index probe per band and block slot of the query (parameters ``k{kind}_{slot}``).

    With ``hot_limit``, a probe keeps the ``hot_limit`` oldest documents of the key, as
    :func:`~dedup_store.db.candidates.find_candidates` does.
    """
    branches = []
    for kind, count in ((BAND, band_count), (BLOCK, block_count)):
        block = "true" if kind == BLOCK else "false"
        for slot in range(1, count + 1):
            lookup = slot_lookup(s, kind, slot, f"= CAST(:k{kind}_{slot} AS bigint)")
            if hot_limit:
                # OFFSET 0 keeps the key's hash index scan: without it the planner may walk
                # the primary key in id order and filter every row
                lookup = f"SELECT * FROM ({lookup} OFFSET 0) l ORDER BY id LIMIT {int(hot_limit)}"
            branches.append(
                f"SELECT f.id AS a, {block} AS block, false AS sample, {kind}::smallint AS kind, "
                f"{slot}::smallint AS slot, CAST(:k{kind}_{slot} AS bigint) AS pkey "
                f"FROM ({lookup}) f"
            )
    return branches


def _sample_lookup(s: str, hot_limit: int) -> str:
    """The excerpt-key probes of the query (parameter ``sk``); hot keys are ignored."""
    if not hot_limit:
        return f"""SELECT o.doc_id AS a, false AS block, true AS sample
                   FROM unnest(CAST(:sk AS integer[])) AS n(key)
                   CROSS JOIN LATERAL (SELECT k.doc_id FROM {s}.sample_keys k
                                       WHERE k.key = n.key OFFSET 0) o"""
    return f"""SELECT o.doc_id AS a, false AS block, true AS sample
               FROM (SELECT DISTINCT key FROM unnest(CAST(:sk AS integer[])) AS u(key)) n
               CROSS JOIN LATERAL (
                   SELECT l.doc_id, count(*) OVER () AS found
                   FROM (SELECT k.doc_id FROM {s}.sample_keys k WHERE k.key = n.key
                         LIMIT {int(hot_limit) + 1}) l
               ) o
               WHERE o.found < {int(hot_limit)}"""


@lru_cache(maxsize=32)
def found_sql(
    schema: str,
    band_count: int,
    block_count: int,
    hot_limit: int = 0,
    secondary: tuple[int, int] = (0, 0),
) -> str:
    """The candidate lookups of :func:`matches_sql`: rows ``(a, block, sample, kind, slot,
    pkey)``, the last three naming the band or block key a row was found by (``NULL`` for
    other rows)."""
    s = qualified(schema)
    exact = (
        f"SELECT o.id, false, false FROM {s}.documents o "
        "WHERE o.exact_hash = CAST(:exact AS bytea) AND o.exact_of IS NULL"
    )
    others = [_sample_lookup(s, hot_limit), exact]
    if hot_limit and any(secondary):
        others.append(hot.secondary_lookup(s, hot_limit))
    branches = _key_lookups(s, band_count, block_count, hot_limit) + [
        "SELECT o.*, NULL::smallint AS kind, NULL::smallint AS slot, NULL::bigint AS pkey "
        f"FROM ({other}) o"
        for other in others
    ]
    return " UNION ALL ".join(branches)


@lru_cache(maxsize=32)
def matches_sql(
    schema: str,
    band_count: int,
    block_count: int,
    hot_limit: int = 0,
    secondary: tuple[int, int] = (0, 0),
    found: str = "",
) -> str:
    """A query of the verified matches of an unstored fingerprint given in bind parameters.

    Rows ``(a, external_id, cluster_id, method, jaccard, containment, hamming)``; the
    parameters are :func:`fingerprint_parameters`. ``secondary`` gives the secondary keys per
    band and per block slot (:func:`~dedup_store.db.hot.secondary_counts`): a hot slot is also
    looked up by them. ``found`` names a CTE of the statement holding the rows of
    :func:`found_sql` (by default they are looked up inline).
    """
    s = qualified(schema)
    query = """(SELECT 0::bigint AS id, CAST(:exact AS bytea) AS exact_hash,
                       CAST(:simhash AS bigint) AS simhash,
                       CAST(:signature AS integer[]) AS signature,
                       CAST(:shingles AS integer[]) AS shingles,
                       CAST(:shingle_count AS integer) AS shingle_count) y"""
    rows = found or f"({found_sql(schema, band_count, block_count, hot_limit, secondary)})"
    candidates = f"""(
        SELECT a, bool_and(block) AS block_only, bool_or(sample) AS sampled
        FROM {rows} found GROUP BY a
    ) cand"""
    scored = scored_pairs_sql(
        f"{candidates} {fetch_document(s, 'x', 'cand.a')} CROSS JOIN {query}",
        QUERY_INTERSECTION,
    )
    return f"""
        WITH query_shingles AS MATERIALIZED (
            SELECT DISTINCT unnest(CAST(:shingles AS integer[])) AS sh
        )
        SELECT j.a, d.external_id, d.cluster_id, j.method, j.jaccard, j.containment, j.hamming
        FROM ({scored}) j JOIN {s}.documents d ON d.id = j.a
        WHERE j.method IS NOT NULL
    """


@lru_cache(maxsize=32)
def _check_statement(
    schema: str, band_count: int, block_count: int, hot_limit: int, secondary: tuple[int, int]
) -> TextClause:
    """The statement of :func:`check_matches` (built once: it is long and parsed for binds)."""
    return text(matches_sql(schema, band_count, block_count, hot_limit, secondary))


def fingerprint_parameters(fp: Fingerprint) -> dict[str, Any]:
    """The bind parameters of :func:`matches_sql` for ``fp``."""
    parameters: dict[str, Any] = {
        "exact": fp.exact_hash,
        "simhash": int(np.uint64(fp.simhash).view(np.int64)),
        "signature": array_literal(fp.signature.view(np.int32).tolist()),
        "shingles": array_literal(top32(fp.shingles).tolist()),
        "shingle_count": len(fp.shingles),
        "sk": array_literal(
            sparse_excerpt_keys(top32(fp.sample_keys), fp.params.max_excerpt_keys).tolist()
        ),
        **score_parameters(fp.params),
    }
    for kind, keys in ((BAND, fp.band_keys), (BLOCK, fp.block_keys)):
        parameters.update({f"k{kind}_{i}": key for i, key in enumerate(keys.tolist(), start=1)})
    parameters.update(hot.query_parameters(fp))
    return parameters


def check_statement(schema: str, fp: Fingerprint) -> tuple[str, dict[str, Any]]:
    """The statement of :func:`check_matches` and its ``:name`` parameters."""
    statement = _check_statement(
        schema,
        len(fp.band_keys),
        len(fp.block_keys),
        fp.params.hot_key_limit,
        hot.secondary_counts(fp.params),
    )
    return statement.text, fingerprint_parameters(fp)


def check_matches(conn: Connection, schema: str, fp: Fingerprint) -> list[MatchRow]:
    """Verified matches of an unstored fingerprint: ONE statement, candidates and scores."""
    statement = _check_statement(
        schema,
        len(fp.band_keys),
        len(fp.block_keys),
        fp.params.hot_key_limit,
        hot.secondary_counts(fp.params),
    )
    return [MatchRow(*row) for row in conn.execute(statement, fingerprint_parameters(fp))]


def stored_matches(conn: Connection, schema: str, doc_id: int) -> list[MatchRow]:
    """The stored edges of one document, from either side."""
    s = qualified(schema)
    rows = conn.execute(
        text(
            f"""SELECT o.id, o.external_id, o.cluster_id, e.method, e.jaccard, e.containment,
                   e.hamming
            FROM {s}.edges e
            JOIN {s}.documents o ON o.id = CASE WHEN e.a = :id THEN e.b ELSE e.a END
            WHERE e.a = :id OR e.b = :id"""
        ),
        {"id": doc_id},
    )
    return [MatchRow(*row) for row in rows]


def find_documents(conn: Connection, schema: str, external_ids: Sequence[str]) -> dict[str, int]:
    """``{external id: internal id}`` for the stored ones among ``external_ids``."""
    rows = conn.execute(
        text(
            f"SELECT external_id, id FROM {qualified(schema, 'documents')} "
            "WHERE external_id = ANY(:ids)"
        ),
        {"ids": list(external_ids)},
    )
    return {row[0]: row[1] for row in rows}


def cluster_ids(conn: Connection, schema: str, doc_ids: Sequence[int]) -> dict[int, int]:
    """``{document id: cluster id}``."""
    if not doc_ids:
        return {}
    rows = conn.execute(
        text(f"SELECT id, cluster_id FROM {qualified(schema)}.documents WHERE id = ANY(:ids)"),
        {"ids": list(doc_ids)},
    )
    return {row[0]: row[1] for row in rows}


def cluster_rows(conn: Connection, schema: str, label: int | None, min_size: int) -> Iterator[Any]:
    """Members of one cluster (``label``) or of every cluster of ``min_size`` or more.

    Rows ``(cluster_id, representative, external_id, created_at)``, grouped by cluster, oldest
    member first.
    """
    s = qualified(schema)
    where = "m.cluster_id = :label" if label is not None else "z.size >= :min_size"
    statement = f"""
        SELECT m.cluster_id, m.representative, m.external_id, m.created_at
        FROM {s}.cluster_members m JOIN {s}.cluster_sizes z ON z.cluster_id = m.cluster_id
        WHERE {where}
        ORDER BY z.first_seen, m.cluster_id, m.doc_id
    """
    result = conn.execute(
        text(statement), {"label": label, "min_size": min_size}, execution_options=_STREAM
    )
    try:
        yield from result
    finally:
        result.close()


def pair_rows(conn: Connection, schema: str) -> Iterator[Any]:
    """Every stored edge with both external ids, oldest first."""
    result = conn.execute(
        text(
            "SELECT a, b, method, jaccard, containment, hamming, found_at, excerpt "
            f"FROM {qualified(schema, 'duplicate_pairs')} ORDER BY a_doc_id, b_doc_id"
        ),
        execution_options=_STREAM,
    )
    try:
        yield from result
    finally:
        result.close()


def export_rows(conn: Connection, schema: str) -> Iterator[Any]:
    """Every document with its cluster: ``(id, cluster_id, representative, created_at, meta)``."""
    s = qualified(schema)
    result = conn.execute(
        text(
            f"""SELECT d.external_id, d.cluster_id, r.external_id, d.created_at, d.meta
            FROM {s}.documents d JOIN {s}.documents r ON r.id = d.cluster_id ORDER BY d.id"""
        ),
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
            f"SELECT key, count(*) FROM {s}.sample_keys GROUP BY key "
            "ORDER BY count(*) DESC, key LIMIT 5"
        )
    )
    return {
        "hottest_excerpt_keys": {str(row[0]): int(row[1]) for row in hottest},
        **hot.hot_stats(conn, schema, params),
        "documents": int(documents),
        "clusters": int(clusters),
        "duplicate_clusters": int(dup_clusters),
        "documents_in_duplicate_clusters": int(dup_docs),
        "edges": sum(by_method.values()),
        "edges_by_method": by_method,
    }
