"""Single-document statements prepared by name on the store's own connections, run through
libpq.

A psycopg cursor spends about a tenth of a millisecond of Python on each call around libpq's
own work (the cursor itself, its bookkeeping of prepared statements, its result and row
factory), as much as a ``check`` spends fingerprinting its text. Here a statement is prepared
once per connection, its parameters are dumped and its rows loaded by psycopg's own
:class:`~psycopg.adapt.Transformer` (the same adapters a cursor uses, so the values are the
same), and nothing else runs between them.

Only for the store's own connections (:mod:`~dedup_store.db.server.native`), in autocommit
mode, outside a pipeline: a caller's connection may be reset or have its prepared statements
discarded behind our back, so statements in the caller's transaction go through a cursor.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import abc, errors, generators, pq
from psycopg.adapt import PyFormat, Transformer

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_numbers = itertools.count(1)  # next() on it is atomic: threads preparing at once get their own
_BEGIN = b"BEGIN ISOLATION LEVEL READ COMMITTED"


@dataclass
class _Statement:
    """A statement prepared on one connection: its name, and its column names once known."""

    name: bytes
    columns: tuple[str, ...] | None = None


@dataclass
class _Prepared:
    """What one connection has prepared, by statement and parameter types, and the
    :class:`~psycopg.adapt.Transformer` that dumps and loads its values."""

    transformer: abc.Transformer
    statements: dict[tuple[str, tuple[int, ...]], _Statement] = field(default_factory=dict)


_connections: weakref.WeakKeyDictionary[psycopg.Connection[Any], _Prepared] = (
    weakref.WeakKeyDictionary()
)


def fetch_prepared(
    raw: psycopg.Connection[Any], query: str, values: Sequence[Any], as_tuples: bool = False
) -> list[Any]:
    """The rows of ``query`` (with ``$n`` placeholders) for ``values``, as dictionaries by
    column name (or tuples), the statement prepared on ``raw`` the first time it is run there
    with parameters of these types.

    Raises:
        psycopg.Error: as a cursor's ``execute`` would (the server's error, by its SQLSTATE).
    """

    def run(prepared: _Prepared) -> list[Any]:
        with raw.lock:
            statement, params, formats = _bound(raw, prepared, query, values)
            raw.pgconn.send_query_prepared(statement.name, params, formats)
            (result,) = raw.wait(generators.execute(raw.pgconn))
        return _rows(raw, statement, result, as_tuples)

    return _again_if_lost(raw, run)


def fetch_locked(
    raw: psycopg.Connection[Any],
    lock: tuple[str, Sequence[Any]],
    query: str,
    values: Sequence[Any],
) -> list[dict[str, Any]]:
    """In one READ COMMITTED transaction and one round trip (libpq's pipeline mode): run the
    ``lock`` statement with its values, run ``query``, commit; the rows of ``query``, as
    dictionaries by column name. Both statements are prepared as by :func:`fetch_prepared`.

    When a statement fails, the transaction is rolled back and the server's error raised; when
    the round trip is interrupted, the connection is closed (its state is unknown).
    """

    def run(prepared: _Prepared) -> list[Any]:
        with raw.lock:
            lock_statement, lock_params, lock_formats = _bound(raw, prepared, *lock)
            statement, params, formats = _bound(raw, prepared, query, values)
            results = _pipelined(
                raw,
                (lock_statement.name, lock_params, lock_formats),
                (statement.name, params, formats),
            )
        return _rows(raw, statement, results[0], False)

    return _again_if_lost(raw, run)


_Bound = tuple[bytes, Sequence[Any], Sequence[pq.Format]]


def _pipelined(
    raw: psycopg.Connection[Any], lock: _Bound, statement: _Bound
) -> list[pq.abc.PGresult]:
    """The results of ``statement``, run after ``lock`` in a transaction of their own, in
    one pipeline; rolled back (by a ``ROLLBACK`` of ours: psycopg's ``rollback`` would also
    deallocate every prepared statement) and the server's error raised when one fails."""
    pgconn = raw.pgconn
    pgconn.enter_pipeline_mode()
    try:
        pgconn.send_query_params(_BEGIN, None)
        pgconn.send_query_prepared(*lock)
        pgconn.send_query_prepared(*statement)
        pgconn.send_query_params(b"COMMIT", None)
        pgconn.pipeline_sync()
        raw.wait(generators.send(pgconn))
        results: list[list[pq.abc.PGresult]] = [
            raw.wait(generators.fetch_many(pgconn)) for _ in range(5)
        ]
        pgconn.exit_pipeline_mode()
    except BaseException:
        raw.close()
        raise
    failed = [r for batch in results for r in batch if r.status == pq.ExecStatus.FATAL_ERROR]
    if failed:
        if pgconn.transaction_status != pq.TransactionStatus.IDLE:
            pgconn.send_query_params(b"ROLLBACK", None)
            raw.wait(generators.execute(pgconn))
        _raise_for(raw, failed[0])
    return results[2]


T = TypeVar("T")


def _again_if_lost(raw: psycopg.Connection[Any], run: Callable[[_Prepared], T]) -> T:
    """``run`` with what ``raw`` has prepared, and once more, preparing afresh, when the
    server lost a prepared statement (``DEALLOCATE ALL`` or ``DISCARD ALL`` sent by someone
    else on the connection)."""
    prepared = _prepared_on(raw)
    try:
        return run(prepared)
    except errors.InvalidSqlStatementName:
        prepared.statements.clear()
        return run(prepared)


def _prepared_on(raw: psycopg.Connection[Any]) -> _Prepared:
    """What ``raw`` has prepared (nothing yet, the first time)."""
    prepared = _connections.get(raw)
    if prepared is None:
        prepared = _connections[raw] = _Prepared(Transformer(raw))
    return prepared


def _bound(
    raw: psycopg.Connection[Any], prepared: _Prepared, query: str, values: Sequence[Any]
) -> tuple[_Statement, Sequence[Any], Sequence[pq.Format]]:
    """``query`` prepared on ``raw`` for the types of ``values`` (now, the first time), and
    ``values`` dumped with their formats."""
    tx = prepared.transformer
    params = tx.dump_sequence(values, [PyFormat.AUTO] * len(values))
    types, formats = tuple(tx.types or ()), tx.formats or []
    statement = prepared.statements.get((query, types))
    if statement is None:
        statement = prepared.statements[query, types] = _prepare(raw, query, types)
    return statement, params, formats


def _prepare(raw: psycopg.Connection[Any], query: str, types: Sequence[int]) -> _Statement:
    """Prepare ``query`` on ``raw`` under a new name."""
    statement = _Statement(f"dedup_store_{next(_numbers)}".encode())
    raw.pgconn.send_prepare(statement.name, query.encode(raw.info.encoding), types)
    (result,) = raw.wait(generators.execute(raw.pgconn))
    _raise_for(raw, result)
    return statement


def _rows(
    raw: psycopg.Connection[Any], statement: _Statement, result: pq.abc.PGresult, as_tuples: bool
) -> list[Any]:
    """The rows of ``result``, loaded by the transformer of ``raw``."""
    tx = _prepared_on(raw).transformer
    if result.status != _TUPLES_OK:
        _raise_for(raw, result)
        return []
    tx.set_pgresult(result)
    if as_tuples:
        return tx.load_rows(0, result.ntuples, tuple)
    if statement.columns is None:
        encoding = tx.encoding
        statement.columns = tuple(
            (result.fname(i) or b"").decode(encoding) for i in range(result.nfields)
        )
    columns = statement.columns

    def make_row(values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(columns, values, strict=True))

    return tx.load_rows(0, result.ntuples, make_row)


def _raise_for(raw: psycopg.Connection[Any], result: pq.abc.PGresult) -> None:
    """Raise the server's error when ``result`` is neither rows nor a command's completion."""
    if result.status in (_TUPLES_OK, _COMMAND_OK):
        return
    encoding = raw.info.encoding
    if result.status == pq.ExecStatus.FATAL_ERROR:
        raise errors.error_from_result(result, encoding=encoding)
    raise errors.InternalError(f"unexpected result: {pq.ExecStatus(result.status).name}")
