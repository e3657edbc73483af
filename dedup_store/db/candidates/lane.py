"""A connection whose statements run on a thread of their own, in the order they were given:
a bulk load works out a batch in memory while the statements of the batches before it run here.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy import Connection

from dedup_store.plumbing import Closing

T = TypeVar("T")


class Lane(Closing):
    """Work on ``conn`` run in order on one thread (use it as a context manager)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dedup-store-sql")
        self._given: collections.deque[Future[object]] = collections.deque()

    def submit(self, work: Callable[[Connection], T]) -> Future[T]:
        """Run ``work(conn)`` after the work given before."""
        while self._given and self._given[0].done() and self._given[0].exception() is None:
            self._given.popleft()
        future = self._thread.submit(work, self._conn)
        self._given.append(future)  # type: ignore[arg-type]
        return future

    def connection(self) -> Connection:
        """The connection, once the work given before has run; the first failure of that
        work is raised instead."""
        while self._given:
            self._given[0].result()
            self._given.popleft()
        return self._conn

    def close(self) -> None:
        """Wait for the work given, then end the thread."""
        self._thread.shutdown(wait=True)
