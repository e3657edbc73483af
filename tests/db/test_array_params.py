"""Arrays of integers bound in PostgreSQL's binary format, or as lists where a connection lacks
the binary dumpers, with the same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.types.array import ListDumper

from dedup_store.db.server import prepared
from dedup_store.db.server.array_params import Int4Array, Int8Array

pytestmark = pytest.mark.db

INT4 = [
    np.array([], dtype=np.int32),
    np.array([0], dtype=np.int32),
    np.array([-(2**31), -1, 0, 1, 2**31 - 1], dtype=np.int32),
    np.random.default_rng(5).integers(-(2**31), 2**31, size=84, dtype=np.int64).astype(np.int32),
]
INT8 = [
    np.array([], dtype=np.int64),
    np.array([-(2**63), -1, 0, 2**31, 2**63 - 1], dtype=np.int64),
    np.random.default_rng(6).integers(-(2**63), 2**63 - 1, size=22, dtype=np.int64),
]
QUERY = "SELECT CAST($1 AS integer[]), CAST($2 AS bigint[]), cardinality(CAST($1 AS integer[]))"


def _sent(conn: psycopg.Connection[Any], values: list[Any]) -> list[tuple[Any, ...]]:
    with psycopg.RawCursor(conn) as cur:
        cur.execute(QUERY, values)
        return cur.fetchall()


@pytest.mark.parametrize("int4", INT4, ids=["empty", "one", "ends", "signature"])
@pytest.mark.parametrize("int8", INT8, ids=["empty", "ends", "keys"])
def test_arrays_arrive_with_their_values_in_binary_and_as_lists(
    database_url: str, int4: Any, int8: Any
) -> None:
    expected = [(int4.tolist(), int8.tolist(), len(int4))]
    params = [Int4Array(int4), Int8Array(int8)]
    conninfo = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert _sent(conn, params) == expected
        assert prepared.fetch_prepared(conn, QUERY, params, as_tuples=True) == expected
        with psycopg.RawCursor(conn) as cur:
            cur.execute("SELECT pg_typeof($1)::text, pg_typeof($2)::text", params)
            assert cur.fetchone() == ("integer[]", "bigint[]")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        # a connection made before the binary dumpers were registered sends them as lists
        conn.adapters.register_dumper(Int4Array, ListDumper)
        conn.adapters.register_dumper(Int8Array, ListDumper)
        assert _sent(conn, params) == expected
