"""Alembic environment of dedup_store.

Runs on the connection handed over in ``config.attributes["connection"]`` (the store's or the
host application's), or on ``sqlalchemy.url`` from alembic.ini when used from the command line.
Every store lives in its own PostgreSQL schema, named by ``config.attributes["schema"]`` (or the
``dedup_schema`` ini option), which also holds the store's own version table, so a host
application's tables and Alembic history never collide with ours.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, text

config = context.config


def _schema() -> str:
    schema = config.attributes.get("schema") or config.get_main_option("dedup_schema") or "dedup"
    return str(schema)


def _run(connection: Connection) -> None:
    schema = _schema()
    exists = connection.execute(
        text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema}
    ).first()
    if exists is None:
        # only when missing: a role that owns a schema its DBA created may lack CREATE on the
        # database, which CREATE SCHEMA IF NOT EXISTS checks even when the schema is there
        quoted = connection.dialect.identifier_preparer.quote_identifier(schema)
        connection.execute(text(f"CREATE SCHEMA {quoted}"))
    context.configure(
        connection=connection,
        version_table="alembic_version",
        version_table_schema=schema,
        transactional_ddl=True,
    )
    with context.begin_transaction():
        context.run_migrations(schema=schema)


def run_migrations_online() -> None:
    """Run the migrations on the given connection, or on a fresh one from the ini URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url in alembic.ini or use `dedup-store db upgrade`")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("dedup_store migrations run online only (they need the schema name)")
run_migrations_online()
