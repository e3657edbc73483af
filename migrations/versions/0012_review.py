"""Review: a person's verdicts on pairs, the store's settings, canonical documents, stricter
clusters in SQL.

``verdicts`` holds a reviewer's decision on a pair of documents, keyed by their external ids (so
it outlives a re-ingest or an update of either document): ``not_duplicate`` keeps the pair's
edge out of cluster merging, ``duplicate`` joins the two like a merging edge. ``settings`` holds
the store's choices that are not fingerprint parameters: whether it keeps each document's text,
and the rule that picks each cluster's canonical document; ``canonical_choices`` the documents a
person declared canonical. ``cluster_canonical`` shows each cluster's canonical document;
``duplicate_pairs``, ``cluster_members`` and ``cluster_sizes`` gain a last column for the verdict
and the canonical document. ``clusters_at(min_similarity)`` gives the clusters over the merging
edges whose score is at least ``min_similarity``, with the verdicts applied as the store applies
them (``dedup_store.db.write.verdicts``): no edge between the exact groups of a pair judged not
duplicates, a link between the two documents of a pair judged duplicates.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLES = """
CREATE TABLE {s}.verdicts (
    a text NOT NULL,
    b text NOT NULL,
    verdict text NOT NULL,
    note text,
    reviewer text,
    decided_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (a, b),
    CONSTRAINT verdicts_ordered CHECK (a < b),
    CONSTRAINT verdicts_verdict CHECK (verdict IN ('duplicate', 'not_duplicate'))
);
CREATE INDEX verdicts_b ON {s}.verdicts (b);

CREATE TABLE {s}.settings (
    id smallint PRIMARY KEY,
    keep_text boolean NOT NULL DEFAULT false,
    canonical_rule text NOT NULL DEFAULT 'oldest',
    CONSTRAINT settings_single_row CHECK (id = 1)
);
INSERT INTO {s}.settings (id, keep_text)
SELECT 1, EXISTS (SELECT 1 FROM {s}.documents WHERE body IS NOT NULL);

CREATE TABLE {s}.canonical_choices (
    external_id text PRIMARY KEY,
    reviewer text,
    chosen_at timestamptz NOT NULL DEFAULT now()
);
"""

VIEWS = """
CREATE OR REPLACE VIEW {s}.duplicate_pairs AS
SELECT da.external_id AS a, db.external_id AS b, e.method, e.jaccard, e.containment,
       e.hamming, e.found_at, e.a AS a_doc_id, e.b AS b_doc_id,
       CASE WHEN e.method = 'containment' THEN
            CASE WHEN db.shingle_count <= da.shingle_count THEN db.external_id
                 ELSE da.external_id END
       END AS excerpt,
       e.meta_score,
       CASE WHEN e.meta_score IS NULL THEN e.jaccard
            ELSE (1 - w.weight) * e.jaccard + w.weight * e.meta_score END AS score,
       v.verdict
FROM {s}.edges e
JOIN {s}.documents da ON da.id = e.a
JOIN {s}.documents db ON db.id = e.b
LEFT JOIN (SELECT (params ->> 'meta_weight')::float8 AS weight FROM {s}.params) w ON true
LEFT JOIN {s}.verdicts v
       ON v.a = least(da.external_id, db.external_id)
      AND v.b = greatest(da.external_id, db.external_id);

CREATE VIEW {s}.cluster_canonical AS
SELECT DISTINCT ON (d.cluster_id)
       d.cluster_id, d.external_id AS canonical, d.id AS canonical_doc_id,
       CASE WHEN c.external_id IS NOT NULL THEN 'declared' ELSE r.rule END AS chosen
