"""Reads on PostgreSQL streaming replicas (hot standbys), with a bound on their lag and the
store's own writes always visible.

A store given replicas sends its reads (``check``, ``similar``, ``cluster``, ``clusters``,
``pairs``, ``explain``, ``report``, ``stats``, ``export``) to one of them, in turn, and every
write (and the decision of an ``add``) to the primary. A replica serves a read only when:

- it is up: a replica whose connection failed is left out, with a log line and a count in
  :attr:`ReplicaSet.counters`, and tried again after a back-off (1 s, doubling to 30 s);
- it is close enough: its lag, measured from what PostgreSQL reports, is at most
  ``max_lag`` seconds. The lag is 0 when the replica has replayed the primary's WAL position
  (``pg_last_wal_replay_lsn()`` against ``pg_current_wal_lsn()``), else the age of the last
  transaction it replayed (``now() - pg_last_xact_replay_timestamp()``) plus the time since it
  was read. Both positions are read at most every :data:`CHECK_INTERVAL` seconds, one short
  statement each; the primary's by one thread at a time (the others take the last reading);
- it has the store's own writes: after a write through the store, its WAL position is kept,
  and a replica serves reads only once it has replayed it (checked again at once when the
  cached position is behind); otherwise the primary does.

When the primary cannot be reached, the replicas serve every read whatever their lag (writes
fail as before), and its position is tried again after a back-off (:data:`BACKOFF_FIRST`,
doubling to :data:`PRIMARY_BACKOFF_MAX`), so reads do not wait on a server that is down;
:attr:`ReplicaSet.last_read` says how old the answer may be.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import psycopg
from sqlalchemy import Engine, exc, text

from dedup_store.config import redact
from dedup_store.db.server.native import DroppedConnection, NativeConnections

T = TypeVar("T")
log = logging.getLogger("dedup_store.replicas")

#: Seconds between two reads of a replica's (and the primary's) WAL position.
CHECK_INTERVAL = 0.1
#: Seconds a failed replica is left out, at first and at most.
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
#: Seconds at most between two tries of a primary that could not be reached.
PRIMARY_BACKOFF_MAX = 5.0
#: SQLSTATEs of a standby that cannot serve a statement now (a conflict with recovery, a
#: server shutting down): the read goes elsewhere.
_FAULT_SQLSTATES = {"40001", "57P01", "57P02", "57P03", "08006", "08003", "08001"}
_STATUS = text(
    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
    "extract(epoch FROM now() - pg_last_xact_replay_timestamp())"
)


def lsn(value: str | None) -> int:
    """A WAL position (``16/B374D848``) as a number (0 for ``None``)."""
    if not value:
        return 0
    high, low = value.split("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclasses.dataclass
class Replica:
    """One replica: its engine and connections, and what was last learnt of it."""

    name: str
    engine: Engine
    native: NativeConnections
    checked_at: float = -math.inf
    replayed: int = 0
    replay_age: float = math.inf
    in_recovery: bool = True
    down_until: float = 0.0
    backoff: float = 0.0

    def lag(self, primary: int | None, now: float | None = None) -> float:
        """Seconds behind the primary at ``primary`` (its WAL position; ``None``: unknown) at
        ``now`` (``time.monotonic()``; default: when it was last read): 0 once it has replayed
        that position, else the age of its last replayed transaction when it was read, plus
        the time since (it may have replayed nothing since)."""
        if primary is not None and self.replayed >= primary:
            return 0.0
        since = 0.0 if now is None else max(0.0, now - self.checked_at)
        return self.replay_age + since


@dataclasses.dataclass(frozen=True)
class Served(Generic[T]):
    """What a replica answered."""

    value: T


@dataclasses.dataclass(frozen=True)
class ReadSource:
    """Where a read was served: ``replica`` (its URL without password, ``None``: the primary),
    how far behind the primary it was, in seconds, and whether the primary could not be
    reached (the lag is then the age of the last transaction the replica replayed: how old the
    answer may be; ``None`` when it replayed none since it started)."""

    replica: str | None
    lag: float | None
    primary_down: bool = False


class ReplicaSet:
    """The replicas of a store (see the module's rules).

    Args:
        urls: SQLAlchemy URLs of the replicas.
        max_lag: the largest lag, in seconds, of a replica that serves reads.
        make_engine: makes a replica's engine from its URL.
        pool_size: idle psycopg connections kept per replica.
    """

    def __init__(
        self,
        urls: list[str],
        max_lag: float,
        make_engine: Callable[[str], Engine],
        pool_size: int,
    ) -> None:
        self.max_lag = max_lag
        self.replicas: list[Replica] = []
        for url in urls:
            engine = make_engine(url)
            self.replicas.append(
                Replica(redact(engine.url), engine, NativeConnections(engine, pool_size))
            )
        self.written = 0
        self.counters = {
            "replica_reads": 0,
            "primary_reads": 0,
            "replica_failures": 0,
            "lagging": 0,
            "primary_failures": 0,
        }
        self._primary: int | None = None
        self._primary_at = -math.inf
        self._primary_wait = 0.0  # seconds before the next try of a primary that failed
        self._primary_read = False  # whether its position was ever tried
        self._primary_lock = threading.Lock()
        self._turn = 0
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def last_read(self) -> ReadSource | None:
        """Where this thread's last read was served (``None`` before any)."""
        found: ReadSource | None = getattr(self._local, "source", None)
        return found

    def wrote(self, position: int) -> None:
        """Note a write through the store that ends at WAL ``position``."""
        with self._lock:
            self.written = max(self.written, position)

    def attempt(self, work: Callable[[Replica], T], primary: Callable[[], int]) -> Served[T] | None:
        """What ``work`` gave on the first replica that may serve a read and does, else
        ``None`` (the caller reads the primary). ``primary`` reads the primary's WAL position
        (it may raise when the primary is down)."""
        position = self._primary_position(primary)
        for replica in self._eligible(position):
            try:
                result = work(replica)
            except (exc.DBAPIError, psycopg.Error, DroppedConnection) as e:
                if not _is_fault(e):
                    raise
                self._failed(replica, e)
                continue
            lag = _finite(replica.lag(position, time.monotonic()))
            self._local.source = ReadSource(replica.name, lag, position is None)
            self._count("replica_reads")
            return Served(result)
        self._local.source = ReadSource(None, 0.0)
        self._count("primary_reads")
        return None

    def close(self) -> None:
        """Close every replica's connections."""
        for replica in self.replicas:
            replica.native.close()
            replica.engine.dispose()

    def status(self) -> list[dict[str, Any]]:
        """Each replica as last seen: URL, up or not, lag, WAL position replayed."""
        now = time.monotonic()
        return [
            {
                "url": r.name,
                "up": r.down_until <= now,
                "lag_seconds": _finite(r.lag(self._primary, now)),
                "replayed": r.replayed,
            }
            for r in self.replicas
        ]

    def _count(self, name: str) -> None:
        with self._lock:
            self.counters[name] += 1

    def _primary_position(self, read: Callable[[], int]) -> int | None:
        """The primary's WAL position as last read (``None``: it could not be reached), read
        again by this thread when it is due and no other thread is reading it."""
        if time.monotonic() - self._primary_at < max(CHECK_INTERVAL, self._primary_wait):
            return self._primary
        # before the first reading every thread waits for it; later, one reads, the others go on
        if not self._primary_lock.acquire(blocking=not self._primary_read):
            return self._primary
        try:
            if time.monotonic() - self._primary_at >= max(CHECK_INTERVAL, self._primary_wait):
                self._read_primary(read)
        finally:
            self._primary_read = True
            self._primary_lock.release()
        return self._primary

    def _read_primary(self, read: Callable[[], int]) -> None:
        try:
            self._primary, self._primary_wait = read(), 0.0
        except Exception as e:  # the primary is down: replicas serve whatever their lag
            if self._primary is not None or not self._primary_wait:
                log.warning(
                    "the primary could not be reached; reads go to the replicas: %s", _first_line(e)
                )
            self._primary = None
            self._primary_wait = min(PRIMARY_BACKOFF_MAX, self._primary_wait * 2 or BACKOFF_FIRST)
            self._count("primary_failures")
        self._primary_at = time.monotonic()

    def _eligible(self, primary: int | None) -> list[Replica]:
        now = time.monotonic()
        with self._lock:
            self._turn = (self._turn + 1) % max(1, len(self.replicas))
            order = self.replicas[self._turn :] + self.replicas[: self._turn]
        chosen = []
        for replica in order:
            if replica.down_until > now:
                continue
            stale = now - replica.checked_at >= CHECK_INTERVAL or replica.replayed < self.written
            if stale and not self._refresh(replica, now):
                continue
            if not replica.in_recovery or replica.replayed < self.written:
                continue  # promoted, or without the store's own writes yet
            if primary is not None and replica.lag(primary, now) > self.max_lag:
                self._count("lagging")
                continue
            chosen.append(replica)
        return chosen

    def _refresh(self, replica: Replica, now: float) -> bool:
        """Read the replica's position; whether it answered."""
        try:
            with replica.engine.connect() as conn:
                recovery, replayed, age = conn.execute(_STATUS).one()
        except (exc.DBAPIError, psycopg.Error) as e:
            self._failed(replica, e)
            return False
        replica.in_recovery, replica.replayed = bool(recovery), lsn(replayed)
        replica.replay_age = math.inf if age is None else max(0.0, float(age))
        replica.checked_at, replica.backoff = now, 0.0
        return True

    def _failed(self, replica: Replica, error: BaseException) -> None:
        # the connections kept to it may all be dead: the next try makes new ones
        replica.native.discard_idle()
        replica.engine.dispose()
        now = time.monotonic()
        with self._lock:
            self.counters["replica_failures"] += 1
            if replica.down_until > now:  # the reads in flight meet the same failure
                return
            replica.backoff = min(BACKOFF_MAX, replica.backoff * 2 or BACKOFF_FIRST)
            replica.down_until = now + replica.backoff
        log.warning(
            "replica %s left out for %.0f s: %s", replica.name, replica.backoff, _first_line(error)
        )


def _finite(seconds: float) -> float | None:
    return None if math.isinf(seconds) else seconds


def _first_line(error: BaseException) -> str:
    lines = str(getattr(error, "orig", None) or error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _is_fault(error: BaseException) -> bool:
    """Whether ``error`` is the replica's (gone, shutting down, in conflict with recovery)
    rather than the statement's."""
    if isinstance(error, DroppedConnection):
        return True
    orig = getattr(error, "orig", None) or error
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(orig, psycopg.OperationalError):
        return True
    return getattr(orig, "sqlstate", None) in _FAULT_SQLSTATES
