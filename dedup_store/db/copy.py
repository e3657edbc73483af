"""Bulk loads with COPY in PostgreSQL's binary format, built with numpy.

Key rows are fixed-width (smallint/integer/bigint columns), so a whole batch of them is laid out as
one numpy structured array in the binary COPY row format and sent in a single write, without a
Python loop over rows. Integer arrays (signatures, shingle sets) are encoded per document with
numpy as well.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from dedup_store.db.engine import driver_connection

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
COPY_TRAILER = struct.pack("!h", -1)
INT4_OID = 23
_WIDTH = {np.dtype(np.int16): 2, np.dtype(np.int32): 4, np.dtype(np.int64): 8}


def copy_fixed_rows(
    conn: Any, schema: str, table: str, columns: Sequence[str], values: Sequence[npt.NDArray[Any]]
) -> None:
    """COPY rows whose columns are all int16/int32/int64 numpy arrays of equal length."""
    n = len(values[0])
    if n == 0:
        return
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i, column in enumerate(values):
        width = _WIDTH[column.dtype]
        fields += [(f"len{i}", ">i4"), (f"val{i}", f">i{width}")]
    rows = np.empty(n, dtype=np.dtype(fields))
    rows["count"] = len(values)
    for i, column in enumerate(values):
        rows[f"len{i}"] = _WIDTH[column.dtype]
        rows[f"val{i}"] = column
    _copy(conn, schema, table, columns, rows.tobytes())


def int4_array(values: npt.NDArray[Any]) -> bytes:
    """A one-dimensional ``integer[]`` in binary COPY form (without the field length)."""
    n = len(values)
    body = np.empty(n, dtype=[("len", ">i4"), ("val", ">i4")])
    body["len"] = 4
    body["val"] = values
    return struct.pack("!iiiii", 1, 0, INT4_OID, n, 1) + body.tobytes()


def field(data: bytes | None) -> bytes:
    """One binary COPY field: its length then its bytes (``None`` is NULL)."""
    if data is None:
        return struct.pack("!i", -1)
    return struct.pack("!i", len(data)) + data


def jsonb(value: Any) -> bytes | None:
    """A jsonb field value (version byte 1, then the JSON text)."""
    if value is None:
        return None
    return b"\x01" + json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def copy_records(
    conn: Any, schema: str, table: str, columns: Sequence[str], rows: list[bytes]
) -> None:
    """COPY rows already encoded as binary COPY tuples (field count, then fields)."""
    if rows:
        _copy(conn, schema, table, columns, b"".join(rows))


def record(fields: Sequence[bytes]) -> bytes:
    """A binary COPY tuple from encoded fields (see :func:`field`)."""
    return struct.pack("!h", len(fields)) + b"".join(fields)


def _copy(conn: Any, schema: str, table: str, columns: Sequence[str], payload: bytes) -> None:
    statement = sql.SQL("COPY {}.{} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(schema),
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
    )
    with driver_connection(conn).cursor() as cur, cur.copy(statement) as copy:
        copy.write(COPY_HEADER)
        copy.write(payload)
        copy.write(COPY_TRAILER)
