"""The endpoints a content system calls on every save and every page, answered straight from
the ASGI messages: ``POST /check``, ``POST /documents``, ``GET /documents/{id}/similar`` and
``GET /documents/{id}/cluster``.

FastAPI's layers (its routing, its dependency injection, its request and response objects, its
telemetry's look at the environment) cost more Python than the store's own work on a small
document. These requests skip them: their body is read here and the endpoints' own functions
(:mod:`dedup_store.server.documents`) answer them, so the answers and the errors are the same.
A request whose query is not written plainly (``true``, ``false``, ``1``, ``0``; a number in
range; nothing percent-encoded or repeated) goes through FastAPI, whose answer, a 400 for a bad
parameter among them, is the reference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.requests import ClientDisconnect

from dedup_store.errors import DedupStoreError
from dedup_store.server import documents
from dedup_store.server.errors import RequestError, store_error
from dedup_store.server.middleware import ASGIApp, Receive, Scope, Send
from dedup_store.server.served import Served, json_bytes, json_headers, slow_body

Work = Callable[[Served, Receive], Awaitable[tuple[int, Any]]]
"""What answers one request: its status and the data of its JSON answer."""

#: Where the scope of a hot request holds its work.
_WORK = "dedup_store.work"
_PREFIX = "/documents/"
_SIMILAR = "/similar"
_CLUSTER = "/cluster"
#: How the query of a hot request may write a boolean.
_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}
#: The options of ``POST /documents``.
_ADD_OPTIONS = ("reject_duplicates", "confirm", "update")


class HotRoutes:
    """What ``dedup-store serve`` runs: the hot endpoints' plain requests answered here, behind
    a :class:`~.middleware.Guard` of their own (the token, the size limit, the metrics and the
    access log); every other request, and the lifespan, go to the application.

    Args:
        app: the application (:func:`~.app.create_app`), whose state holds the
            :class:`~.served.Served` of the process and whose routes are named in the scope of
            a request answered here (``route``: the metrics and the access log name it).
        guard: the middleware around the answers made here, as the application has it.
    """

    def __init__(self, app: FastAPI, guard: Callable[[ASGIApp], ASGIApp]) -> None:
        self.app = app
        self._state = app.state
        self._guarded = guard(self._answer)
        routes = {(method, r.path): r for r in api_routes(app.routes) for method in r.methods or ()}
        self._add = routes["POST", "/documents"]
        self._check = routes["POST", "/check"]
        self._similar = routes["GET", "/documents/{id:path}/similar"]
        self._cluster = routes["GET", "/documents/{id:path}/cluster"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a hot request, or pass it on."""
        found = self._route(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        scope["route"], scope[_WORK] = found
        await self._guarded(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Do a hot request's work; its errors and the store's are answered as the
        application answers them."""
        try:
            status, data = await scope[_WORK](self._state.served, receive)
        except RequestError as error:
            status, data = error.status, error.body()
        except DedupStoreError as error:
            answer = store_error(error)
            status, data = answer.status, answer.body()
        body = json_bytes(data)
        headers = json_headers(body, status)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _route(self, scope: Scope) -> tuple[APIRoute, Work] | None:
        """The route and the work of a hot request, ``None`` for any other."""
        if scope.get("root_path"):
            return None
        method, path = scope["method"], scope["path"]
        if method == "POST":
            if path == "/check":
                return self._check, _check
            if path == "/documents":
                options = _query(scope["query_string"], _ADD_OPTIONS, _boolean)
                if options is not None:
                    return self._add, _adding(**options)
            return None
        if method != "GET" or not path.startswith(_PREFIX):
            return None
        if path.endswith(_SIMILAR) and len(path) >= len(_PREFIX) + len(_SIMILAR):
            id = path[len(_PREFIX) : -len(_SIMILAR)]
            page = _query(scope["query_string"], ("limit", "offset"), _number)
            if page is None:
                return None
            limit, offset = page.get("limit", 100), page.get("offset", 0)
            if limit > documents.MAX_PAGE or offset > documents.MAX_OFFSET:
                return None
            scope["path_params"] = {"id": id}
            return self._similar, _similar(id, limit, offset)
        if path.endswith(_CLUSTER) and len(path) >= len(_PREFIX) + len(_CLUSTER):
            id = path[len(_PREFIX) : -len(_CLUSTER)]
            scope["path_params"] = {"id": id}
            return self._cluster, _cluster(id)
        return None


def api_routes(routes: Sequence[Any]) -> Iterator[APIRoute]:
    """The API routes among ``routes``, those of included routers too."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)  # FastAPI's included routers
        if inner is not None:
            yield from api_routes(inner.routes)


async def read_body(state: Served, receive: Receive) -> bytes:
    """The request's body, as :meth:`~.served.Served.body` reads it.

    Raises:
        RequestError: 408 when it does not arrive within the server's timeout, 413 when it is
            too large (raised by the middleware's ``receive``).
        ClientDisconnect: the client went away.
    """
    chunks: list[bytes] = []
    try:
        async with asyncio.timeout(state.settings.timeout):
            while True:
                message = await receive()
                if message["type"] == "http.request":
                    chunks.append(message.get("body", b""))
                    if not message.get("more_body", False):
                        break
                elif message["type"] == "http.disconnect":
                    raise ClientDisconnect()
    except TimeoutError:
        raise slow_body(state.settings.timeout) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _check(state: Served, receive: Receive) -> tuple[int, Any]:
    return 200, await documents.check_text(state, await read_body(state, receive))


def _adding(reject_duplicates: Any = False, confirm: Any = False, update: Any = False) -> Work:
    async def add(state: Served, receive: Receive) -> tuple[int, Any]:
        documents.check_options(update, reject_duplicates)
        raw = await read_body(state, receive)
        return await documents.add_document(state, raw, reject_duplicates, confirm, update)

    return add


def _similar(id: str, limit: int, offset: int) -> Work:
    async def similar(state: Served, receive: Receive) -> tuple[int, Any]:
        return 200, await documents.similar_page(state, id, limit, offset)

    return similar


def _cluster(id: str) -> Work:
    async def cluster(state: Served, receive: Receive) -> tuple[int, Any]:
        return 200, await documents.cluster_of(state, id)

    return cluster


def _query(query: bytes, names: Sequence[str], read: Callable[[str], Any]) -> dict[str, Any] | None:
    """The parameters ``names`` of a plain query string, each read by ``read`` (``None``: not
    plain); other parameters are ignored, as FastAPI ignores them. ``None`` when a parameter
    is percent-encoded, repeated or not read."""
    if not query:
        return {}
    if b"%" in query or b"+" in query:
        return None
    found: dict[str, Any] = {}
    for part in query.decode("latin-1").split("&"):
        name, _, value = part.partition("=")
        if name not in names:
            continue
        if name in found:
            return None
        found[name] = read(value)
        if found[name] is None:
            return None
    return found


def _boolean(value: str) -> bool | None:
    return _BOOLEANS.get(value)


def _number(value: str) -> int | None:
    """A non-negative integer written plainly (no sign, no leading zero, at most 18 digits)."""
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return None
    if len(value) > 1 and value[0] == "0":
        return None
    return int(value)
