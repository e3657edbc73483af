"""Band and block keys move into ``documents``, looked up through one hash index per slot.

Each document's band keys and SimHash block keys become two ``bigint[]`` columns of its own row
instead of one row per key in ``band_keys`` / ``block_keys``: a key costs an index entry and no
heap tuple of its own. The per-slot hash indexes (``documents_band_1``, ...) depend on the store's
fingerprint parameters, so the store creates them when it opens (see
``dedup_store.db.schema.ddl.create_key_indexes``), not this migration.

The exact-hash index becomes a hash index too (it only serves equality), and ANALYZE stops
sampling the wide array columns, which are never filtered on directly.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE {s}.documents
    ADD COLUMN band_keys bigint[] NOT NULL DEFAULT '{{}}',
    ADD COLUMN block_keys bigint[] NOT NULL DEFAULT '{{}}';

UPDATE {s}.documents d SET band_keys = g.keys
FROM (SELECT doc_id, array_agg(key ORDER BY band) AS keys
      FROM {s}.band_keys GROUP BY doc_id) g
WHERE g.doc_id = d.id;

UPDATE {s}.documents d SET block_keys = g.keys
FROM (SELECT doc_id, array_agg(key ORDER BY block) AS keys
      FROM {s}.block_keys GROUP BY doc_id) g
WHERE g.doc_id = d.id;

ALTER TABLE {s}.documents
    ALTER COLUMN band_keys DROP DEFAULT,
    ALTER COLUMN block_keys DROP DEFAULT,
    ALTER COLUMN signature SET STATISTICS 0,
    ALTER COLUMN shingles SET STATISTICS 0,
    ALTER COLUMN band_keys SET STATISTICS 0,
    ALTER COLUMN block_keys SET STATISTICS 0,
    ALTER COLUMN meta SET STATISTICS 0,
    ALTER COLUMN body SET STATISTICS 0;

DROP TABLE {s}.band_keys;
DROP TABLE {s}.block_keys;

DROP INDEX {s}.documents_exact_hash;
CREATE INDEX documents_exact_hash ON {s}.documents USING hash (exact_hash);
"""

# revision 0001's key table of one kind: one row per key, slots numbered from 0
KEY_TABLE = """
CREATE TABLE {s}.{kind}_keys (
    {kind} smallint NOT NULL,
    key bigint NOT NULL,
    doc_id bigint NOT NULL
);
INSERT INTO {s}.{kind}_keys ({kind}, key, doc_id)
SELECT u.slot - 1, u.key, d.id
FROM {s}.documents d, unnest(d.{kind}_keys) WITH ORDINALITY AS u(key, slot);
CREATE INDEX {kind}_keys_lookup ON {s}.{kind}_keys ({kind}, key) INCLUDE (doc_id);
"""

DOWNGRADE = """
DROP INDEX {s}.documents_exact_hash;
CREATE INDEX documents_exact_hash ON {s}.documents (exact_hash);

ALTER TABLE {s}.documents
    DROP COLUMN band_keys,
    DROP COLUMN block_keys,
    ALTER COLUMN signature SET STATISTICS -1,
    ALTER COLUMN shingles SET STATISTICS -1,
    ALTER COLUMN meta SET STATISTICS -1,
    ALTER COLUMN body SET STATISTICS -1;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    for kind in ("band", "block"):
        op.execute(KEY_TABLE.format(s=s, kind=kind))
    # dropping the columns drops the per-slot indexes on them
    op.execute(DOWNGRADE.format(s=s))
