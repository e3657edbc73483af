"""Psycopg connections of the store's own for its single-document statements.

``check``, ``add``, ``similar`` and ``cluster`` each send one statement (or one pipeline) on a
psycopg connection in autocommit mode. Checked out of SQLAlchemy's pool, each call also paid for
the pool's checkout and checkin, its reset of the connection and the isolation level it sets
(about a tenth of a millisecond of client CPU, more than the statement's own client work). The
connections here come from the store's read engine once (so they are configured as its others
are: generic plans, no JIT), are then detached from its pool, and are handed out from a stack:
the calls of one thread reuse one connection, and a store used by several threads opens one per
thread that calls at once, keeping at most ``limit`` idle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Engine

T = TypeVar("T")


class DroppedConnection(Exception):
    """The connection broke (the server went away); it has been discarded."""


class NativeConnections:
    """Idle psycopg connections in autocommit mode, made from ``engine`` as needed."""

    def __init__(self, engine: Engine, limit: int) -> None:
        self._engine = engine
        self._limit = limit
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()
        self._closed = False

    def run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``work`` on an idle connection (a new one if none is idle).

        Raises:
            DroppedConnection: the connection broke (``work`` committed nothing: it ran in
                autocommit mode, one statement or one pipelined transaction that did not end).
        """
        raw = self._checkout()
        try:
            result = work(raw)
        except psycopg.OperationalError as e:
            if raw.closed or raw.broken:
                raw.close()
                raise DroppedConnection(str(e)) from e
            self._checkin(raw)
            raise
        except BaseException:
            self._checkin(raw)
            raise
        self._checkin(raw)
        return result

    def close(self) -> None:
        """Close every idle connection; those in use are closed when they come back."""
        with self._lock:
            self._closed = True
        self.discard_idle()

    def discard_idle(self) -> None:
        """Close the idle connections (their server went away: new ones are made as needed)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for raw in idle:
            raw.close()

    def _checkout(self) -> psycopg.Connection[Any]:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        pooled = self._engine.raw_connection()
        raw = pooled.driver_connection
        assert isinstance(raw, psycopg.Connection)
        pooled.detach()  # ours from now on: the pool neither resets nor closes it
        raw.autocommit = True
        return raw

    def _checkin(self, raw: psycopg.Connection[Any]) -> None:
        if raw.closed or raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            raw.close()
            return
        with self._lock:
            if not self._closed and len(self._idle) < self._limit:
                self._idle.append(raw)
                return
        raw.close()