FROM {s}.documents d
CROSS JOIN (
    SELECT canonical_rule AS rule, split_part(canonical_rule, ':', 2) AS field,
           canonical_rule LIKE 'meta\\:%\\:min' AS smallest
    FROM {s}.settings WHERE id = 1
) r
LEFT JOIN {s}.canonical_choices c ON c.external_id = d.external_id
ORDER BY d.cluster_id,
         c.chosen_at DESC NULLS LAST,
         CASE WHEN r.rule = 'longest' THEN d.length END DESC NULLS LAST,
         CASE WHEN r.rule LIKE 'meta\\:%' AND NOT r.smallest THEN d.meta -> r.field END
             DESC NULLS LAST,
         CASE WHEN r.smallest THEN d.meta -> r.field END ASC NULLS LAST,
         d.id;

CREATE OR REPLACE VIEW {s}.cluster_members AS
SELECT d.cluster_id, r.external_id AS representative, d.external_id, d.id AS doc_id,
       d.created_at, d.id = d.cluster_id AS is_representative,
       d.id = c.canonical_doc_id AS is_canonical
FROM {s}.documents d
JOIN {s}.documents r ON r.id = d.cluster_id
JOIN {s}.cluster_canonical c ON c.cluster_id = d.cluster_id;

CREATE OR REPLACE VIEW {s}.cluster_sizes AS
SELECT d.cluster_id, r.external_id AS representative, count(*) AS size,
       min(d.created_at) AS first_seen, max(d.created_at) AS last_seen,
       c.canonical
FROM {s}.documents d
JOIN {s}.documents r ON r.id = d.cluster_id
JOIN {s}.cluster_canonical c ON c.cluster_id = d.cluster_id
GROUP BY d.cluster_id, r.external_id, c.canonical;

CREATE FUNCTION {s}.clusters_at(min_similarity double precision)
RETURNS TABLE (doc_id bigint, external_id text, cluster_id bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    changed bigint;
BEGIN
    DROP TABLE IF EXISTS pg_temp.clusters_at_links, pg_temp.clusters_at_labels;
    CREATE TEMP TABLE clusters_at_links ON COMMIT DROP AS
    WITH vetoed AS (
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
    )
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

DOWNGRADE = """
DROP FUNCTION {s}.clusters_at(double precision);
DROP VIEW {s}.cluster_sizes;
DROP VIEW {s}.cluster_members;
DROP VIEW {s}.cluster_canonical;
DROP VIEW {s}.duplicate_pairs;
CREATE VIEW {s}.duplicate_pairs AS
SELECT da.external_id AS a, db.external_id AS b, e.method, e.jaccard, e.containment,
       e.hamming, e.found_at, e.a AS a_doc_id, e.b AS b_doc_id,
       CASE WHEN e.method = 'containment' THEN
            CASE WHEN db.shingle_count <= da.shingle_count THEN db.external_id
                 ELSE da.external_id END
       END AS excerpt,
       e.meta_score,
       CASE WHEN e.meta_score IS NULL THEN e.jaccard
            ELSE (1 - w.weight) * e.jaccard + w.weight * e.meta_score END AS score
FROM {s}.edges e
JOIN {s}.documents da ON da.id = e.a
JOIN {s}.documents db ON db.id = e.b
LEFT JOIN (SELECT (params ->> 'meta_weight')::float8 AS weight FROM {s}.params) w ON true;

CREATE VIEW {s}.cluster_members AS
SELECT d.cluster_id, r.external_id AS representative, d.external_id, d.id AS doc_id,
       d.created_at, d.id = d.cluster_id AS is_representative
FROM {s}.documents d
JOIN {s}.documents r ON r.id = d.cluster_id;

CREATE VIEW {s}.cluster_sizes AS
SELECT d.cluster_id, r.external_id AS representative, count(*) AS size,
       min(d.created_at) AS first_seen, max(d.created_at) AS last_seen
FROM {s}.documents d
JOIN {s}.documents r ON r.id = d.cluster_id
GROUP BY d.cluster_id, r.external_id;

DROP TABLE {s}.canonical_choices;
DROP TABLE {s}.settings;
DROP TABLE {s}.verdicts;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(TABLES.format(s=s))
    op.execute(VIEWS.format(s=s))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
