"""``clusters_at()`` says nothing a caller did not ask for.

Its first statement drops the temporary tables of an earlier call, if any; in a session that has
made no temporary table yet PostgreSQL answers it with ``NOTICE: schema "pg_temp" does not
exist, skipping``, which psql shows to whoever calls the function. The function now runs with
``client_min_messages = warning``.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _quoted(name: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(name))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(
        f"ALTER FUNCTION {s}.clusters_at(double precision) SET client_min_messages = warning"
    )


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(f"ALTER FUNCTION {s}.clusters_at(double precision) RESET client_min_messages")
