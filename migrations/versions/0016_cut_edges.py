"""``cut_edges``: the match edges a ``not_duplicate`` verdict cut, so that it always separates.

Until 0015 a verdict that two documents are not duplicates removed the edges between their two
exact groups only: two exact copies, or two documents still joined through others, stayed in
one cluster. The store now parts each such pair by a minimum cut of the match graph, weighted by
the edges' scores (``dedup_store.core.separation``), and records the edges each verdict cut here.
``clusters_at()`` leaves them out, so a pair judged not duplicates is apart at every similarity.
A store with verdicts is brought in line with the rule when it next opens.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TABLE = """
CREATE TABLE {s}.cut_edges (
    a bigint NOT NULL REFERENCES {s}.documents (id) ON DELETE CASCADE,
    b bigint NOT NULL REFERENCES {s}.documents (id) ON DELETE CASCADE,
    verdict_a text NOT NULL,
    verdict_b text NOT NULL,
    PRIMARY KEY (a, b),
    FOREIGN KEY (verdict_a, verdict_b) REFERENCES {s}.verdicts (a, b) ON DELETE CASCADE
);
CREATE INDEX cut_edges_b ON {s}.cut_edges (b);
CREATE INDEX cut_edges_verdict ON {s}.cut_edges (verdict_a, verdict_b);
"""

#: ``clusters_at`` as 0012 made it, with the links it takes given as ``{links}``.
FUNCTION = """
CREATE OR REPLACE FUNCTION {s}.clusters_at(min_similarity double precision)
RETURNS TABLE (doc_id bigint, external_id text, cluster_id bigint)
LANGUAGE plpgsql VOLATILE SET client_min_messages = warning AS $$
DECLARE
    changed bigint;
BEGIN
    DROP TABLE IF EXISTS pg_temp.clusters_at_links, pg_temp.clusters_at_labels;
    CREATE TEMP TABLE clusters_at_links ON COMMIT DROP AS
    {links}
    SELECT x, y FROM merging UNION SELECT y, x FROM merging;
    CREATE TEMP TABLE clusters_at_labels ON COMMIT DROP AS
    SELECT DISTINCT x AS id, x AS label FROM pg_temp.clusters_at_links;
    CREATE UNIQUE INDEX ON pg_temp.clusters_at_labels (id);
    LOOP
        UPDATE pg_temp.clusters_at_labels l SET label = m.label
        FROM (
            SELECT k.x AS id, min(n.label) AS label
            FROM pg_temp.clusters_at_links k
            JOIN pg_temp.clusters_at_labels n ON n.id = k.y
            GROUP BY k.x
        ) m
        WHERE l.id = m.id AND m.label < l.label;
        GET DIAGNOSTICS changed = ROW_COUNT;
        EXIT WHEN changed = 0;
        UPDATE pg_temp.clusters_at_labels l SET label = p.label
        FROM pg_temp.clusters_at_labels p WHERE p.id = l.label AND p.label < l.label;
    END LOOP;
    RETURN QUERY
    SELECT d.id, d.external_id, coalesce(l.label, d.id)
    FROM {s}.documents d LEFT JOIN pg_temp.clusters_at_labels l ON l.id = d.id;
END
$$;
"""

#: The merging edges of at least ``min_similarity`` that no verdict cut, and the confirmed pairs.
LINKS = """WITH merging AS (
        SELECT p.a_doc_id AS x, p.b_doc_id AS y
        FROM {s}.duplicate_pairs p CROSS JOIN {s}.params
        WHERE p.score >= min_similarity
          AND (p.method <> 'containment'
               OR coalesce((params.params ->> 'containment_merges')::boolean, false))
          AND NOT EXISTS (
              SELECT 1 FROM {s}.cut_edges c
              WHERE c.a = least(p.a_doc_id, p.b_doc_id) AND c.b = greatest(p.a_doc_id, p.b_doc_id))
        UNION
        SELECT da.id, db.id FROM {s}.verdicts v
        JOIN {s}.documents da ON da.external_id = v.a
        JOIN {s}.documents db ON db.external_id = v.b
        WHERE v.verdict = 'duplicate'
    )"""

#: The links of 0012: no edge between the exact groups of a pair judged not duplicates.
OLD_LINKS = """WITH vetoed AS (
        SELECT least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g1,
               greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g2
        FROM {s}.verdicts v
        JOIN {s}.documents da ON da.external_id = v.a
        JOIN {s}.documents db ON db.external_id = v.b
        WHERE v.verdict = 'not_duplicate'
    ),
    merging AS (
        SELECT p.a_doc_id AS x, p.b_doc_id AS y
        FROM {s}.duplicate_pairs p CROSS JOIN {s}.params
        JOIN {s}.documents da ON da.id = p.a_doc_id
        JOIN {s}.documents db ON db.id = p.b_doc_id
        WHERE p.score >= min_similarity
          AND (p.method <> 'containment'
               OR coalesce((params.params ->> 'containment_merges')::boolean, false))
          AND NOT EXISTS (
              SELECT 1 FROM vetoed t
              WHERE t.g1 = least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id))
                AND t.g2 = greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id))
                AND t.g1 <> t.g2)
        UNION
        SELECT da.id, db.id FROM {s}.verdicts v
        JOIN {s}.documents da ON da.external_id = v.a
        JOIN {s}.documents db ON db.external_id = v.b
        WHERE v.verdict = 'duplicate'
    )"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(TABLE.format(s=s))
    op.execute(FUNCTION.format(s=s, links=LINKS.format(s=s)))


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(FUNCTION.format(s=s, links=OLD_LINKS.format(s=s)))
    op.execute(f"DROP TABLE {s}.cut_edges")
