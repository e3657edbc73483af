"""The store's calls, run on threads: one store per process, shared by the requests.

:class:`~dedup_store.DedupStore` is synchronous (SQLAlchemy and psycopg); each call takes a
connection of its own from the store's pools, whose size is the number of threads here, so a
call never waits for a connection. A request waits at most ``timeout`` seconds for a free
thread (else 503); once started, a call runs to its end even when its client goes away, so a
write is either committed and answered or not made, and a stopping server waits for the calls
in flight.

``add`` with ``reject_duplicates`` must not store a duplicate that it then refuses: it runs on
a connection of its own, inside a transaction of the server's (:class:`GuardedAdds`), and is
rolled back when it finds one.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import psycopg
from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.exc import SQLAlchemyError

from dedup_store.config import redact, scrub_exception
from dedup_store.errors import DatabaseError
from dedup_store.results import AddResult, Status
from dedup_store.server.errors import RequestError
from dedup_store.service import DedupStore

T = TypeVar("T")

DRIVER_ERRORS = (SQLAlchemyError, psycopg.Error)
#: What ``reject_duplicates`` refuses.
DUPLICATES = frozenset({Status.EXACT_DUPLICATE, Status.NEAR_DUPLICATE})


_Call = tuple[
    asyncio.AbstractEventLoop,
    asyncio.Future[Any],
    Callable[..., Any],
    tuple[Any, ...],
    dict[str, Any],
]
"""A call for the threads: the loop and the future to answer, the work and its arguments."""


class StoreCalls:
    """Runs the store's calls on ``threads`` threads; a call waits ``wait`` seconds at most
    for one.

    A call goes to the threads through one queue and comes back through one callback on the
    event loop, which also frees its thread: the least that hands a call to a thread and its
    result back (no executor's future, no future chained to it, no shield around it).
    """

    def __init__(self, threads: int, wait: float) -> None:
        self.threads = threads
        self._wait = wait
        self._free = asyncio.Semaphore(threads)
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"dedup-store_{n}", daemon=True)
            for n in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    async def run(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``work(*args, **kwargs)`` on one of the threads.

        Raises:
            RequestError: 503 when no thread came free within the wait.
        """
        try:
            if self._free.locked():  # every thread is taken: wait for one, not forever
                async with asyncio.timeout(self._wait):
                    await self._free.acquire()
            else:
                await self._free.acquire()
        except TimeoutError:
            message = f"all {self.threads} store threads stayed busy for {self._wait:g} s"
            raise RequestError(503, "Busy", f"{message}; try again") from None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, work, args, kwargs))
        # the call goes on when the request is cancelled (its client left): a write ends as
        # committed or rolled back, never cut off, and the thread is freed only then
        return await future

    def _serve(self) -> None:
        """One thread: the calls, until told to stop (``None``)."""
        while (call := self._calls.get()) is not None:
            loop, future, work, args, kwargs = call
            try:
                result, error = work(*args, **kwargs), None
            except BaseException as e:
                result, error = None, e
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
                loop.call_soon_threadsafe(self._ended, future, result, error)
            del call, future, result, error  # held no longer than the call

    def _ended(self, future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        """On the loop: free the thread, answer the call unless its request was cancelled."""
        self._free.release()
        if future.cancelled():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def close(self) -> None:
        """Wait for the calls in flight, then stop the threads."""
        for _ in self._threads:
            self._calls.put(None)
        for thread in self._threads:
            thread.join()


class GuardedAdds:
    """``add`` that stores nothing when it finds a duplicate: each runs in a transaction of its
    own, on a connection of the server's, through a store bound to that connection (which
    works inside its caller's transaction), and is rolled back on a duplicate.

    The add and the decision to keep it are one transaction: it holds the locks of the
    document's keys (:mod:`dedup_store.db.write.locks`) until it ends, so no add that could match
    the document commits in between, a document answered 409 is not stored and one answered
    201 was no exact or near duplicate when it was stored. Connections with their
    stores are kept for the next call, one per thread at most.
    """

    def __init__(self, url: str, schema: str, max_bytes: int, threads: int) -> None:
        self._schema = schema
        self._max_bytes = max_bytes
        self._engine: Engine = create_engine(url, pool_size=threads, pool_pre_ping=True)
        self._idle: queue.SimpleQueue[tuple[Connection, DedupStore]] = queue.SimpleQueue()

    def add(
        self, id: str, text: str, meta: Mapping[str, Any] | None, reject: bool
    ) -> tuple[AddResult, bool]:
        """Add a document unless ``reject`` and it is an exact or near duplicate.

        Returns:
            The result, and whether the document was kept (``False``: rolled back).
        """
        try:
            conn, store = self._take()
        except DRIVER_ERRORS as e:
            raise self._error(e) from e
        try:
            with conn.begin() as transaction:
                result = store.add(id, text, meta)
                kept = not (reject and result.status in DUPLICATES)
                if not kept:
                    transaction.rollback()
        except BaseException as e:
            conn.close()  # a broken connection, or one in an unknown state: never reused
            if isinstance(e, DRIVER_ERRORS):
                raise self._error(e) from e
            raise
        self._idle.put((conn, store))
        return result, kept

    def _error(self, error: BaseException) -> DatabaseError:
        """A driver error as the store reports one, without the password."""
        url = self._engine.url
        message = scrub_exception(getattr(error, "orig", None) or error, url)
        first = message.strip().splitlines()[0] if message.strip() else type(error).__name__
        return DatabaseError(f"database {redact(url)}: {first}")

    def _take(self) -> tuple[Connection, DedupStore]:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        conn = self._engine.connect()
        try:
            store = DedupStore(conn, schema=self._schema, create=False, max_bytes=self._max_bytes)
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn, store

    def close(self) -> None:
        """Close the kept connections."""
        while True:
            try:
                conn, _ = self._idle.get_nowait()
            except queue.Empty:
                break
            conn.close()
        self._engine.dispose()
