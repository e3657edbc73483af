"""Long statements sent with PostgreSQL's own ``$n`` placeholders, on a psycopg connection.

The single-document statements of ``check`` and ``add`` are several kilobytes long. Through
SQLAlchemy's ``:name`` parameters, psycopg parses such a statement again on every call (it
caches its parsing for short statements only); converted once to ``$n`` placeholders and sent
through a :class:`psycopg.RawCursor`, it is passed as it is, and prepared by the server after a
few calls. :func:`locked_statement` also sends the writers' locks
(:func:`~dedup_store.db.write.locks.lock_statement`), the statement and the commit in one pipeline,
so the locks are held for the server's work only, not while the client waits for a CPU between
round trips.

Rows come back as dictionaries, read by column name (:func:`psycopg.rows.dict_row`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

#: A ``:name`` bind parameter (not the ``::`` of a cast).
_BIND = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=64)
def positional(statement: str) -> tuple[str, tuple[str, ...]]:
    """``statement`` with each ``:name`` replaced by ``$n``, and the names in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return _BIND.sub(number, statement), tuple(names)


def fetch_all(
    raw: psycopg.Connection[Any],
    statement: str,
    parameters: Mapping[str, Any],
    as_tuples: bool = False,
) -> list[Any]:
    """Run ``statement`` (with ``:name`` parameters) and return its rows, as dictionaries (or
    tuples)."""
    query, names = positional(statement)
    with psycopg.RawCursor(raw, row_factory=tuple_row if as_tuples else dict_row) as cur:
        cur.execute(query, [parameters[name] for name in names])
        return cur.fetchall()


def locked_statement(
    raw: psycopg.Connection[Any],
    lock: tuple[str, Mapping[str, Any]],
    statement: str,
    parameters: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """In one READ COMMITTED transaction and one round trip: run the ``lock`` statement (with
    its parameters), run ``statement``, commit.

    ``raw`` must be in autocommit mode (outside a transaction).
    """
    query, names = positional(statement)
    lock_query, lock_names = positional(lock[0])
    with (
        psycopg.RawCursor(raw) as control,
        psycopg.RawCursor(raw, row_factory=dict_row) as cur,
    ):
        try:
            with raw.pipeline():
                control.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                control.execute(lock_query, [lock[1][name] for name in lock_names])
                cur.execute(query, [parameters[name] for name in names])
                control.execute("COMMIT")
        except BaseException:
            if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                raw.rollback()
            raise
        return cur.fetchall()
