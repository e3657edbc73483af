"""What a server process holds while it runs: its settings, the store shared by the requests,
the threads that run the store's calls, and whether it is stopping."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

from fastapi import FastAPI, Request, Response

from dedup_store.server import metrics
from dedup_store.server.calls import GuardedAdds, StoreCalls
from dedup_store.server.errors import RequestError
from dedup_store.server.logs import SERVER
from dedup_store.server.settings import ServerSettings
from dedup_store.service import DedupStore

_log = logging.getLogger(SERVER)


@dataclasses.dataclass
class Served:
    """The state of one server process (``app.state.served``).

    Attributes:
        settings: the server's settings.
        store: the store, shared by every request of the process.
        calls: the threads that run its calls.
        guarded: ``add`` that stores no duplicate it refuses (``reject_duplicates``).
        reports: one report is written at a time.
        stopping: the process was told to stop: batches end after the batch being written.
    """

    settings: ServerSettings
    store: DedupStore
    calls: StoreCalls
    guarded: GuardedAdds
    reports: asyncio.Semaphore
    stopping: bool = False

    async def body(self, request: Request) -> bytes:
        """The request's body, which must arrive within the server's timeout.

        Raises:
            RequestError: 408 when it does not, 413 when it is too large.
        """
        try:
            async with asyncio.timeout(self.settings.timeout):
                return await request.body()
        except TimeoutError:
            raise slow_body(self.settings.timeout) from None

    def close(self) -> None:
        """Wait for the store calls in flight, then release the connections."""
        self.calls.close()
        self.guarded.close()
        self.store.close()


def slow_body(timeout: float) -> RequestError:
    """The answer to a body that did not arrive in time: 408."""
    return RequestError(408, "RequestTimeout", f"the request body stalled for {timeout:g} s")


def served(request: Request) -> Served:
    """The state of the process answering ``request``."""
    state: Served = request.app.state.served
    return state


def json_bytes(data: Any) -> bytes:
    """``data`` as JSON in UTF-8, written as Python's encoder writes it (``", "`` and ``": "``
    between items, as docs/http.md shows the answers)."""
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def json_headers(body: bytes, status: int) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON answer of ``body``; a server error's closes the connection
    (``Connection: close``), so a keep-alive client starts its next request afresh."""
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]
    if status >= 500:
        headers.append((b"connection", b"close"))
    return headers


def json_response(data: Any, status: int = 200) -> Response:
    """``data`` as a JSON answer (see :func:`json_headers`)."""
    body = json_bytes(data)
    headers = {"connection": "close"} if status >= 500 else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def open_served(settings: ServerSettings) -> Served:
    """Open the store and start the threads (blocking: the store's opening reads the database).

    Raises:
        DedupStoreError: no store in the schema, or another of the store's errors.
    """
    url = settings.store_url()
    store = DedupStore(
        url,
        schema=settings.schema,
        create=False,
        max_bytes=settings.max_bytes,
        pool_size=settings.threads,
        replicas=settings.replicas,
    )
    calls = StoreCalls(settings.threads, settings.timeout)
    guarded = GuardedAdds(url, settings.schema, settings.max_bytes, settings.threads)
    return Served(settings, store, calls, guarded, asyncio.Semaphore(1))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the store when the process starts; on the way out, finish the calls in flight
    (the writes among them commit) and close it."""
    settings: ServerSettings = app.state.settings
    state = await asyncio.to_thread(open_served, settings)
    app.state.served = state
    _watch_stop_signals(state)
    _log.info(
        "serving",
        extra={
            "fields": {"schema": settings.schema, "threads": settings.threads, "pid": os.getpid()}
        },
    )
    try:
        yield
    finally:
        state.stopping = True
        await asyncio.to_thread(state.close)
        metrics.process_ended()
        _log.info("stopped")


def _watch_stop_signals(state: Served) -> None:
    """Mark the process as stopping on SIGTERM and SIGINT, before the handlers uvicorn set
    (which stop accepting connections and wait for the requests in flight)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue

        def stop(number: int, frame: FrameType | None, previous: Any = previous) -> None:
            state.stopping = True
            previous(number, frame)

        try:
            signal.signal(sig, stop)
        except ValueError:  # not the main thread: uvicorn listens to no signal there either
            return
