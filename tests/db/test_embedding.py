"""Embedding in a host application: the store works inside the host's transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, inspect, text

from dedup_store import DedupStore, InvalidDocumentError, Status

TEXT = (
    "The city council approved the new budget on Tuesday after a long debate about "
    "road repairs, school funding and the renovation of the central library building."
)


def test_rolled_back_host_transaction_leaves_nothing(engine: Engine, schema: str) -> None:
    with engine.connect() as conn:
        host = conn.begin()
        store = DedupStore(conn, schema=schema)
        assert store.add("a", TEXT).status is Status.NEW
        assert store.add("b", TEXT).status is Status.EXACT_DUPLICATE
        assert store.stats().documents == 2
        host.rollback()
    assert schema not in inspect(engine).get_schema_names()


def test_store_never_commits_the_host_transaction(engine: Engine, schema: str) -> None:
    DedupStore(engine, schema=schema).close()
    with engine.connect() as conn:
        host = conn.begin()
        conn.execute(text("CREATE TEMP TABLE host_work (x int)"))
        store = DedupStore(conn, schema=schema)
        store.add("a", TEXT)
        with engine.connect() as other:
            count = other.execute(text(f'SELECT count(*) FROM "{schema}".documents')).scalar()
        assert count == 0
        assert conn.in_transaction()
        host.commit()
    with engine.connect() as other:
        assert other.execute(text(f'SELECT count(*) FROM "{schema}".documents')).scalar() == 1


def test_failed_call_keeps_host_transaction_usable(engine: Engine, schema: str) -> None:
    with engine.connect() as conn:
        host = conn.begin()
        store = DedupStore(conn, schema=schema)
        store.add("a", TEXT)
        with pytest.raises(InvalidDocumentError, match="NUL"):
            store.add("b", "\x00 bad")
        assert store.stats().documents == 1
        assert conn.execute(text("SELECT 1")).scalar() == 1
        host.rollback()


def test_the_callers_psycopg_connection_as_django_holds_one(
    engine: Engine, schema: str, database_url: str
) -> None:
    """A psycopg 3 connection in the caller's transaction: the store's rows go with the host's,
    a bad call leaves the transaction usable, and the store never commits or closes it."""
    import psycopg

    from dedup_store import DatabaseError

    DedupStore(engine, schema=schema).close()
    conninfo = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo) as raw:
        raw.execute("CREATE TEMP TABLE pages (id text)")
        raw.execute("INSERT INTO pages VALUES ('page-1')")
        store = DedupStore(raw, schema=schema)
        assert store.add("a", TEXT).status is Status.NEW
        assert raw.execute("SELECT count(*) FROM pages").fetchone() == (1,)  # the host's work
        with pytest.raises(InvalidDocumentError):
            store.add("bad", "nul \x00 byte")
        assert store.check(TEXT).status is Status.EXACT_DUPLICATE
        raw.rollback()  # the host's: the page and the fingerprint go together
        assert store.check(TEXT).status is Status.NEW
        raw.execute("CREATE TEMP TABLE pages (id text)")
        raw.execute("INSERT INTO pages VALUES ('page-1')")
        DedupStore(raw, schema=schema).add("a", TEXT)  # a new store on it: the page stays
        assert raw.execute("SELECT count(*) FROM pages").fetchone() == (1,)
        raw.commit()
        store.close()
        assert not raw.closed
    with engine.connect() as other:
        assert other.execute(text(f'SELECT count(*) FROM "{schema}".documents')).scalar() == 1
    with psycopg.connect(conninfo, autocommit=True) as raw, pytest.raises(DatabaseError):
        DedupStore(raw, schema=schema)
