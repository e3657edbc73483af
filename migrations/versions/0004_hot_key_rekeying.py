"""Hot band and block keys, and the secondary keys that split their buckets.

``hot_keys`` lists the band and SimHash block keys (``kind`` 0 and 1, with their slot) shared by
more than ``hot_key_limit`` documents. Every stored document owning a hot key has its secondary
keys for that slot in ``secondary_keys`` (:mod:`dedup_store.core.rekey`): a new document owning
the key looks its slot up there, a bounded probe per secondary key. Existing stores start with
no hot key; a key becomes hot the next time a write meets it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE {s}.hot_keys (
    kind smallint NOT NULL,
    slot smallint NOT NULL,
    key bigint NOT NULL,
    PRIMARY KEY (kind, slot, key)
);
CREATE TABLE {s}.secondary_keys (
    kind smallint NOT NULL,
    slot smallint NOT NULL,
    key bigint NOT NULL,
    doc_id bigint NOT NULL
);
CREATE INDEX secondary_keys_lookup ON {s}.secondary_keys (kind, slot, key, doc_id);
CREATE INDEX secondary_keys_doc_id ON {s}.secondary_keys (doc_id);
"""

DOWNGRADE = """
DROP TABLE {s}.secondary_keys;
DROP TABLE {s}.hot_keys;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
