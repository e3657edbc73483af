"""Every implied duplicate pair: ``duplicate_pairs_expanded``.

An exact copy is stored as one link to the first document of its exact group (k copies cost k
rows), and a near-duplicate or excerpt edge joins one member of each group, so
``duplicate_pairs`` (one row per stored edge) has no row for a copy and the documents its
group's first document matches. ``duplicate_pairs_expanded`` has a row for every pair the
stored edges imply: the copies of a group with each other, and every member of a group with
every member of each group it matches. A pair takes the scores of the best stored edge between
the two groups (method first, then the combined score, then the edge's ids). Its columns are
those of ``duplicate_pairs``, then ``via_exact_of``: false for a pair with a stored edge of its
own (so those rows are the pairs of ``duplicate_pairs``), true for a pair implied through exact
copies. ``verdict`` is the one given on the pair, else one given on another pair of the same
two exact groups (``not_duplicate`` first), as clusters apply them: copies of a text share its
verdicts. Nothing is stored: the view expands at read time.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE VIEW {s}.duplicate_pairs_expanded AS
WITH grouped AS (
    SELECT e.a, e.b, e.method, e.jaccard, e.containment, e.hamming, e.found_at, e.meta_score,
           CASE WHEN e.meta_score IS NULL THEN e.jaccard
                ELSE (1 - w.weight) * e.jaccard + w.weight * e.meta_score END AS score,
           least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g1,
           greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g2
    FROM {s}.edges e
    JOIN {s}.documents da ON da.id = e.a
    JOIN {s}.documents db ON db.id = e.b
    LEFT JOIN (SELECT (params ->> 'meta_weight')::float8 AS weight FROM {s}.params) w ON true
),
best AS (
    SELECT DISTINCT ON (g1, g2) *
    FROM grouped
    ORDER BY g1, g2,
             array_position(ARRAY['exact', 'minhash', 'simhash', 'containment'], method),
             score DESC, a, b
),
left_ends AS (
    SELECT p.*, x.id AS x_id, x.external_id AS x_external_id, x.shingle_count AS x_size
    FROM best p JOIN {s}.documents x ON x.id = p.g1
    UNION ALL
    SELECT p.*, x.id, x.external_id, x.shingle_count
    FROM best p JOIN {s}.documents x ON x.exact_of = p.g1
),
both_ends AS (
    SELECT l.*, y.id AS y_id, y.external_id AS y_external_id, y.shingle_count AS y_size
    FROM left_ends l JOIN {s}.documents y ON y.id = l.g2
    UNION ALL
    SELECT l.*, y.id, y.external_id, y.shingle_count
    FROM left_ends l JOIN {s}.documents y ON y.exact_of = l.g2
),
group_verdicts AS (
    SELECT least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g1,
           greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g2,
           max(v.verdict) AS verdict
    FROM {s}.verdicts v
    JOIN {s}.documents da ON da.external_id = v.a
    JOIN {s}.documents db ON db.external_id = v.b
    WHERE coalesce(da.exact_of, da.id) <> coalesce(db.exact_of, db.id)
    GROUP BY 1, 2
),
ends AS (
    SELECT g1, g2, method, jaccard, containment, hamming, found_at, meta_score, score,
           least(x_id, y_id) AS a_doc_id, greatest(x_id, y_id) AS b_doc_id,
           CASE WHEN x_id < y_id THEN x_external_id ELSE y_external_id END AS a,
           CASE WHEN x_id < y_id THEN y_external_id ELSE x_external_id END AS b,
           CASE WHEN x_id < y_id THEN x_size ELSE y_size END AS a_size,
           CASE WHEN x_id < y_id THEN y_size ELSE x_size END AS b_size
    FROM both_ends
    WHERE g1 <> g2 OR x_id < y_id
)
SELECT n.a, n.b, n.method, n.jaccard, n.containment, n.hamming, n.found_at, n.a_doc_id,
       n.b_doc_id,
       CASE WHEN n.method = 'containment' THEN
            CASE WHEN n.b_size <= n.a_size THEN n.b ELSE n.a END
       END AS excerpt,
       n.meta_score, n.score, coalesce(v.verdict, g.verdict) AS verdict,
       own.a IS NULL AS via_exact_of
FROM ends n
LEFT JOIN {s}.edges own ON own.a = n.a_doc_id AND own.b = n.b_doc_id
LEFT JOIN {s}.verdicts v ON v.a = least(n.a, n.b) AND v.b = greatest(n.a, n.b)
LEFT JOIN group_verdicts g ON g.g1 = n.g1 AND g.g2 = n.g2;
"""

DOWNGRADE = """
DROP VIEW {s}.duplicate_pairs_expanded;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
