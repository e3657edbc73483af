"""Metadata sets (``meta_fields``): their signatures, and the scores of a pair with them.

``documents.meta_signature`` holds the MinHash signature of a document's metadata set (``NULL``:
no metadata set, or a store without ``meta_fields``). ``edges`` gain ``meta_score``, the
agreement of the two signatures (``NULL`` unless both documents have one, as for every edge
stored before). ``duplicate_pairs`` shows it and ``score``, the combined score, derived from
the Jaccard, ``meta_score`` and the store's ``meta_weight`` (the Jaccard without a
``meta_score``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE {s}.documents ADD COLUMN meta_signature integer[];
ALTER TABLE {s}.edges ADD COLUMN meta_score double precision;

CREATE OR REPLACE VIEW {s}.duplicate_pairs AS
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
"""

DOWNGRADE = """
DROP VIEW {s}.duplicate_pairs;
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

ALTER TABLE {s}.edges DROP COLUMN meta_score;
ALTER TABLE {s}.documents DROP COLUMN meta_signature;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
