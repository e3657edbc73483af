"""Connections and transactions: our own engine from a URL, or the caller's Engine/Connection
(SQLAlchemy's, or a psycopg connection).

Given a URL or an Engine, the store runs each operation in its own transaction and retries it on
serialization failures and deadlocks. Given a Connection, it runs inside the caller's transaction
(in a SAVEPOINT, so a failed call leaves none of its rows behind) and never commits or rolls back
the caller's transaction; a deadlock or serialization failure there reaches the caller as a
:class:`~dedup_store.errors.ConflictError`, to run its transaction again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import JsonbLoader, JsonLoader
from sqlalchemy import Connection, Engine, create_engine, event, exc, text
from sqlalchemy.pool import StaticPool

from dedup_store.config import normalize_url, redact
from dedup_store.db.schema.names import validate_schema
from dedup_store.db.server.native import DroppedConnection, NativeConnections
from dedup_store.db.server.replicas import Replica, ReplicaSet, Served, lsn
from dedup_store.errors import ConflictError, DatabaseError, UnsupportedServerError
from dedup_store.plumbing import Closing

Bind = str | Engine | Connection | psycopg.Connection[Any]
T = TypeVar("T")

_RETRY_SQLSTATES = {"40001", "40P01"}  # serialization_failure, deadlock_detected
MAX_ATTEMPTS = 8
#: The oldest PostgreSQL the store's SQL runs on, as ``server_version_num`` (``bit_count``
#: came with 14).
MIN_SERVER_VERSION = 140000


class Database(Closing):
    """Owns (or borrows) the way to the database for one store.

    Given a URL it makes two engines, each with a pool of connections kept open: one for
    transactions (``pool_size``, SQLAlchemy's 5 by default) and one for single-statement reads
    (``pool_size``, at least 3); the single-document statements (``check``, ``add``,
    ``similar``, ``cluster``) run on psycopg connections taken once from the second and kept
    apart (:mod:`~dedup_store.db.server.native`, at most as many idle). Size ``pool_size`` to
    the threads that share the store, so that none of them opens and closes connections beyond
    the pools.
    """

    def __init__(
        self,
        bind: Bind,
        schema: str,
        pool_size: int | None = None,
        replicas: Sequence[str] = (),
        max_replica_lag: float = 1.0,
    ) -> None:
        self.schema = validate_schema(schema)
        self.replicas: ReplicaSet | None = None
        if isinstance(bind, psycopg.Connection):
            bind = caller_connection(bind)
        self._owns_engine = isinstance(bind, str)
        self.connection: Connection | None = bind if isinstance(bind, Connection) else None
        self.engine: Engine | None
        self._read_engine: Engine | None = None
        self._native: NativeConnections | None = None
        self._server_checked = False
        if isinstance(bind, str):
            try:
                sized = {} if pool_size is None else {"pool_size": pool_size}
                # writers rely on each statement seeing what committed before it
                # (dedup_store.db.write.locks), whatever the server's default isolation level
                self.engine = create_engine(
                    normalize_url(bind),
                    pool_pre_ping=True,
                    isolation_level="READ COMMITTED",
                    **sized,
                )
                # reads get their own pool of autocommit connections: no BEGIN/COMMIT, no
                # isolation switch and no ping per call (a read retries once instead)
                self._read_engine = create_engine(
                    normalize_url(bind),
                    isolation_level="AUTOCOMMIT",
                    pool_size=max(3, pool_size or 0),
                )
                for engine in (self.engine, self._read_engine):
                    event.listen(engine, "connect", _configure)
                self._native = NativeConnections(self._read_engine, max(3, pool_size or 0))
            except (exc.ArgumentError, ImportError) as e:
                raise DatabaseError(f"invalid database URL {redact(bind)}: {e}") from None
        elif isinstance(bind, Engine):
            self.engine = bind
        elif isinstance(bind, Connection):
            self.engine = None
        else:
            raise TypeError(f"expected a URL, Engine or Connection, got {type(bind).__name__}")
        if replicas and self.connection is None:  # inside a caller's transaction: all there
            self.replicas = ReplicaSet(
                list(replicas), max_replica_lag, _replica_engine(pool_size), max(3, pool_size or 0)
            )

    @property
    def url_for_messages(self) -> str:
        """The database URL without its password."""
        engine = self.engine or (self.connection.engine if self.connection else None)
        return redact(engine.url) if engine else "?"

    @contextmanager
    def transaction(self, replica: bool = False) -> Iterator[Connection]:
        """A connection in a transaction of ours, or in a savepoint of the caller's;
        ``replica``: a read-only one, on a replica when one may serve it (a replica that fails
        while the rows stream raises).

        Raises:
            DatabaseError: any error of the database or its driver, chained to its cause.
        """
        try:
            conn = self._replica_connection() if replica else None
            if conn is not None:
                with conn:  # in the transaction _snapshot_connection began
                    try:
                        yield conn
                    finally:
                        conn.rollback()  # it only read
                return
            with self._transaction() as conn:
                yield conn
            if not replica:
                self._note_write()
        except (exc.SQLAlchemyError, psycopg.Error) as e:
            raise self.error(e) from e

    def _replica_connection(self) -> Connection | None:
        """A connection to a replica that may serve a read now (``None``: read the primary)."""
        served = self._on_replica(_snapshot_connection)
        return None if served is None else served.value

    def _on_replica(self, work: Callable[[Replica], T]) -> Served[T] | None:
        """What ``work`` gave on a replica that may serve a read now (``None``: read the
        primary; :meth:`ReplicaSet.attempt`).

        Raises:
            DatabaseError: ``work`` failed on a replica for a reason of its own (not the
                replica's: the statement's), chained to its cause.
        """
        if self.replicas is None:
            return None
        try:
            return self.replicas.attempt(work, self._primary)
        except (exc.SQLAlchemyError, psycopg.Error, DroppedConnection) as e:
            raise self.error(e) from e

    def _primary(self) -> int:
        """The primary's WAL position now."""
        with self._primary_engine().connect() as conn:
            return lsn(conn.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one())

    def _note_write(self) -> None:
        """Keep the WAL position of a write just committed, for the replicas to reach before
        they serve this store's reads (read your writes)."""
        if self.replicas is not None:
            with self._primary_engine().connect() as conn:
                end = conn.execute(text("SELECT pg_current_wal_insert_lsn()::text")).scalar_one()
            self.replicas.wrote(lsn(end))

    def _primary_engine(self) -> Engine:
        engine = self._read_engine or self.engine
        assert engine is not None
        return engine

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        if self.connection is not None:
            with self.connection.begin_nested():
                self._check_server(self.connection)
                yield self.connection
            return
        assert self.engine is not None
        with self.engine.begin() as conn:
            self._check_server(conn)
            yield conn

    def _check_server(self, conn: Connection) -> None:
        """Refuse a server older than :data:`MIN_SERVER_VERSION`, on the first transaction or
        read (a store opens, a migration runs).

        Raises:
            UnsupportedServerError: naming the server's version and the minimum.
        """
        if not self._server_checked:
            version = server_version_num(conn)
            if version < MIN_SERVER_VERSION:
                raise UnsupportedServerError(version, MIN_SERVER_VERSION)
            self._server_checked = True

    def error(self, e: BaseException) -> DatabaseError:
        """``e`` as a :class:`DatabaseError` naming the database (without its password): a
        :class:`ConflictError` for a deadlock or a serialization failure."""
        sqlstate = _sqlstate(e)
        detail = _first_line(e)
        kind: type[DatabaseError] = DatabaseError
        if sqlstate in _RETRY_SQLSTATES:
            again = (
                "roll the caller's transaction back and run it again"
                if self.connection is not None
                else f"it failed {MAX_ATTEMPTS} times: run it again"
            )
            detail, kind = f"{detail} (concurrent writers conflicted; {again})", ConflictError
        error = kind(f"database {self.url_for_messages}: {detail}")
        error.sqlstate = sqlstate
        error.detail = detail
        return error

    def read(self, work: Callable[[Connection], T], replica: bool = False) -> T:
        """Run a read-only ``work`` of a single statement: in autocommit on our engine (no
        BEGIN/COMMIT round trips), in a savepoint of the caller's transaction otherwise;
        ``replica``: on a replica when one may serve it."""
        if self.connection is not None:
            return self.run(work)
        if replica:
            served = self._on_replica(lambda r: _on_engine(r.engine, work))
            if served is not None:
                return served.value
        for attempt in (1, 2):
            try:
                return self._read_once(work)
            except exc.DBAPIError as e:
                # a pooled connection the server dropped: reads are safe to run again
                if attempt == 1 and e.connection_invalidated and self._read_engine is not None:
                    continue
                raise self.error(e) from e
            except (exc.SQLAlchemyError, psycopg.Error) as e:
                raise self.error(e) from e
        raise AssertionError("unreachable")

    def native(
        self, work: Callable[[psycopg.Connection[Any]], T], replica: bool = False
    ) -> T | None:
        """Run ``work`` on a psycopg connection of ours in autocommit mode; ``replica``: a
        read, on a replica when one may serve it (otherwise ``work`` may write: its WAL
        position is kept for the replicas to reach).

        Returns ``None`` without running it inside a caller's Connection (where everything
        goes through the caller's transaction). Serialization failures and deadlocks are
        retried; ``work`` must leave no transaction open.
        """
        if self.connection is not None:
            return None
        if replica:
            served = self._on_replica(lambda r: r.native.run(work))
            if served is not None:
                return served.value
        result = self._native_primary(work)
        if not replica:
            self._note_write()
        return result

    def in_caller(self, work: Callable[[Connection, psycopg.Connection[Any]], T]) -> T | None:
        """Run ``work`` on the caller's Connection and the psycopg connection under it, in the
        caller's transaction (``work`` keeps its statements in a savepoint of it:
        :func:`~dedup_store.db.server.raw_statements.in_savepoint`).

        Returns ``None`` without running it when there is no caller's Connection, when the
        caller's transaction has not begun, or when the driver is not psycopg's synchronous
        connection (an asyncio caller's): the work then goes through SQLAlchemy
        (:meth:`run`). No retry: the caller owns the transaction.

        Raises:
            DatabaseError: any error of the database or its driver, chained to its cause.
        """
        conn = self.connection
        if conn is None or not conn.in_transaction():
            return None
        raw = conn.connection.driver_connection
        if not isinstance(raw, psycopg.Connection):
            return None
        self._check_server(conn)
        try:
            result = work(conn, raw)
        except psycopg.Error as e:
            raise self.error(e) from e
        self._note_write()
        return result

    def _native_primary(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                if self._native is not None and self._server_checked:
                    return self._native.run(work)
                return self._read_once(lambda conn: _on_driver(conn, work))
            except DroppedConnection as e:
                # the server dropped a pooled connection: it is discarded, and the work (which
                # committed nothing) runs again on a new one
                if attempt > 1:
                    raise self.error(e.__cause__ or e) from e.__cause__
            except (exc.DBAPIError, psycopg.Error) as e:
                dropped = isinstance(e, exc.DBAPIError) and e.connection_invalidated
                if dropped and attempt == 1:
                    continue
                if _sqlstate(e) not in _RETRY_SQLSTATES or attempt == MAX_ATTEMPTS:
                    raise self.error(e) from e
                time.sleep(random.uniform(0, 0.05 * 2**attempt))
            except exc.SQLAlchemyError as e:
                raise self.error(e) from e
        raise AssertionError("unreachable")

    def _read_once(self, work: Callable[[Connection], T]) -> T:
        if self._read_engine is not None:
            with self._read_engine.connect() as conn:
                self._check_server(conn)
                return work(conn)
        assert self.engine is not None
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            self._check_server(conn)
            return work(conn)

    def run(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in a transaction, retrying on serialization failures and deadlocks.

        Inside a caller's connection there is no retry: the caller owns the transaction.

        Raises:
            DatabaseError: any error of the database or its driver, chained to its cause.
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self._transaction() as conn:
                    result = work(conn)
                self._note_write()
                return result
            except exc.DBAPIError as e:
                retry = self.connection is None and _sqlstate(e) in _RETRY_SQLSTATES
                if not retry or attempt == MAX_ATTEMPTS:
                    raise self.error(e) from e
                time.sleep(random.uniform(0, 0.05 * 2**attempt))
            except (exc.SQLAlchemyError, psycopg.Error) as e:
                raise self.error(e) from e
        raise AssertionError("unreachable")

    def without_jit(self, conn: Connection) -> None:
        """Turn off JIT compilation for the rest of a transaction of ours on a caller's Engine.

        A batch's lookup statement is estimated costly enough to be compiled, which takes
        longer (about 0.1 s) than running it. Our own engines turn it off per connection; in a
        caller's Connection the caller's setting is left alone.
        """
        if self.connection is None and not self._owns_engine:
            conn.execute(text("SELECT set_config('jit', 'off', true)"))

    def close(self) -> None:
        """Dispose of the engine if we created it, and of the replicas' engines."""
        if self.replicas is not None:
            self.replicas.close()
        if self._owns_engine and self.engine is not None:
            self.engine.dispose()
        if self._native is not None:
            self._native.close()
        if self._read_engine is not None:
            self._read_engine.dispose()


def caller_connection(raw: psycopg.Connection[Any]) -> Connection:
    """A SQLAlchemy Connection over the caller's psycopg connection, in the caller's
    transaction: the store works in savepoints of it, and nothing of ours ever commits, rolls
    back or closes it (the pool neither resets nor closes a connection it did not make)."""
    if raw.autocommit:
        raise DatabaseError(
            "the psycopg connection is in autocommit mode: give one in a transaction (the "
            "store works inside it), or a URL"
        )
    engine = create_engine(
        "postgresql+psycopg://",
        creator=lambda: raw,
        poolclass=StaticPool,
        pool_reset_on_return=None,
    )
    # SQLAlchemy ends the transaction its first statements open (the dialect's set-up) with a
    # rollback, and rolls back what it began when a connection closes: here the transaction
    # is the caller's, which only the caller ends
    engine.dialect.do_rollback = _caller_ends_it  # type: ignore[method-assign]
    engine.dialect.do_commit = _caller_ends_it  # type: ignore[method-assign]
    # a host may load json as text on its connection (Django does, for its JSONField): the
    # store's cursors load it as Python values, leaving the host's own cursors alone
    event.listen(engine, "before_cursor_execute", _json_loaders)
    return engine.connect()


def _caller_ends_it(dbapi_connection: Any) -> None:
    """Neither commit nor roll back the caller's transaction."""


def _json_loaders(conn: Connection, cursor: Any, *_: Any) -> None:
    cursor.adapters.register_loader("json", JsonLoader)
    cursor.adapters.register_loader("jsonb", JsonbLoader)


def _replica_engine(pool_size: int | None) -> Callable[[str], Engine]:
    """Makes the engine of a replica: autocommit reads, configured as ours are."""

    def make(url: str) -> Engine:
        try:
            engine = create_engine(
                normalize_url(url), isolation_level="AUTOCOMMIT", pool_size=max(3, pool_size or 0)
            )
        except (exc.ArgumentError, ImportError) as e:
            raise DatabaseError(f"invalid replica URL {redact(url)}: {e}") from None
        event.listen(engine, "connect", _configure)
        return engine

    return make


def _snapshot_connection(replica: Replica) -> Connection:
    """A connection to ``replica`` in a transaction that reads one snapshot (a stream of rows
    needs a transaction, which the replica's autocommit engine does not begin), its snapshot
    taken: a connection the replica dropped since it was pooled fails here, where the read
    can still go elsewhere, not in the middle of the rows."""
    conn = replica.engine.connect().execution_options(isolation_level="REPEATABLE READ")
    try:
        conn.begin()
        conn.exec_driver_sql("SELECT 1")
    except BaseException:
        conn.close()
        raise
    return conn


def _on_engine(engine: Engine, work: Callable[[Connection], T]) -> T:
    with engine.connect() as conn:
        return work(conn)


def server_version_num(conn: Connection) -> int:
    """The ``server_version_num`` of the server of ``conn``, from the version SQLAlchemy reads
    once per engine when it first connects (no statement of ours)."""
    version = [int(part) for part in (conn.dialect.server_version_info or ())][:2]
    major, minor = (*version, 0, 0)[:2]
    return major * 10000 + (minor if major >= 10 else minor * 100)


def _configure(dbapi_connection: Any, _record: Any) -> None:
    """Plan our (prepared) statements once, as their plans do not depend on the values bound,
    and never compile them (see :meth:`Database.without_jit`).

    Set on connections of engines the store creates itself, never on a caller's.
    """
    with dbapi_connection.cursor() as cur:
        cur.execute("SET plan_cache_mode = force_generic_plan")
        cur.execute("SET jit = off")
    dbapi_connection.commit()


def _on_driver(conn: Connection, work: Callable[[psycopg.Connection[Any]], T]) -> T:
    """Run ``work`` on the psycopg connection of ``conn``; invalidate it if it breaks."""
    raw = driver_connection(conn)
    try:
        return work(raw)
    except psycopg.OperationalError as e:
        if raw.closed or raw.broken:
            conn.invalidate()
            raise DroppedConnection(str(e)) from e
        raise


def driver_connection(conn: Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under a SQLAlchemy connection (for COPY)."""
    raw = conn.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise DatabaseError("dedup_store needs the psycopg (3) driver: use postgresql+psycopg://")
    return raw


def _sqlstate(e: BaseException) -> str | None:
    return getattr(getattr(e, "orig", None) or e, "sqlstate", None)


def _first_line(e: BaseException) -> str:
    orig = getattr(e, "orig", None) or e
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
