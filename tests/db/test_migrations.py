"""Migrations: empty -> head -> base -> head, and the migrated schema equals the models."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from dedup_store import DedupStore, SchemaOutdatedError, StoreNotInitializedError
from dedup_store.db import migrate
from dedup_store.db.schema import VIEWS, build_metadata


def _tables(engine: Engine, schema: str) -> set[str]:
    return set(inspect(engine).get_table_names(schema=schema))


def _diff(engine: Engine, schema: str) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "include_schemas": True,
                "include_name": lambda name, type_, parent: type_ != "schema" or name == schema,
                "include_object": lambda obj, name, type_, reflected, compare_to: (
                    name != "alembic_version"
                ),
            },
        )
        return list(compare_metadata(context, build_metadata(schema)))


def test_upgrade_downgrade_upgrade(engine: Engine, schema: str) -> None:
    assert migrate.current(engine, schema) is None
    migrate.upgrade(engine, schema)
    assert migrate.current(engine, schema) == migrate.head()
    expected = {"params", "documents", "band_keys", "block_keys", "sample_keys", "edges"}
    assert expected <= _tables(engine, schema)
    assert set(VIEWS) <= set(inspect(engine).get_view_names(schema=schema))

    migrate.downgrade(engine, schema, "base")
    assert _tables(engine, schema) == {"alembic_version"}
    assert inspect(engine).get_view_names(schema=schema) == []

    migrate.upgrade(engine, schema)
    assert migrate.current(engine, schema) == migrate.head()


def test_migrated_schema_equals_models(engine: Engine, schema: str) -> None:
    migrate.upgrade(engine, schema)
    assert _diff(engine, schema) == []


def test_open_without_store_and_create_false(engine: Engine, schema: str) -> None:
    with pytest.raises(StoreNotInitializedError, match="dedup-store init"):
        DedupStore(engine, schema=schema, create=False)


def test_schema_behind_code_names_upgrade_command(engine: Engine, schema: str) -> None:
    DedupStore(engine, schema=schema).close()
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE \"{schema}\".alembic_version SET version_num = '0000'"))
    with pytest.raises(SchemaOutdatedError, match="dedup-store db upgrade"):
        DedupStore(engine, schema=schema)


def test_our_tables_stay_in_our_schema(engine: Engine, schema: str) -> None:
    before = set(inspect(engine).get_table_names(schema="public"))
    DedupStore(engine, schema=schema).close()
    assert set(inspect(engine).get_table_names(schema="public")) == before
