"""Checkpoints while a bulk load into a new store writes its rows and builds its indexes.

With ``wal_level = minimal`` (the embedded server), the tables a bulk load gave new files write
no WAL; in exchange its ``COMMIT`` writes every page of them still dirty in ``shared_buffers``
to disk and waits for each file's ``fsync``. At a million documents that is over a gigabyte,
written while nothing else runs: 3.4-3.9 s of a 36-50 s load. A ``CHECKPOINT`` on a second
connection, started when the rows are all in, writes those pages while the load's connection
builds its indexes, mostly waiting on the disk: at 1M the builds took about half a second longer
beside it, and the ``COMMIT`` then took 0.3-0.4 s.

A long load also checkpoints as it writes (:func:`rolling`): at 3M documents the pages still
dirty at its end took the final checkpoint 10 s, during which the disk held up the syncs of the
index builds beside it.

A server that logs the load to WAL (``wal_level`` replica or logical) syncs nothing at commit,
so it gets no checkpoint; nor does a role that may not run one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

#: Seconds between the checkpoints of :func:`rolling`: a load writes about 50 MB of table pages
#: a second, half a gigabyte between two checkpoints.
ROLLING_INTERVAL = 10.0

#: Whether the commit of a transaction that gave tables new files will sync them, and whether
#: this role may run ``CHECKPOINT`` (a superuser, or from PostgreSQL 15 on ``pg_checkpoint``).
_SYNCS_AT_COMMIT = """
    SELECT current_setting('wal_level') = 'minimal'
           AND ((SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
                OR EXISTS (SELECT 1 FROM pg_roles r
                           WHERE r.rolname = 'pg_checkpoint' AND pg_has_role(r.oid, 'MEMBER')))
"""


def syncs_at_commit(conn: Connection) -> bool:
    """Whether the server writes and syncs a transaction's new files at its commit
    (``wal_level = minimal``) and lets this role run a checkpoint."""
    return bool(conn.execute(text(_SYNCS_AT_COMMIT)).scalar_one())


@contextlib.contextmanager
def meanwhile(conn: Connection, new_files: bool) -> Iterator[None]:
    """Run a checkpoint on another connection of ``conn``'s engine while the block runs, when
    the transaction of ``conn`` gave tables ``new_files`` and the server syncs them at commit
    (:func:`syncs_at_commit`). The block's end waits for the checkpoint.

    A failed checkpoint does not fail the block: the commit then writes the pages itself, as it
    would have without one.
    """
    if not new_files or not syncs_at_commit(conn):
        yield
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dedup-store-checkpoint") as thread:
        done = thread.submit(_checkpoint, conn.engine)
        yield
        done.result()


@contextlib.contextmanager
def rolling(conn: Connection, new_files: bool) -> Iterator[None]:
    """Run a checkpoint on another connection of ``conn``'s engine every
    :data:`ROLLING_INTERVAL` seconds while the block runs, on the terms of :func:`meanwhile`:
    the pages a long load has written go to disk while it goes on computing, rather than all at
    its end, where the disk would hold up the index builds' own syncs. The block's end waits
    for the checkpoint under way.

    At 3M documents the index builds then took 25.8 s against 29.8-30.1 s, and the load 104.2 s
    against 105.1-106.8 s; at 1M, where the final checkpoint is short, it changed nothing."""
    if not new_files or not syncs_at_commit(conn):
        yield
        return
    stop, interval = threading.Event(), ROLLING_INTERVAL

    def checkpoints() -> None:
        while not stop.wait(interval):
            _checkpoint(conn.engine)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dedup-store-checkpoint") as thread:
        done = thread.submit(checkpoints)
        try:
            yield
        finally:
            stop.set()
            done.result()


def _checkpoint(engine: Engine) -> None:
    with contextlib.suppress(SQLAlchemyError), engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("CHECKPOINT"))
