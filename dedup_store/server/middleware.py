"""The ASGI middleware in front of every request: the bearer token, the request size limit,
a request id, metrics and the access log."""

from __future__ import annotations

import hmac
import itertools
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from dedup_store.server.errors import RequestError, too_large
from dedup_store.server.logs import ACCESS, SERVER
from dedup_store.server.metrics import Metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths answered without the token: the probes, and the description of the API.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
#: Where ``/docs`` takes Swagger UI's files from (answered without the token too).
DOCS_STATIC = "/docs/static"

_access = logging.getLogger(ACCESS)
_log = logging.getLogger(SERVER)
#: Request ids made here: this process's random prefix and a count (``os.urandom`` for each
#: request, as ``uuid4`` does, is a system call).
_PROCESS = secrets.token_hex(4)
_numbers = itertools.count(1)


class Guard:
    """Checks the token and the body's size, times the request, counts it and logs it.

    Args:
        app: the application.
        token: the bearer token every request but those of :data:`OPEN_PATHS` must carry
            (``Authorization: Bearer TOKEN``); ``None``: no token asked.
        max_request_bytes: largest request body; a larger one is answered 413 (at once when
            its ``Content-Length`` says so, else when the body reaches the limit).
        metrics: where requests are counted.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, max_request_bytes: int, metrics: Metrics
    ) -> None:
        self.app = app
        self._token = None if token is None else token.encode()
        self._limit = max_request_bytes
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request (other scopes, such as the lifespan, pass through)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:64]
        request_id = request_id or f"{_PROCESS}-{next(_numbers):x}"
        seen = {"status": 500, "out": 0, "in": 0, "started": 0}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"], seen["started"] = message["status"], 1
                extra = [(b"x-request-id", request_id.encode("latin-1"))]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            elif message["type"] == "http.response.body":
                seen["out"] += len(message.get("body", b""))
            await send(message)

        async def receiving() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen["in"] += len(message.get("body", b""))
                if seen["in"] > self._limit:
                    raise self._too_large()
            return message

        self._metrics.in_flight.inc()
        try:
            refused = self._refusal(scope, headers)
            if refused is not None:
                await answer(sending, refused)
            else:
                await self._answered(scope, receiving, sending, seen)
        finally:
            self._metrics.in_flight.dec()
            self._done(scope, seen, request_id, time.perf_counter() - started)

    async def _answered(
        self, scope: Scope, receive: Receive, send: Send, seen: dict[str, int]
    ) -> None:
        """Run the application; an error it did not answer becomes a 500 that closes the
        connection (the server would otherwise reset it, and a keep-alive client's next
        request would fail)."""
        try:
            await self.app(scope, receive, send)
        except Exception as error:
            if seen["started"]:
                raise
            _log.error("request failed", exc_info=error)
            message = f"{type(error).__name__}: see the server's log"
            await answer(send, RequestError(500, "InternalError", message))

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> RequestError | None:
        """Why the request is refused before it is read, if it is."""
        path = scope["path"]
        if self._token is not None and not (
            path in OPEN_PATHS or path.startswith(DOCS_STATIC + "/")
        ):
            given = headers.get(b"authorization")
            if given is None:
                return RequestError(401, "Unauthorized", "missing bearer token (Authorization)")
            scheme, _, credentials = given.strip().partition(b" ")
            # the scheme is case-insensitive (RFC 7235), the token is not
            if scheme.lower() != b"bearer" or not hmac.compare_digest(
                credentials.strip(), self._token
            ):
                return RequestError(401, "Unauthorized", "wrong bearer token")
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self._limit:
            return self._too_large()
        return None

    def _too_large(self) -> RequestError:
        return too_large(
            f"request body larger than the limit of {self._limit} bytes "
            "(--max-request-bytes): send a batch in several requests"
        )

    def _done(self, scope: Scope, seen: dict[str, int], request_id: str, seconds: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        method = scope["method"]
        self._metrics.observe(method, template, seen["status"], seconds)
        if not _access.isEnabledFor(logging.INFO):
            return
        client = scope.get("client")
        fields = {
            "method": method,
            "path": scope["path"],
            "route": template,
            "status": seen["status"],
            "ms": round(seconds * 1000, 3),
            "bytes_in": seen["in"],
            "bytes_out": seen["out"],
            "client": client[0] if client else None,
            "request_id": request_id,
        }
        # the record made directly: the caller's file and line, which no access line shows,
        # are not looked up
        record = _access.makeRecord(
            ACCESS, logging.INFO, "", 0, "request", (), None, extra={"fields": fields}
        )
        _access.handle(record)


async def answer(send: Send, error: RequestError) -> None:
    """Send ``error`` as a whole JSON answer."""
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if error.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="dedup-store"'))
    if error.status >= 500:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
