"""The ASGI application of ``dedup-store serve`` (FastAPI): the routes, the errors as JSON,
and the middleware of :mod:`dedup_store.server.middleware`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from dedup_store import __version__
from dedup_store.errors import DedupStoreError
from dedup_store.server import batch, documents, store
from dedup_store.server.errors import RequestError, store_error
from dedup_store.server.hot import HotRoutes
from dedup_store.server.logs import SERVER
from dedup_store.server.metrics import metrics
from dedup_store.server.middleware import DOCS_STATIC, Guard
from dedup_store.server.served import json_response, lifespan
from dedup_store.server.settings import ServerSettings, token_from_environment

_log = logging.getLogger(SERVER)

DESCRIPTION = """Find near-duplicate documents and remember them in PostgreSQL, over HTTP.

Every endpoint but `/healthz`, `/readyz`, `/docs` and `/openapi.json` needs the bearer token
the server was started with (`Authorization: Bearer TOKEN`), when it was started with one.
Errors are JSON objects with the command line's `message` and `exit_code`."""


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """The application; ``settings`` default to those ``dedup-store serve`` left in the
    environment (how each worker process gets them)."""
    settings = settings or ServerSettings.from_environment()
    app = FastAPI(
        title="dedup-store",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below, with Swagger UI's files from this machine
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings
    _offline_docs(app)
    app.include_router(documents.router)
    app.include_router(batch.router)
    app.include_router(store.router)
    app.add_exception_handler(RequestError, _request_error)  # type: ignore[arg-type]
    app.add_exception_handler(DedupStoreError, _store_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _bad_parameter)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _internal_error)
    app.add_middleware(Guard, **_guarding(settings))
    return app


def create_server(settings: ServerSettings | None = None) -> HotRoutes:
    """What ``dedup-store serve`` runs: the application of :func:`create_app`, its hot
    endpoints' plain requests answered in front of it (:mod:`dedup_store.server.hot`)."""
    app = create_app(settings)
    options = _guarding(app.state.settings)
    return HotRoutes(app, lambda answer: Guard(answer, **options))


def _guarding(settings: ServerSettings) -> dict[str, Any]:
    """The options of the :class:`Guard` in front of every request."""
    return {
        "token": token_from_environment(),
        "max_request_bytes": settings.max_request_bytes,
        "metrics": metrics(),
    }


def _offline_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI over ``/openapi.json``, its scripts and styles served from the
    ``swagger-ui-bundle`` package under ``/docs/static``, so the page works with no way out
    to a CDN (an intranet host)."""
    import swagger_ui_bundle
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.staticfiles import StaticFiles

    app.mount(
        DOCS_STATIC, StaticFiles(directory=swagger_ui_bundle.swagger_ui_path), name="docs-static"
    )

    async def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="dedup-store",
            swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_STATIC}/favicon-32x32.png",
        )

    app.add_api_route("/docs", docs, include_in_schema=False)


async def _request_error(request: Request, error: RequestError) -> Response:
    return json_response(error.body(), error.status)


async def _store_error(request: Request, error: DedupStoreError) -> Response:
    return await _request_error(request, store_error(error))


async def _bad_parameter(request: Request, error: RequestValidationError) -> Response:
    """A query or path parameter of the wrong type or out of range: 400, as the command line
    answers a bad option (exit code 2)."""
    first = error.errors()[0] if error.errors() else {}
    where = [str(part) for part in first.get("loc", ()) if part not in ("query", "path")]
    field = ".".join(where) or None
    message = f"parameter {field!r}: {first.get('msg', 'invalid')}" if field else "invalid"
    found = RequestError(400, "InvalidParamsError", message, exit_code=2, field=field)
    return await _request_error(request, found)


async def _http_error(request: Request, error: HTTPException) -> Response:
    names = {404: "NotFound", 405: "MethodNotAllowed"}
    name = names.get(error.status_code, "HTTPError")
    return json_response({"error": name, "message": str(error.detail)}, error.status_code)


async def _internal_error(request: Request, error: Exception) -> Response:
    _log.error("request failed", exc_info=error)
    body = {"error": "InternalError", "message": f"{type(error).__name__}: see the server's log"}
    return json_response(body, 500)
