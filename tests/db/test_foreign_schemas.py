"""Schemas that are not the store's: PostgreSQL's own, names the message does not allow, and a
schema holding another application's Alembic migrations."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from dedup_store import DedupStore, ForeignSchemaError, InvalidNameError, SchemaOutdatedError
from dedup_store.cli import app
from dedup_store.config import schema_name
from dedup_store.db import migrate
from dedup_store.db.schema.names import validate_schema

RESERVED = ["information_schema", "pg_catalog", "pg_toast", "pg_temp_1", "pg_mine", "PG_Stats"]
NOT_PLAIN = ["a$b", "ab$", "a-b", "1ab", "a" * 64]


def run(url: str, schema: str, *args: str) -> tuple[int, str]:
    env = {"DEDUP_STORE_URL": None, "DEDUP_STORE_SCHEMA": None}
    result = CliRunner().invoke(app, ["--db-url", url, "--schema", schema, *args], env=env)
    return result.exit_code, result.stderr


@pytest.mark.parametrize("name", RESERVED + NOT_PLAIN)
def test_one_validator_one_message_one_exit_code(database_url: str, name: str) -> None:
    with pytest.raises(InvalidNameError) as from_names:
        validate_schema(name)
    with pytest.raises(InvalidNameError) as from_config:
        schema_name(name)
    assert str(from_config.value) == str(from_names.value)
    code, stderr = run(database_url, name, "stats")
    assert (code, stderr) == (2, f"error: {from_names.value}\n")


@pytest.mark.parametrize("name", NOT_PLAIN)
def test_a_name_outside_letters_digits_and_underscore_is_refused(name: str) -> None:
    with pytest.raises(InvalidNameError, match="use ASCII letters, digits and _"):
        validate_schema(name)


@pytest.mark.parametrize("name", RESERVED)
def test_postgresql_schemas_are_refused(engine: Engine, name: str) -> None:
    with pytest.raises(InvalidNameError, match="belongs to PostgreSQL"):
        DedupStore(engine, schema=name)
    with engine.connect() as conn:
        tables = conn.execute(
            text("SELECT count(*) FROM pg_tables WHERE schemaname = :name AND tablename = 'edges'"),
            {"name": name},
        ).scalar_one()
    assert tables == 0


def test_plain_names_are_accepted() -> None:
    for name in ["dedup", "public", "_x", "cms_dedup_2", "a" * 63, "Dedup"]:
        assert validate_schema(name) == name


@pytest.fixture
def host_database(engine: Engine) -> Iterator[str]:
    """A new database whose public schema holds a host application's Alembic version table."""
    name = f"host_{uuid.uuid4().hex[:10]}"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(engine.url).set(database=name).render_as_string(hide_password=False)
    host = create_engine(url)
    with host.begin() as conn:
        conn.execute(
            text("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        )
        conn.execute(text("INSERT INTO public.alembic_version VALUES ('host_rev_42')"))
        conn.execute(text("CREATE TABLE public.articles (id int PRIMARY KEY)"))
    host.dispose()
    yield url
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))


def _public_tables(url: str) -> set[str]:
    host = create_engine(url)
    with host.connect() as conn:
        names = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
        found = set(names.scalars())
    host.dispose()
    return found


def test_a_schema_with_another_applications_migrations_is_refused(host_database: str) -> None:
    message = (
        "schema 'public' holds another application's migrations (its alembic_version is at "
        "host_rev_42, no revision of dedup_store): choose another --schema for the store"
    )
    for create in (False, True):
        with pytest.raises(ForeignSchemaError) as info:
            DedupStore(host_database, schema="public", create=create)
        assert str(info.value) == message
    with pytest.raises(ForeignSchemaError):
        migrate.upgrade(host_database, "public")
    for command in (["db", "current"], ["init"], ["stats"], ["db", "upgrade"]):
        code, stderr = run(host_database, "public", *command)
        assert (code, stderr) == (6, f"error: {message}\n"), command
    assert _public_tables(host_database) == {"alembic_version", "articles"}


def test_a_store_of_a_newer_version_is_not_taken_for_another_application(
    engine: Engine, schema: str
) -> None:
    DedupStore(engine, schema=schema).close()
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE \"{schema}\".alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaOutdatedError, match="revision 9999, newer than this code"):
        DedupStore(engine, schema=schema)
