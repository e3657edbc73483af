"""The store for asyncio code: :class:`AsyncDedupStore`, the calls of
:class:`~dedup_store.service.DedupStore` as coroutines.

One implementation serves both: each coroutine runs the synchronous call, so the SQL, the
matching and the errors are the same.

- Given a URL (or a SQLAlchemy ``AsyncEngine``, whose URL it takes), the store has its own
  connections and runs each call in a thread of its own pool (``pool_size`` threads, default
  8), as its own transaction. A task cancelled while it waits leaves the call to finish or
  fail whole (an ingest stops after its batch in flight): nothing is half-written.
- Given the caller's SQLAlchemy ``AsyncConnection``, or a psycopg ``AsyncConnection`` (wrapped
  in one), each call runs through :meth:`AsyncConnection.run_sync` inside the caller's
  transaction, in a savepoint, and never commits: the caller's rollback takes the store's rows
  with its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from dedup_store.config import DEFAULT_SCHEMA
from dedup_store.core.params import FingerprintParams
from dedup_store.db.server.replicas import ReadSource
from dedup_store.ingest.records import Record
from dedup_store.results import (
    AddResult,
    CheckResult,
    Cluster,
    IngestSummary,
    Match,
    Pair,
    RecordError,
    Stats,
)
from dedup_store.review.explanation import Explanation, Review
from dedup_store.service import DedupStore

if TYPE_CHECKING:
    from dedup_store.ingest.pipeline import OnBatch

T = TypeVar("T")

AsyncBind = str | AsyncEngine | AsyncConnection | psycopg.AsyncConnection[Any]

#: Items of ``clusters`` and ``pairs`` read by one call of the store's.
STREAM_CHUNK = 1000


class AsyncDedupStore:
    """:class:`~dedup_store.service.DedupStore`'s calls as coroutines (see the module).

    Open it with ``async with AsyncDedupStore(bind, ...) as store`` (or ``await
    AsyncDedupStore(bind).open()`` and ``await store.close()``). The arguments and results of
    each call are :class:`~dedup_store.service.DedupStore`'s; so are its errors.

    Args:
        bind: a database URL, a SQLAlchemy ``AsyncEngine``, or the caller's ``AsyncConnection``
            (SQLAlchemy's, or psycopg's) in a transaction.
        params, schema, options: as :class:`~dedup_store.service.DedupStore` takes them.
    """

    def __init__(
        self,
        bind: AsyncBind,
        params: FingerprintParams | Mapping[str, Any] | None = None,
        schema: str = DEFAULT_SCHEMA,
        **options: Any,
    ) -> None:
        self._bind = bind
        self._params = params
        self._schema = schema
        self._options = options
        self._store: DedupStore | None = None
        self._conn: AsyncConnection | None = None
        self._last_read: contextvars.ContextVar[ReadSource | None] = contextvars.ContextVar(
            f"dedup_store_last_read_{id(self)}", default=None
        )
        # the calls' threads, one per connection the store keeps (as DedupStore's pool_size)
        self._threads = ThreadPoolExecutor(
            max_workers=options.get("pool_size") or 8, thread_name_prefix="dedup_store"
        )

    async def open(self) -> AsyncDedupStore:
        """Open the store (creating it as :class:`DedupStore` does); returns it."""
        bind = self._bind
        if isinstance(bind, AsyncEngine):
            bind = bind.url.render_as_string(hide_password=False)
        if isinstance(bind, str):
            url = bind
            self._store = await self._in_thread(lambda: self._make(url))
            return self
        if isinstance(bind, psycopg.AsyncConnection):
            raw = bind
            engine = create_async_engine(
                "postgresql+psycopg://",
                async_creator=lambda: _returning(raw),
                poolclass=StaticPool,
                pool_reset_on_return=None,
            )
            bind = await engine.connect()
        if not isinstance(bind, AsyncConnection):
            raise TypeError(f"expected a URL, AsyncEngine or AsyncConnection, got {bind!r}")
        self._conn = bind
        self._store = await bind.run_sync(self._make)
        return self

    def _make(self, bind: Any) -> DedupStore:
        return DedupStore(bind, self._params, self._schema, **self._options)

    async def close(self) -> None:
        """Release the connections the store made (a caller's connection is left open)."""
        if self._store is not None:
            store, self._store = self._store, None
            if self._conn is None:
                await self._in_thread(store.close)
        self._threads.shutdown(wait=False)

    async def __aenter__(self) -> AsyncDedupStore:
        return await self.open()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def store(self) -> DedupStore:
        """The synchronous store underneath (for its attributes: ``params``, ``schema``)."""
        if self._store is None:
            raise RuntimeError("the store is not open: use 'async with' or 'await open()'")
        return self._store

    @property
    def last_read(self) -> ReadSource | None:
        """Where this task's last read of a store with replicas was served
        (:attr:`DedupStore.last_read <dedup_store.service.DedupStore.last_read>`; the calls
        run on the store's threads, so it is kept for the task that awaited them)."""
        return self._last_read.get()

    async def _run(self, call: Callable[[DedupStore], T]) -> T:
        store = self.store
        if self._conn is not None:
            return await self._conn.run_sync(lambda _sync: call(store))

        def calling() -> tuple[T, ReadSource | None]:
            return call(store), store.last_read  # the thread's, read on that thread

        result, source = await self._in_thread(calling)
        if source is not None:
            self._last_read.set(source)
        return result

    async def _in_thread(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, call)

    # -- the calls ------------------------------------------------------------------------

    async def add(self, *args: Any, **kwargs: Any) -> AddResult:
        """:meth:`DedupStore.add`."""
        return await self._run(lambda s: s.add(*args, **kwargs))

    async def add_many(
        self, records: Iterable[Record], *, batch_size: int = 2000, update: bool = False
    ) -> list[AddResult]:
        """:meth:`DedupStore.add_many`; cancelled, it stops after the batch being written."""
        results: list[AddResult] = []
        await self.ingest(
            records,
            batch_size=batch_size,
            update=update,
            on_batch=lambda done, _errors: results.extend(done),
        )
        return results

    async def ingest(
        self, records: Iterable[Record], *, on_batch: OnBatch | None = None, **kwargs: Any
    ) -> IngestSummary:
        """:meth:`DedupStore.ingest` (its records are read in the worker). Cancelled, it stops
        after the batch being written, which commits whole (a bulk load, one transaction,
        rolls back)."""
        stop = threading.Event()

        def each_batch(done: Sequence[AddResult], errors: list[RecordError]) -> None:
            if on_batch is not None:
                on_batch(done, errors)
            if stop.is_set():
                raise _Stopped

        call = self._run(lambda s: s.ingest(records, on_batch=each_batch, **kwargs))
        running = asyncio.ensure_future(call)
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            stop.set()
            with contextlib.suppress(_Stopped):
                await running
            raise

    async def check(self, *args: Any, **kwargs: Any) -> CheckResult:
        """:meth:`DedupStore.check`."""
        return await self._run(lambda s: s.check(*args, **kwargs))

    async def similar(self, *args: Any, **kwargs: Any) -> list[Match]:
        """:meth:`DedupStore.similar`."""
        return await self._run(lambda s: s.similar(*args, **kwargs))

    async def cluster(self, *args: Any, **kwargs: Any) -> Cluster:
        """:meth:`DedupStore.cluster`."""
        return await self._run(lambda s: s.cluster(*args, **kwargs))

    def clusters(self, *args: Any, **kwargs: Any) -> AsyncIterator[Cluster]:
        """:meth:`DedupStore.clusters`, streamed (:meth:`_stream`)."""
        return self._stream(lambda s: s.clusters(*args, **kwargs))

    def pairs(self, *args: Any, **kwargs: Any) -> AsyncIterator[Pair]:
        """:meth:`DedupStore.pairs`, streamed (:meth:`_stream`)."""
        return self._stream(lambda s: s.pairs(*args, **kwargs))

    async def _stream(self, rows: Callable[[DedupStore], Iterator[T]]) -> AsyncIterator[T]:
        """The items of the synchronous iterator ``rows`` makes, :data:`STREAM_CHUNK` at a
        time: the iterator (and the transaction it reads in) stays on the store's side, and
        each chunk is read by one call, so the loop is never blocked and the first items come
        before the last are read. Leaving the loop early ends the read."""
        items = rows(self.store)  # a generator: it reads nothing until asked

        def chunk(_sync: object = None) -> list[T]:
            return list(itertools.islice(items, STREAM_CHUNK))

        try:
            while True:
                if self._conn is not None:
                    found = await self._conn.run_sync(chunk)
                else:
                    found = await self._in_thread(chunk)
                for item in found:
                    yield item
                if len(found) < STREAM_CHUNK:
                    return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                if self._conn is not None:
                    await self._conn.run_sync(lambda _sync: close())
                else:
                    await self._in_thread(close)

    async def delete(self, *args: Any, **kwargs: Any) -> int:
        """:meth:`DedupStore.delete`."""
        return await self._run(lambda s: s.delete(*args, **kwargs))

    async def review(self, *args: Any, **kwargs: Any) -> Review:
        """:meth:`DedupStore.review`."""
        return await self._run(lambda s: s.review(*args, **kwargs))

    async def clear_review(self, *args: Any, **kwargs: Any) -> bool:
        """:meth:`DedupStore.clear_review`."""
        return await self._run(lambda s: s.clear_review(*args, **kwargs))

    async def verdicts(self) -> list[Review]:
        """:meth:`DedupStore.verdicts`."""
        return await self._run(lambda s: s.verdicts())

    async def explain(self, *args: Any, **kwargs: Any) -> Explanation:
        """:meth:`DedupStore.explain`."""
        return await self._run(lambda s: s.explain(*args, **kwargs))

    async def stats(self) -> Stats:
        """:meth:`DedupStore.stats`."""
        return await self._run(lambda s: s.stats())


class _Stopped(Exception):
    """An ingest stopped between two batches: its task was cancelled."""


async def _returning(raw: psycopg.AsyncConnection[Any]) -> psycopg.AsyncConnection[Any]:
    if raw.autocommit:
        from dedup_store.errors import DatabaseError

        raise DatabaseError(
            "the psycopg connection is in autocommit mode: give one in a transaction (the "
            "store works inside it), or a URL"
        )
    return raw
