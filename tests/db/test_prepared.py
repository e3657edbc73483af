"""Single-document calls on the store's own connections: statements prepared by name there, a
failed call leaving nothing behind and the connection going on."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from dedup_store import DatabaseError, DedupStore
from dedup_store.db.server.prepared import fetch_locked, fetch_prepared
from tests.conftest import refuse_ids_starting_with_bad

TEXT = "The quarterly report shows revenue rising in every region the company serves today."
EDIT = "The quarterly report shows revenue rising in every region the company serves now."


def test_failed_adds_and_checks_leave_nothing_and_the_calls_go_on(
    engine: Engine, schema: str
) -> None:
    # an add is its locks, its statement and the commit in one pipelined round trip: a refused
    # one is rolled back whole, and the store's connection serves the next call
    with DedupStore(engine, schema=schema) as store:
        store.add("a", TEXT)
        refuse_ids_starting_with_bad(engine, schema)
        for n in range(12):
            body = f"Document {n} tells about rivers, lakes and {n * 7} boats on the water."
            if n % 3 == 0:
                with pytest.raises(DatabaseError, match=f"refused bad{n}"):
                    store.add(f"bad{n}", body)
            else:
                assert store.add(f"ok{n}", body).status.value == "new"
            assert store.check(body).status.value == ("new" if n % 3 == 0 else "exact_duplicate")
        with engine.begin() as conn:
            conn.execute(text(f'ALTER TABLE "{schema}".documents RENAME TO gone'))
        with pytest.raises(DatabaseError) as caught:
            store.check(TEXT)
        assert caught.value.sqlstate == "42P01"  # undefined_table
        with engine.begin() as conn:
            conn.execute(text(f'ALTER TABLE "{schema}".gone RENAME TO documents'))
        assert store.add("last", EDIT).status.value == "near_duplicate"
        assert [row["id"] for row in store.export()] == [
            "a",
            *(f"ok{n}" for n in range(12) if n % 3),
            "last",
        ]
    with engine.connect() as conn:
        orphans = conn.execute(
            text(
                f'SELECT count(*) FROM (SELECT doc_id FROM "{schema}".slot_keys UNION ALL '
                f'SELECT doc_id FROM "{schema}".recent_slot_keys) k WHERE NOT EXISTS '
                f'(SELECT 1 FROM "{schema}".documents d WHERE d.id = k.doc_id)'
            )
        ).scalar_one()
    assert orphans == 0  # no key rows of a refused add


@pytest.fixture
def raw(database_url: str) -> Any:
    with psycopg.connect(database_url.replace("+psycopg", ""), autocommit=True) as conn:
        yield conn


def test_a_statement_is_prepared_once_for_each_set_of_parameter_types_and_again_if_lost(
    raw: Any,
) -> None:
    query = "SELECT $1::bigint + 1 AS n, CAST($2 AS integer[]) AS a"
    assert fetch_prepared(raw, query, [1, "{1,2}"]) == [{"n": 2, "a": [1, 2]}]
    assert fetch_prepared(raw, query, [41, None]) == [{"n": 42, "a": None}]
    assert fetch_prepared(raw, query, [2**40, "{}"], as_tuples=True) == [(2**40 + 1, [])]
    prepared = raw.execute(
        "SELECT count(*) FROM pg_prepared_statements WHERE statement = %s", [query]
    ).fetchone()
    assert prepared == (2,)  # (smallint, unknown) twice, then (bigint, unknown)
    raw.execute("DEALLOCATE ALL")  # as psycopg's own rollback does
    assert fetch_prepared(raw, query, [1, None]) == [{"n": 2, "a": None}]


def test_a_failed_locked_statement_rolls_back_and_the_connection_goes_on(raw: Any) -> None:
    raw.execute("CREATE TEMP TABLE kept (n integer PRIMARY KEY)")
    lock = ("SELECT pg_advisory_xact_lock($1::bigint)", [7])
    insert = "INSERT INTO kept VALUES ($1::integer), ($2::integer) RETURNING n"
    assert fetch_locked(raw, lock, insert, [1, 2]) == [{"n": 1}, {"n": 2}]
    with pytest.raises(psycopg.errors.UniqueViolation):
        fetch_locked(raw, lock, insert, [3, 1])
    assert raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with pytest.raises(psycopg.errors.DivisionByZero):
        fetch_locked(raw, ("SELECT 1 / ($1::integer - 7)", [7]), insert, [4, 5])
    assert fetch_locked(raw, lock, insert, [6, 7]) == [{"n": 6}, {"n": 7}]
    held = raw.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    ).fetchone()
    assert held == (0,)  # each transaction's lock went with it
    assert [r[0] for r in raw.execute("SELECT n FROM kept ORDER BY n")] == [1, 2, 6, 7]
