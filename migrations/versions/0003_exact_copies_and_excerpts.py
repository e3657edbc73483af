"""Exact copies point at their group's first document; excerpts are shown with their direction.

``documents.exact_of`` holds the id of the oldest stored document with the same exact hash (NULL
for that first document itself). A copy is linked to the first document by one edge and has no
key of its own in the lookup indexes (the per-slot key indexes become partial, ``WHERE exact_of
IS NULL``; the store recreates them when it opens), so k copies cost k rows, not k² edges.
Existing copies are marked and lose their sample keys; their existing edges stay.

``duplicate_pairs`` gains ``excerpt``: for a containment match, the external id of the smaller
document (the excerpt of the other). ``duplicates_per_day`` counts excerpt-only documents apart.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE {s}.documents ADD COLUMN exact_of bigint;
UPDATE {s}.documents d SET exact_of = f.first
FROM (SELECT exact_hash, min(id) AS first FROM {s}.documents GROUP BY exact_hash
      HAVING count(*) > 1) f
WHERE d.exact_hash = f.exact_hash AND d.id <> f.first;
CREATE INDEX documents_exact_of ON {s}.documents (exact_of) WHERE exact_of IS NOT NULL;
DELETE FROM {s}.sample_keys k USING {s}.documents d
WHERE d.id = k.doc_id AND d.exact_of IS NOT NULL;
"""

DROP_KEY_INDEXES = """
SELECT format('DROP INDEX %I.%I', schemaname, indexname)
FROM pg_indexes
WHERE schemaname = :schema AND tablename = 'documents'
  AND (indexname LIKE 'documents\\_band\\_%' OR indexname LIKE 'documents\\_block\\_%')
"""

DOWNGRADE = """
DROP INDEX {s}.documents_exact_of;
ALTER TABLE {s}.documents DROP COLUMN exact_of;
"""

VIEWS = """
DROP VIEW {s}.duplicate_pairs;
DROP VIEW {s}.duplicates_per_day;

CREATE VIEW {s}.duplicate_pairs AS
SELECT da.external_id AS a, db.external_id AS b, e.method, e.jaccard, e.containment,
       e.hamming, e.found_at, e.a AS a_doc_id, e.b AS b_doc_id,
       CASE WHEN e.method = 'containment' THEN
            CASE WHEN db.shingle_count <= da.shingle_count THEN db.external_id
                 ELSE da.external_id END
       END AS excerpt
FROM {s}.edges e
JOIN {s}.documents da ON da.id = e.a
JOIN {s}.documents db ON db.id = e.b;

CREATE VIEW {s}.duplicates_per_day AS
SELECT date_trunc('day', d.created_at)::date AS day,
       count(*) AS documents,
       count(*) FILTER (WHERE m.best = 'exact') AS exact_duplicates,
       count(*) FILTER (WHERE m.best = 'near') AS near_duplicates,
       count(*) FILTER (WHERE m.best IS NULL) AS new_documents,
       count(*) FILTER (WHERE m.best = 'excerpt') AS excerpts
FROM {s}.documents d
LEFT JOIN LATERAL (
    SELECT CASE WHEN bool_or(e.method = 'exact') THEN 'exact'
                WHEN bool_or(e.method <> 'containment') THEN 'near'
                WHEN count(*) > 0 THEN 'excerpt' END AS best
    FROM {s}.edges e WHERE e.b = d.id
) m ON true
GROUP BY 1;
"""

OLD_VIEWS = """
DROP VIEW {s}.duplicate_pairs;
DROP VIEW {s}.duplicates_per_day;

CREATE VIEW {s}.duplicate_pairs AS
SELECT da.external_id AS a, db.external_id AS b, e.method, e.jaccard, e.containment,
       e.hamming, e.found_at, e.a AS a_doc_id, e.b AS b_doc_id
FROM {s}.edges e
JOIN {s}.documents da ON da.id = e.a
JOIN {s}.documents db ON db.id = e.b;

CREATE VIEW {s}.duplicates_per_day AS
SELECT date_trunc('day', d.created_at)::date AS day,
       count(*) AS documents,
       count(*) FILTER (WHERE m.best = 'exact') AS exact_duplicates,
       count(*) FILTER (WHERE m.best = 'near') AS near_duplicates,
       count(*) FILTER (WHERE m.best IS NULL) AS new_documents
FROM {s}.documents d
LEFT JOIN LATERAL (
    SELECT CASE WHEN bool_or(e.method = 'exact') THEN 'exact'
                WHEN count(*) > 0 THEN 'near' END AS best
    FROM {s}.edges e WHERE e.b = d.id
) m ON true
GROUP BY 1;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def _drop_key_indexes(schema: str) -> None:
    bind = op.get_bind()
    for (statement,) in bind.execute(text(DROP_KEY_INDEXES), {"schema": schema}).all():
        bind.execute(text(statement))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    _drop_key_indexes(schema)
    op.execute(UPGRADE.format(s=s))
    op.execute(VIEWS.format(s=s))


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(OLD_VIEWS.format(s=s))
    _drop_key_indexes(schema)  # partial: the store recreates them on open
    op.execute(DOWNGRADE.format(s=s))
