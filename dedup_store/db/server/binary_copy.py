"""Bulk loads with COPY in PostgreSQL's binary format, built with numpy.

Key rows are fixed-width (smallint/integer/bigint columns), so a whole batch of them is laid out as
one numpy structured array in the binary COPY row format and sent in a single write, without a
Python loop over rows. Document rows put their fixed-width columns (ids, hashes, the signature
array) first, encoded the same way for the whole batch; only the variable-width fields are
appended per document.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import pq, sql

from dedup_store.db.server.engine import driver_connection

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
COPY_TRAILER = struct.pack("!h", -1)
INT4_OID = 23
INT8_OID = 20
_WIDTH = {np.dtype(np.int16): 2, np.dtype(np.int32): 4, np.dtype(np.int64): 8}


def copy_fixed_rows(
    conn: Any,
    schema: str,
    table: str,
    columns: Sequence[str],
    values: Sequence[npt.NDArray[Any]],
    freeze: bool = False,
) -> None:
    """COPY rows whose columns are all int16/int32/int64 numpy arrays of equal length
    (``freeze``: as :func:`copy_payload`)."""
    if len(values[0]) == 0:
        return
    _copy(conn, schema, table, columns, fixed_rows(values), freeze)


def fixed_rows(values: Sequence[npt.NDArray[Any]]) -> bytes:
    """Binary COPY tuples of columns that are all int16/int32/int64 numpy arrays of equal
    length."""
    n = len(values[0])
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i, column in enumerate(values):
        width = _WIDTH[column.dtype]
        fields += [(f"len{i}", ">i4"), (f"val{i}", f">i{width}")]
    rows = np.empty(n, dtype=np.dtype(fields))
    rows["count"] = len(values)
    for i, column in enumerate(values):
        rows[f"len{i}"] = _WIDTH[column.dtype]
        rows[f"val{i}"] = column
    return rows.tobytes()


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


def copy_payload(
    conn: Any, schema: str, table: str, columns: Sequence[str], payload: bytes, freeze: bool = False
) -> None:
    """COPY rows already encoded as binary COPY tuples.

    With ``freeze`` (a table emptied by ``TRUNCATE`` in the same transaction, and no savepoint
    since), the rows are written frozen and their pages all-visible: the VACUUM that follows a
    large load has nothing to do on them.
    """
    if payload:
        _copy(conn, schema, table, columns, payload, freeze)


def fixed_prefix(
    count: int | None, columns: Sequence[tuple[npt.NDArray[Any], npt.DTypeLike]]
) -> bytes:
    """Fixed-width fields of many rows, one row after another.

    Each row starts with the tuple's field count (``count`` fields in all; the caller appends
    the variable-width ones after each row's prefix), then each column's length and value.

    Args:
        count: number of fields of the whole tuple; ``None``: no count (fields that go
            further into the row).
        columns: ``(values, big-endian dtype)`` per column, e.g. ``(ids, ">i8")``.
    """
    layout: list[tuple[str, Any]] = [] if count is None else [("count", ">i2")]
    for i, (_, dtype) in enumerate(columns):
        layout += [(f"l{i}", ">i4"), (f"v{i}", dtype)]
    rows = np.empty(len(columns[0][0]), dtype=np.dtype(layout))
    if count is not None:
        rows["count"] = count
    for i, (values, dtype) in enumerate(columns):
        rows[f"l{i}"] = np.dtype(dtype).itemsize
        rows[f"v{i}"] = values
    return rows.tobytes()


def array_matrix(values: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], np.dtype[Any]]:
    """Each row of a 2-D int32 or int64 array as a binary ``integer[]`` or ``bigint[]`` value.

    Returns:
        ``(values, dtype)``, a column for :func:`fixed_prefix`.
    """
    n, width = values.shape
    size = _WIDTH[values.dtype]
    element = np.dtype([("len", ">i4"), ("val", f">i{size}")])
    dtype = np.dtype([("head", ">i4", (5,)), ("elems", element, (width,))])
    out = np.empty(n, dtype=dtype)
    out["head"] = np.array([1, 0, INT4_OID if size == 4 else INT8_OID, width, 1])
    out["elems"]["len"] = size
    out["elems"]["val"] = values
    return out, dtype


def int4_array_fields(values: npt.NDArray[Any], offsets: npt.NDArray[np.int64]) -> list[bytes]:
    """``integer[]`` fields (length first) of ``values[offsets[i]:offsets[i + 1]]`` for each i."""
    counts = np.diff(offsets)
    headers = np.empty(len(counts), dtype=[("len", ">i4"), ("head", ">i4", (5,))])
    headers["len"] = 20 + 8 * counts
    headers["head"] = np.array([1, 0, INT4_OID, 0, 1])
    headers["head"][:, 3] = counts
    body = np.empty(len(values), dtype=[("len", ">i4"), ("val", ">i4")])
    body["len"] = 4
    body["val"] = values
    head_bytes, body_bytes = headers.tobytes(), body.tobytes()
    bounds = (offsets * 8).tolist()
    return [
        head_bytes[24 * i : 24 * i + 24] + body_bytes[bounds[i] : bounds[i + 1]]
        for i in range(len(counts))
    ]


def _copy(
    conn: Any, schema: str, table: str, columns: Sequence[str], payload: bytes, freeze: bool = False
) -> None:
    options = sql.SQL(", FREEZE" if freeze else "")
    statement = sql.SQL("COPY {}.{} ({}) FROM STDIN (FORMAT BINARY{})").format(
        sql.Identifier(schema),
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        options,
    )
    raw = driver_connection(conn)
    with raw.cursor() as cur, cur.copy(statement) as copy:
        if not send_copy_data(raw.pgconn, COPY_HEADER, payload):
            copy.write(COPY_HEADER)
            copy.write(payload)
        copy.write(COPY_TRAILER)


def send_copy_data(pgconn: pq.abc.PGconn, head: bytes, data: bytes) -> bool:
    """Send ``head`` and ``data`` as one ``CopyData`` message of a ``COPY FROM STDIN`` under way
    on ``pgconn``, straight to its Unix socket, in blocking writes that hold the interpreter lock
    only between the two of them. Returns whether it did: only on a thread other than the main
    one, on a Unix socket (never encrypted), with nothing of libpq's own still to send.

    psycopg hands libpq 128 kB at a time and waits for the socket every megabyte; a Unix socket
    takes about 200 kB, and each time it drains, the waiting thread must take the interpreter
    lock back. While another thread of the process keeps the lock busy (a bulk load stages the
    next batch on the calling thread as the lane thread writes this one), each of those dozens
    of hand-overs per batch waits for it: a 4.8 MB COPY of 5,000 documents took 150 ms beside
    a busy thread against 24 ms alone, and 60 ms sent this way. The protocol allows it: libpq
    only passes a COPY's data on, and its ``CopyDone`` follows as usual.

    The main thread is left to psycopg: a signal handler there (Ctrl-C) could cut a write off
    in the middle of the message, and the server would then wait for the rest of it while the
    client waits for its answer. Should a write fail anyway, the socket is shut down, so the
    connection fails rather than hangs.
    """
    if (
        threading.current_thread() is threading.main_thread()
        or pgconn.ssl_in_use
        or pgconn.flush() != 0
        or not hasattr(socket, "AF_UNIX")
    ):
        return False
    with socket.socket(fileno=os.dup(pgconn.socket)) as sock:
        if sock.family != socket.AF_UNIX:
            return False
        sock.setblocking(True)  # the descriptor is libpq's too: non-blocking again below
        try:
            sock.sendall(b"d" + struct.pack("!i", 4 + len(head) + len(data)) + head)
            sock.sendall(data)
        except BaseException:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            raise
        finally:
            sock.setblocking(False)
    return True
