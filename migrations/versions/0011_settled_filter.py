"""A filter of the settled tier's keys, dropped whenever keys enter that tier.

``settled_filter`` holds a split block Bloom filter (:mod:`dedup_store.core.keyfilter`) of every
band and block key of ``settled_keys``, cut into parts of at most 16 MB, and the
``settled_through`` it was built for. A settle or a bulk load builds it after the settled
tier's indexes; an ingest asks the settled tier only for the keys the filter may hold, and
skips the index probes of the others (almost every key of a new document).

A filter that misses a settled key would lose matches, so the trigger ``settled_keys_changed``
deletes the filter in any statement that inserts or updates rows of ``settled_keys`` (such as
the heirs of a deleted document taking its place); it is created with ``settled_keys``, which
the store creates when it opens, or here for a store that has it. Deleted rows only leave keys
the filter still passes, which costs a probe and nothing else.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE {s}.settled_filter (
    part integer PRIMARY KEY,
    settled_through bigint NOT NULL,
    build bigint NOT NULL,
    keys bigint NOT NULL,
    words bytea NOT NULL
);
ALTER TABLE {s}.settled_filter ALTER COLUMN words SET STORAGE EXTERNAL;
CREATE FUNCTION {s}.settled_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DELETE FROM %I.settled_filter', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
"""

# the statement of dedup_store.db.candidates.tier_rows.create_key_tables
TRIGGER = """
CREATE TRIGGER settled_keys_changed AFTER INSERT OR UPDATE ON {s}.settled_keys
FOR EACH STATEMENT EXECUTE FUNCTION {s}.settled_keys_changed();
"""

DOWNGRADE = """
DROP TRIGGER IF EXISTS settled_keys_changed ON {s}.settled_keys;
DROP FUNCTION {s}.settled_keys_changed();
DROP TABLE {s}.settled_filter;
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(UPGRADE.format(s=s))
    settled = op.get_bind().exec_driver_sql(
        "SELECT to_regclass(%(settled)s) IS NOT NULL", {"settled": f"{s}.settled_keys"}
    )
    if settled.scalar_one():
        op.execute(TRIGGER.format(s=s))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
