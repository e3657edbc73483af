"""``POST /documents/batch``: documents as JSON Lines in, one answer per line out, streamed.

The body is read as it arrives and written in batches, one transaction each (``batch_size``
documents, or what has arrived when the client pauses), and the answers of a batch are sent
once it has committed: a line answered 201 is stored, whatever happens to the server after.
Each answer is a JSON object with the ``line`` it answers and its ``code``: 201 stored, 200
skipped or updated, 409 a duplicate refused (``reject_duplicates``), 400, 413 or 422 a bad
record (as ``dedup-store ingest`` reports it). The last line says how the request ended:
``{"done": true, ...counts}``, or ``{"done": false, "code": ..., "error": ..., "message": ...}``
when it stopped early (a bad record with ``on_error=stop``, a body too large or too slow, the
database, the server stopping); the lines not answered then were not stored.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response

from dedup_store.errors import DedupStoreError, InvalidDocumentError
from dedup_store.ingest.records import describe
from dedup_store.results import AddResult, Document, RecordError
from dedup_store.server import models
from dedup_store.server.bodies import document_of, json_object
from dedup_store.server.documents import Confirm, RejectDuplicates, Update, added, check_options
from dedup_store.server.errors import RequestError
from dedup_store.server.logs import SERVER
from dedup_store.server.metrics import metrics
from dedup_store.server.middleware import Receive, Scope, Send
from dedup_store.server.served import Served, served, slow_body

router = APIRouter()
_log = logging.getLogger(SERVER)

#: Seconds without new input after which the documents read so far are written.
FLUSH_AFTER = 0.05
#: Where a batch's messages say a record comes from (``body:17: ...``, as ``file:line``).
SOURCE = "body"
_PLACE = re.compile(rf"^{SOURCE}:(\d+): ")
MEDIA_TYPE = "application/x-ndjson"


class ClientGone(Exception):
    """The client closed the connection."""


class LinesResponse(Response):
    """An answer of JSON lines sent as they are made, while the request's body is still being
    read (Starlette's ``StreamingResponse`` would read the body itself, to see a disconnect)."""

    def __init__(self, lines: AsyncIterator[bytes]) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", MEDIA_TYPE.encode())]
        self._lines = lines

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the lines."""
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await send(start)
        async for line in self._lines:
            await send({"type": "http.response.body", "body": line, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@router.post(
    "/documents/batch",
    summary="Add documents: JSON Lines in, one answer per line out, streamed",
    responses={
        200: {
            "description": "One JSON object per input line, then a last line with `done`",
            "content": {MEDIA_TYPE: {"schema": {"type": "string"}}},
        },
        **models.ERRORS,
    },
    openapi_extra=models.body_of(models.Record, MEDIA_TYPE),
)
async def batch(
    request: Request,
    batch_size: Annotated[
        int | None,
        Query(ge=1, le=10_000, description="Documents per transaction (server default 500)."),
    ] = None,
    on_error: Annotated[
        Literal["stop", "skip"],
        Query(description="On a bad record: stop there, or answer it and go on."),
    ] = "stop",
    reject_duplicates: RejectDuplicates = False,
    confirm: Confirm = False,
    update: Update = False,
) -> Response:
    """Add the documents of a JSON Lines body (one record a line, as ``dedup-store ingest``
    reads them), answering each line once its batch has committed.

    With ``on_error=stop`` (the default) a bad record ends the request: the lines before it are
    stored and answered, nothing after it is read; ``on_error=skip`` answers it and goes on.
    With ``reject_duplicates`` each document is added in a transaction of its own.
    """
    state = served(request)
    check_options(update, reject_duplicates)
    size = batch_size or state.settings.batch_size
    run = BatchRun(state, request.receive, size, on_error, update, reject_duplicates, confirm)
    return LinesResponse(run.lines())


class BatchRun:
    """One batch request: reads its lines, writes them in batches, makes the answers."""

    def __init__(
        self,
        state: Served,
        receive: Receive,
        size: int,
        on_error: Literal["stop", "skip"],
        update: bool,
        reject: bool,
        confirm: bool,
    ) -> None:
        self.state = state
        self.receive = receive
        self.size = size
        self.on_error = on_error
        self.update = update
        self.guarded = reject and not confirm
        self.pending: list[tuple[int, Document | RequestError]] = []
        self.waiting = 0
        """Documents in :attr:`pending`."""
        self.answered = 0
        self.read_all = False
        """Whether the whole body has been read."""
        self.counts: collections.Counter[str] = collections.Counter()

    async def lines(self) -> AsyncIterator[bytes]:
        """The answers, then the last line."""
        try:
            async for line in self._run():
                yield line
        except ClientGone:
            return
        except RequestError as e:
            yield self._end(e.status, e.body())
        except DedupStoreError as e:
            error = RequestError.of(e)
            yield self._end(error.status, error.body())
        except Exception as e:
            _log.exception("batch request failed")
            yield self._end(500, {"error": "InternalError", "message": f"{type(e).__name__}"})
        await self._drain()

    async def _drain(self) -> None:
        """Read and drop what is left of a body the request stopped reading (a bad record, the
        server stopping): a connection closed with unread bytes is reset, which can lose the
        answers the client has not read yet. At most the server's timeout is spent on it."""
        deadline = time.monotonic() + self.state.settings.timeout
        while not self.read_all:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return
            try:
                message = await asyncio.wait_for(self.receive(), wait)
            except (TimeoutError, RequestError):
                return
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                return

    async def _run(self) -> AsyncIterator[bytes]:
        async for number, raw in self._input():
            if number:
                where = f"{SOURCE}:{number}"
                try:
                    found: Document | RequestError = document_of(
                        json_object(raw, where), where, self.state.settings.max_bytes
                    )
                except RequestError as e:
                    found = e
                self.pending.append((number, found))
                self.waiting += isinstance(found, Document)
                stop = isinstance(found, RequestError) and self.on_error == "stop"
                if not stop and self.waiting < self.size:
                    continue
            lines, ended = await self._flush()
            for line in lines:
                yield line
            if ended is not None:
                yield ended
                return
            if self.state.stopping:
                message = f"the server is stopping: lines after {self.answered} were not read"
                error = RequestError(503, "ShuttingDown", f"{message}; send them again")
                yield self._end(503, error.body())
                return
        lines, ended = await self._flush()
        for line in lines:
            yield line
        yield ended or self._line({"done": True, "lines": self.answered, **self.counts})

    async def _input(self) -> AsyncIterator[tuple[int, bytes]]:
        """The body's lines with their numbers (blank lines counted, not given), and
        ``(0, b"")`` when the client pauses with documents read."""
        buffer = bytearray()
        number, more = 0, True
        timeout = self.state.settings.timeout
        last = time.monotonic()
        while more:
            wait = timeout - (time.monotonic() - last)
            if wait <= 0:
                raise slow_body(timeout)
            try:
                message = await asyncio.wait_for(
                    self.receive(), min(wait, FLUSH_AFTER) if self.pending else wait
                )
            except TimeoutError:
                if self.pending:
                    yield 0, b""
                    last = time.monotonic()  # the server's own time does not count
                continue
            if message["type"] == "http.disconnect":
                raise ClientGone
            last = time.monotonic()
            scanned = len(buffer)
            buffer += message.get("body", b"")
            more = bool(message.get("more_body", False))
            start = 0
            while (end := buffer.find(b"\n", scanned)) >= 0:
                number += 1
                if buffer[start:end].strip():
                    yield number, bytes(buffer[start:end])
                start = scanned = end + 1
            del buffer[:start]
        self.read_all = True
        if buffer.strip():
            yield number + 1, bytes(buffer)

    async def _flush(self) -> tuple[list[bytes], bytes | None]:
        """Write the documents read and answer every line read, in order; with the last line
        when a bad record stops the request (the lines before it are stored)."""
        pending, self.pending, self.waiting = self.pending, [], 0
        documents = [(n, d) for n, d in pending if isinstance(d, Document)]
        answers: dict[int, bytes] = {}
        stopped: tuple[int, RequestError] | None = None
        if documents and self.guarded:
            for number, doc in documents:
                result, kept = await self.state.calls.run(
                    self.state.guarded.add, doc.id, doc.text, doc.meta, True
                )
                answers[number] = self._added(number, result, kept)
        elif documents:
            results, errors, stopped = await self.state.calls.run(self._ingest, documents)
            answers.update(self._results(documents, results, errors))
        out = []
        for number, found in pending:
            if isinstance(found, RequestError):
                if self.on_error == "stop":
                    stopped = (number, found)
            elif stopped is not None and number == stopped[0]:
                found = stopped[1]
            if isinstance(found, RequestError):
                answers[number] = self._error(number, found)
            if number in answers:
                out.append(answers[number])
                self.answered = number
            if stopped is not None and number == stopped[0]:
                return out, self._end(stopped[1].status, stopped[1].body())
        return out, None

    def _ingest(
        self, documents: Sequence[tuple[int, Document]]
    ) -> tuple[list[AddResult], list[RecordError], tuple[int, RequestError] | None]:
        """Store ``documents`` (on a store thread): the results of those stored, the bad
        records found by the store, and the one that stopped it (``on_error=stop``)."""
        results: list[AddResult] = []
        errors: list[RecordError] = []

        def on_batch(done: Sequence[AddResult], bad: list[RecordError]) -> None:
            results.extend(done)
            errors.extend(bad)

        records = [Document(d.id, d.text, d.meta, SOURCE, n) for n, d in documents]
        try:
            self._store(records, on_batch)
        except InvalidDocumentError as e:  # on_error=stop: the batch holding it is not written
            place = _PLACE.match(str(e))
            number = int(place[1]) if place else documents[len(results)][0]
            before = [r for r in records[len(results) :] if r.line is not None and r.line < number]
            if before:  # the lines before the bad record are stored, as they are answered
                self._store(before, on_batch)
            error = RequestError(422, type(e).__name__, str(e), exit_code=4, field="text")
            return results, errors, (number, error)
        return results, errors, None

    def _store(self, records: list[Document], on_batch: Any) -> None:
        self.state.store.ingest(
            records,
            batch_size=len(records),
            update=self.update,
            on_error=self.on_error,
            on_batch=on_batch,
            bulk=False,
        )

    def _results(
        self,
        documents: Sequence[tuple[int, Document]],
        results: Sequence[AddResult],
        errors: Sequence[RecordError],
    ) -> dict[int, bytes]:
        """The answers of the documents written, by line."""
        bad = {error.line: error for error in errors}
        answers: dict[int, bytes] = {}
        stored = iter(results)
        for number, _ in documents:
            if number in bad:
                error = RequestError(
                    422, "EmptyDocumentError", describe(bad[number]), exit_code=4, field="text"
                )
                answers[number] = self._error(number, error)
                continue
            result = next(stored, None)
            if result is None:  # stopped before it
                break
            answers[number] = self._added(number, result, True)
        return answers

    def _added(self, number: int, result: AddResult, kept: bool) -> bytes:
        code, body = added(result, kept)
        self.counts[str(result.status) if kept else "rejected"] += 1
        return self._line({"line": number, "code": code, **body})

    def _error(self, number: int, error: RequestError) -> bytes:
        self.counts["errors"] += 1
        metrics().added("error")
        return self._line({"line": number, "code": error.status, **error.body()})

    def _end(self, code: int, body: dict[str, Any]) -> bytes:
        return self._line({"done": False, "code": code, "lines": self.answered, **body})

    @staticmethod
    def _line(data: dict[str, Any]) -> bytes:
        return json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n"
