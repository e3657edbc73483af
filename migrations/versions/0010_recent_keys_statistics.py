"""The recent tier's table is analyzed only once it holds thousands of rows.

The store's connections plan a statement once, and a plan made while the planner's statistics
said ``recent_keys`` held a few rows scanned the whole table for every key of a batch, a cost
that grew with each row inserted until the table was analyzed again. A settle or a bulk load no
longer analyzes the table it has just emptied, and ``recent_keys`` gets
``autovacuum_analyze_threshold = 10000`` (``dedup_store.db.schema.ddl.RECENT_STORAGE``), which the
store sets when it creates the table, or this revision for a store that has it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE IF EXISTS {s}.recent_keys SET (autovacuum_analyze_threshold = 10000);
"""

DOWNGRADE = """
ALTER TABLE IF EXISTS {s}.recent_keys RESET (autovacuum_analyze_threshold);
"""


def _quoted(schema: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(schema))


def upgrade(schema: str = "dedup") -> None:
    op.execute(UPGRADE.format(s=_quoted(schema)))


def downgrade(schema: str = "dedup") -> None:
    op.execute(DOWNGRADE.format(s=_quoted(schema)))
