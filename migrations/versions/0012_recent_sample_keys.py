"""The excerpt keys get tiers too: ``recent_sample_keys``, and the settled filter holds them.

Until this revision every excerpt key was a row of ``sample_keys``, whatever a store had
settled: an ingest probed that table's index for each of a document's excerpt keys (about 70
for a 600-word text), and each probe, like each insert, cost more as the store grew. Now the
excerpt keys of documents written since the last bulk load or settle go to
``recent_sample_keys``, which a settle moves into ``sample_keys``; the filter of the settled
tier (``settled_filter``) holds the keys of ``sample_keys`` as well, so an ingest asks that
table's index only for the keys it may hold.

A filter built before this revision lacks the excerpt keys: it is deleted, and the next settle
or bulk load builds one that has them. The trigger ``sample_keys_changed`` deletes the filter in
any statement that inserts rows into ``sample_keys`` or changes their keys, as
``settled_keys_changed`` does for ``settled_keys`` (an heir taking a deleted document's place
changes only the ``doc_id`` of its rows).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE {s}.recent_sample_keys (
    key integer NOT NULL,
    doc_id bigint NOT NULL
) WITH (autovacuum_analyze_threshold = 10000);
CREATE INDEX recent_sample_keys_lookup ON {s}.recent_sample_keys (key) INCLUDE (doc_id);
CREATE TRIGGER sample_keys_changed AFTER INSERT OR UPDATE OF key ON {s}.sample_keys
FOR EACH STATEMENT EXECUTE FUNCTION {s}.settled_keys_changed();
DELETE FROM {s}.settled_filter;
"""

DOWNGRADE = """
DROP TRIGGER sample_keys_changed ON {s}.sample_keys;
INSERT INTO {s}.sample_keys (key, doc_id) SELECT key, doc_id FROM {s}.recent_sample_keys;
DROP TABLE {s}.recent_sample_keys;
DELETE FROM {s}.settled_filter;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
