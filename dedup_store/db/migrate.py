"""Migrating a store given a URL, an engine or a connection (``docs/embedding.md`` documents
:func:`upgrade`). The migrations and what they run on one connection live in
:mod:`dedup_store.db.schema.migrate`; opening the store's connection is the server room's, so
these calls, which need both, stand above the two."""

from __future__ import annotations

from dedup_store.db.schema.ddl import DEFAULT_SCHEMA
from dedup_store.db.schema.migrate import (
    alembic_config,
    current_revision,
    head,
    upgrade_connection,
)
from dedup_store.db.server.engine import Bind, Database

__all__ = ["alembic_config", "current", "downgrade", "head", "upgrade"]


def upgrade(bind: Bind, schema: str = DEFAULT_SCHEMA, revision: str = "head") -> None:
    """Create or upgrade the store's schema to ``revision``."""
    with Database(bind, schema) as db, db.transaction() as conn:
        upgrade_connection(conn, schema, revision)


def downgrade(bind: Bind, schema: str = DEFAULT_SCHEMA, revision: str = "base") -> None:
    """Downgrade the store's schema to ``revision`` (``base`` drops every table)."""
    from alembic import command

    with Database(bind, schema) as db, db.transaction() as conn:
        current_revision(conn, schema)
        command.downgrade(alembic_config(conn, schema), revision)


def current(bind: Bind, schema: str = DEFAULT_SCHEMA) -> str | None:
    """The store's current revision, or ``None`` when the schema has no store."""
    with Database(bind, schema) as db, db.transaction() as conn:
        return current_revision(conn, schema)
