"""Matches through exact groups: what a document matches, read from the stored edges.

An exact copy is stored as one link to the first document of its exact group
(``documents.exact_of``, and an ``exact`` edge between the two), so k copies cost k rows and
the near-duplicate and excerpt edges of a group hang on one of its members (its first
document, as a rule; a store written before revision 0003 kept its copies' own edges, and a
deleted first document hands its edges to the copy that takes its place). Every member of an
exact group has the same canonical text, so a match of one member is a match of all of them:
reads expand the groups of both ends of each edge.

Between two exact groups, the best stored edge (method first, then the combined score, then
the edge's ids) gives the scores of every pair of their members; inside a group, the best of
its ``exact`` edges gives those of every pair of copies. An ``exact`` edge joins two documents
of the same canonical text (and metadata set), so two members of one group, and any other
edge two groups. The ``duplicate_pairs_expanded`` view (migration 0013) lists the same pairs
for the whole store.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from dedup_store.core.params import FingerprintParams
from dedup_store.db.matches.scoring import combined_score_sql
from dedup_store.db.schema.names import qualified
from dedup_store.results import Method

#: SQL: the position of a method in the order of preference (1: exact).
METHOD_RANK = f"array_position(ARRAY[{', '.join(repr(m.value) for m in Method)}], {{}})"


def similar_statement(schema: str) -> str:
    """The statement of :func:`similar_rows`: one document's matches through the exact groups
    of both ends, best first, a page of them (``:external_id``, ``:meta_weight``, ``:limit``,
    ``:offset``).

    Every step is an index lookup: the document by its external id, its group's members by
    ``exact_of``, their edges from either side (the primary key and ``edges_b``), the other
    ends and their groups' members by id and ``exact_of``.
    """
    s = qualified(schema)
    score = combined_score_sql("t.jaccard", "t.meta_score", ":meta_weight")
    return f"""
        WITH me AS (
            SELECT d.id, coalesce(d.exact_of, d.id) AS first
            FROM {s}.documents d WHERE d.external_id = :external_id
        ),
        mine AS (
            SELECT d.id, d.external_id, d.cluster_id
            FROM me JOIN {s}.documents d ON d.id = me.first
            UNION ALL
            SELECT d.id, d.external_id, d.cluster_id
            FROM me JOIN {s}.documents d ON d.exact_of = me.first
        ),
        touching AS (
            SELECT e.a, e.b, e.b AS other, e.method, e.jaccard, e.containment, e.hamming,
                   e.meta_score
            FROM mine m JOIN {s}.edges e ON e.a = m.id
            UNION ALL
            SELECT e.a, e.b, e.a, e.method, e.jaccard, e.containment, e.hamming, e.meta_score
            FROM mine m JOIN {s}.edges e ON e.b = m.id
        ),
        inside AS (
            SELECT t.method, t.jaccard, t.containment, t.hamming, t.meta_score,
                   {score} AS score
            FROM touching t
            WHERE t.method = 'exact'
            ORDER BY {score} DESC, t.a, t.b
            LIMIT 1
        ),
        outside AS (
            SELECT DISTINCT ON (g.grp) g.grp, t.method, t.jaccard, t.containment, t.hamming,
                   t.meta_score, {score} AS score
            FROM touching t
            JOIN {s}.documents o ON o.id = t.other
            CROSS JOIN LATERAL (SELECT coalesce(o.exact_of, o.id) AS grp) g
            WHERE t.method <> 'exact' AND g.grp <> (SELECT first FROM me)
            ORDER BY g.grp, {METHOD_RANK.format("t.method")}, {score} DESC, t.a, t.b
        ),
        answers AS (
            SELECT m.id, m.external_id, m.cluster_id, b.*
            FROM inside b JOIN mine m ON m.id <> (SELECT id FROM me)
            UNION ALL
            SELECT o.id, o.external_id, o.cluster_id, b.method, b.jaccard, b.containment,
                   b.hamming, b.meta_score, b.score
            FROM outside b JOIN {s}.documents o ON o.id = b.grp
            UNION ALL
            SELECT o.id, o.external_id, o.cluster_id, b.method, b.jaccard, b.containment,
                   b.hamming, b.meta_score, b.score
            FROM outside b JOIN {s}.documents o ON o.exact_of = b.grp
        )
        SELECT id AS doc_id, external_id, cluster_id, method, jaccard, containment, hamming,
               meta_score, score
        FROM answers
        ORDER BY {METHOD_RANK.format("method")}, score DESC, external_id COLLATE "C"
        LIMIT :limit OFFSET :offset
    """


def similar_parameters(
    external_id: str, params: FingerprintParams, limit: int | None = None, offset: int = 0
) -> dict[str, Any]:
    """The parameters of :func:`similar_statement`: the matches of document ``external_id``,
    ``limit`` of them (all: ``None``) after the first ``offset``; its rows are the fields of
    :class:`~dedup_store.results.MatchRow`, best first (:attr:`MatchRow.rank`)."""
    return {
        "external_id": external_id,
        "meta_weight": params.meta_weight,
        "limit": limit,
        "offset": offset,
    }


def exists(conn: Connection, schema: str, external_id: str) -> bool:
    """Whether a document has id ``external_id``."""
    statement = f"SELECT 1 FROM {qualified(schema, 'documents')} WHERE external_id = :id"
    return conn.execute(text(statement), {"id": external_id}).first() is not None
