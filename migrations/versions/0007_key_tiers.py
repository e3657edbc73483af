"""Two tiers of key indexes: settled documents, and those added since.

Every band and block slot has two partial indexes on ``documents``: the settled one over the
documents with ``id <= key_tiers.settled_through`` and the recent one over those added after.
Incremental writes only ever touch the recent indexes, which stay small; a bulk load or
``dedup-store db settle`` builds the settled ones again over every document and empties the
recent ones. A store upgraded to this revision takes its documents as settled: its key
indexes (without an id bound) serve as the settled ones until the next bulk load or settle,
and the store creates the recent ones when it opens.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE {s}.key_tiers (
    id smallint PRIMARY KEY,
    settled_through bigint NOT NULL,
    settled_at timestamp with time zone NOT NULL DEFAULT now(),
    CONSTRAINT key_tiers_single_row CHECK (id = 1)
);
INSERT INTO {s}.key_tiers (id, settled_through)
SELECT 1, coalesce(max(id), 0) FROM {s}.documents;
"""

DOWNGRADE = """
DO $$
DECLARE
    found regclass;
BEGIN
    -- the key indexes of both tiers: the store at 0006 builds its own again when it opens
    FOR found IN
        SELECT i.indexrelid::regclass FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = CAST('{s}.documents' AS regclass)
          AND c.relname ~ '^documents_(band|block)_[0-9]+(_recent)?$'
    LOOP
        EXECUTE 'DROP INDEX ' || found::text;
    END LOOP;
END $$;
DROP TABLE {s}.key_tiers;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
