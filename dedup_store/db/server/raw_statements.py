"""Long statements sent with PostgreSQL's own ``$n`` placeholders, on a psycopg connection.

The single-document statements of ``check`` and ``add`` are several kilobytes long. Through
SQLAlchemy's ``:name`` parameters, psycopg parses such a statement again on every call (it
caches its parsing for short statements only); converted once to ``$n`` placeholders, it is
prepared by name on the store's own connection (:mod:`~dedup_store.db.server.prepared`), or
sent through a :class:`psycopg.RawCursor` in a caller's transaction. :func:`locked_statement`
also sends the writers' locks
(:func:`~dedup_store.db.write.locks.lock_statement`), the statement and the commit in one pipeline,
so the locks are held for the server's work only, not while the client waits for a CPU between
round trips. In a caller's transaction (which holds the locks until it ends anyway),
:func:`fetch_all` and :func:`locked_in_savepoint` run them in a savepoint of it
(:func:`in_savepoint`), in one round trip and in two.

Rows come back as dictionaries, read by column name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import JsonbLoader, JsonLoader
from sqlalchemy import Connection, text

from dedup_store.db.server import array_params
from dedup_store.db.server.prepared import fetch_locked, fetch_prepared

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
    caller: bool = False,
) -> list[Any]:
    """Run ``statement`` (with ``:name`` parameters) and return its rows, as dictionaries (or
    tuples): on the store's own connection, prepared there by name
    (:func:`~dedup_store.db.server.prepared.fetch_prepared`); ``caller``: in the caller's
    transaction on ``raw``, in a savepoint of it (:func:`in_savepoint`), in one round trip,
    ``json`` and ``jsonb`` values loaded as Python values whatever the caller's connection
    loads them as."""
    query, names = positional(statement)
    values = [parameters[name] for name in names]
    if not caller:
        return fetch_prepared(raw, query, values, as_tuples)
    with psycopg.RawCursor(raw, row_factory=tuple_row if as_tuples else dict_row) as cur:
        cur.adapters.register_loader("json", JsonLoader)
        cur.adapters.register_loader("jsonb", JsonbLoader)
        array_params.register(cur)  # a connection made before they were registered globally
        with in_savepoint(raw):
            cur.execute(query, values)
        return cur.fetchall()


def locked_statement(
    raw: psycopg.Connection[Any],
    lock: tuple[str, Mapping[str, Any]],
    statement: str,
    parameters: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """In one READ COMMITTED transaction and one round trip: run the ``lock`` statement (with
    its parameters), run ``statement``, commit
    (:func:`~dedup_store.db.server.prepared.fetch_locked`).

    ``raw`` must be in autocommit mode (outside a transaction).
    """
    query, names = positional(statement)
    lock_query, lock_names = positional(lock[0])
    lock_values = [lock[1][name] for name in lock_names]
    return fetch_locked(raw, (lock_query, lock_values), query, [parameters[n] for n in names])


#: The savepoint of a call in the caller's transaction (:func:`in_savepoint`).
_SAVEPOINT = "dedup_store_call"
#: In the savepoint, the caller's ``plan_cache_mode`` kept aside and generic plans chosen.
_GENERIC_PLANS = """
    SELECT set_config('plan_cache_mode', 'force_generic_plan', true)
    FROM (SELECT set_config('dedup_store.plan_cache_mode', current_setting('plan_cache_mode'),
                            true) OFFSET 0) kept
"""
#: Before the savepoint's release, the caller's ``plan_cache_mode`` again.
_CALLERS_PLANS = (
    "SELECT set_config('plan_cache_mode', current_setting('dedup_store.plan_cache_mode'), true)"
)


@contextmanager
def in_savepoint(raw: psycopg.Connection[Any]) -> Iterator[psycopg.Pipeline]:
    """A pipeline whose statements run in a savepoint of the caller's transaction on ``raw``.

    The savepoint is sent with the first statements, its release with the last ones, so a
    block that syncs nowhere is one round trip. When the block raises (a statement failed, or
    the caller's code did), the caller's transaction is rolled back to the savepoint, so it
    goes on without any of the block's rows. The savepoint's commands are never prepared: one
    that psycopg prepared in a pipeline an error aborted would be remembered as prepared,
    though the server skipped it, and fail from then on.

    Inside the savepoint the statements run with generic plans, as on the store's own
    connections: under the default ``plan_cache_mode`` (``auto``) the server may plan a
    ``check`` again on every call, which costs more than running it. The caller's setting is
    back before the release (and with the rollback).
    """
    with psycopg.RawCursor(raw) as control, raw.pipeline() as pipeline:
        control.execute(f"SAVEPOINT {_SAVEPOINT}", prepare=False)
        try:
            control.execute(_GENERIC_PLANS, prepare=False)
            yield pipeline
            control.execute(_CALLERS_PLANS, prepare=False)
            control.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}", prepare=False)
            pipeline.sync()
        except BaseException:
            _roll_back(raw, control, pipeline)
            raise


@contextmanager
def generic_plans(conn: Connection) -> Iterator[None]:
    """Generic plans for the statements run inside, on the caller's SQLAlchemy connection (an
    asyncio caller's, whose driver :func:`in_savepoint` cannot use), as
    :func:`in_savepoint` asks for them; the caller's ``plan_cache_mode`` is back afterwards.
    Run it in a savepoint, whose rollback also puts the setting back when a statement fails."""
    conn.execute(text(_GENERIC_PLANS))
    yield
    conn.execute(text(_CALLERS_PLANS))


def _roll_back(
    raw: psycopg.Connection[Any], control: psycopg.RawCursor[Any], pipeline: psycopg.Pipeline
) -> None:
    """Roll the caller's transaction back to the savepoint of :func:`in_savepoint`; when it
    does not hold one (its transaction had failed before), it is left as it is."""
    if raw.closed or raw.broken:
        return
    with suppress(psycopg.Error):
        pipeline.sync()  # what was sent before the error: its failure was raised already
    with suppress(psycopg.Error):
        control.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}", prepare=False)
        control.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}", prepare=False)
        pipeline.sync()


def locked_in_savepoint(
    raw: psycopg.Connection[Any],
    lock: tuple[str, Mapping[str, Any]],
    statement: str,
    parameters: Mapping[str, Any],
    accept: Callable[[tuple[Any, ...]], None],
) -> list[dict[str, Any]]:
    """:func:`locked_statement` in the caller's transaction on ``raw``, in a savepoint of it
    (:func:`in_savepoint`): the savepoint and the ``lock`` statement in one round trip, whose
    row ``accept`` may refuse (by raising: the savepoint is rolled back), then ``statement``
    and the savepoint's release in another."""
    query, names = positional(statement)
    lock_query, lock_names = positional(lock[0])
    with (
        psycopg.RawCursor(raw) as control,
        psycopg.RawCursor(raw, row_factory=dict_row) as cur,
    ):
        array_params.register(control)
        array_params.register(cur)
        with in_savepoint(raw):
            control.execute(lock_query, [lock[1][name] for name in lock_names])
            row = control.fetchone()
            assert row is not None
            accept(row)
            cur.execute(query, [parameters[name] for name in names])
        return cur.fetchall()
