"""Shared fixtures: a real PostgreSQL server (never a mock), a fresh schema per test.

The server comes from ``DEDUP_STORE_TEST_URL`` (default: the local test database). Database
tests fail, never skip, when it cannot be reached.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, event, text

from dedup_store import DedupStore, FingerprintParams
from dedup_store.config import normalize_url
from dedup_store.db.server import prepared

DEFAULT_TEST_URL = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def database_url() -> str:
    """SQLAlchemy URL of the test server."""
    return normalize_url(os.environ.get("DEDUP_STORE_TEST_URL", DEFAULT_TEST_URL))


@pytest.fixture(scope="session")
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on the test server; fails loudly when the server is not there."""
    eng = create_engine(database_url)
    try:
        with eng.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as e:  # pragma: no cover - only when the server is missing
        pytest.fail(f"cannot reach the test PostgreSQL server at {database_url}: {e}")
    yield eng
    eng.dispose()


def drop_schema(engine: Engine, name: str) -> None:
    """Drop a test schema and everything in it."""
    with engine.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))


@pytest.fixture
def schema(engine: Engine) -> Iterator[str]:
    """A schema name nobody uses; dropped after the test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(engine, name)


@pytest.fixture
def store(engine: Engine, schema: str) -> Iterator[DedupStore]:
    """A new store with default params in its own schema."""
    with DedupStore(engine, FingerprintParams(), schema=schema) as s:
        yield s


class SqlRecorder:
    """Collects the SQL statements an engine sends."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def queries(self) -> list[str]:
        """Statements other than transaction control."""
        control = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
        return [s for s in self.statements if not s.lstrip().upper().startswith(control)]


@pytest.fixture
def sql_recorder(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[SqlRecorder]:
    """Records every statement sent through ``engine`` during the test, including those the
    store sends on the engine's psycopg connections with native placeholders, through a cursor
    or prepared by name (:mod:`dedup_store.db.server.prepared`)."""
    recorder = SqlRecorder()

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        recorder.statements.append(statement)

    native_execute = psycopg.RawCursor.execute

    def record_native(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        recorder.statements.append(str(query))
        return native_execute(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.RawCursor, "execute", record_native)
    bound = prepared._bound

    def record_prepared(raw: Any, on: Any, query: str, values: Any) -> Any:
        recorder.statements.append(query)
        return bound(raw, on, query, values)

    monkeypatch.setattr(prepared, "_bound", record_prepared)
    event.listen(engine, "before_cursor_execute", record)
    yield recorder
    event.remove(engine, "before_cursor_execute", record)


def refuse_ids_starting_with_bad(engine: Engine, schema: str) -> None:
    """A trigger on the store's ``documents`` that refuses every id starting with ``bad`` (its
    error names the id): a write that fails inside the store's own statement."""
    s = f'"{schema}"'
    with engine.begin() as conn:
        conn.execute(
            text(
                f"CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "IF NEW.external_id LIKE 'bad%' THEN RAISE EXCEPTION 'refused %', "
                "NEW.external_id; END IF; RETURN NEW; END $$"
            )
        )
        conn.execute(
            text(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {s}.documents "
                f"FOR EACH ROW EXECUTE FUNCTION {s}.refuse()"
            )
        )
