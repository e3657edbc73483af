"""``dedup-store serve``: the store as an HTTP service (the ``server`` extra)."""

from __future__ import annotations

from typing import Annotated

import typer

from dedup_store.cli.context import settings_of
from dedup_store.cli.report import size_option
from dedup_store.errors import DedupStoreError, InvalidParamsError

EXTRA = "pip install 'dedup-store[server]'"


def serve(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; another than loopback needs DEDUP_STORE_TOKEN."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8080,
    workers: Annotated[int, typer.Option(min=1, help="Server processes.")] = 1,
    threads: Annotated[
        int,
        typer.Option(min=1, help="Threads per process for store calls (and database connections)."),
    ] = 8,
    max_bytes: Annotated[
        int, typer.Option("--max-bytes", min=1, help="Largest document text in UTF-8 bytes.")
    ] = 16 * 2**20,
    max_request_bytes: Annotated[
        str, typer.Option(metavar="SIZE", help="Largest request body, batches included.")
    ] = "64MB",
    timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds a request waits for a thread or for its body, and one SQL statement "
            "may run.",
        ),
    ] = 30.0,
    shutdown_timeout: Annotated[
        float, typer.Option(min=0, help="Seconds a stopping server waits for requests in flight.")
    ] = 30.0,
    report_max_bytes: Annotated[
        str, typer.Option(metavar="SIZE", help="Largest report the server writes.")
    ] = "64MB",
    batch_size: Annotated[
        int, typer.Option(min=1, max=10_000, help="Documents per transaction of a batch request.")
    ] = 500,
    replica_url: Annotated[
        list[str] | None,
        typer.Option(
            "--replica-url",
            metavar="URL",
            help="A streaming replica to send reads to (repeatable; with the global option's).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the store over HTTP (JSON; OpenAPI at /openapi.json, browsable at /docs).

    Clients send the token of DEDUP_STORE_TOKEN as "Authorization: Bearer TOKEN"; without it
    the server listens on loopback addresses only. Needs the server extra.
    """
    try:
        import fastapi  # noqa: F401 - the server extra's packages, before anything starts
        import prometheus_client  # noqa: F401

        from dedup_store.server.run import serve as run
        from dedup_store.server.settings import ServerSettings, is_loopback, token_from_environment
    except ImportError as e:
        raise DedupStoreError(f"serve needs the server extra: {EXTRA} ({e})") from None
    if token_from_environment() is None and not is_loopback(host):
        raise InvalidParamsError(
            f"--host {host} is not a loopback address: set DEDUP_STORE_TOKEN to a secret that "
            "clients send as 'Authorization: Bearer TOKEN'"
        )
    settings = settings_of(ctx)
    served = ServerSettings(
        url=settings.resolve(),
        schema=settings.schema,
        host=host,
        port=port,
        workers=workers,
        threads=threads,
        max_bytes=max_bytes,
        max_request_bytes=size_option(max_request_bytes, "--max-request-bytes") or 0,
        timeout=timeout,
        shutdown_timeout=shutdown_timeout,
        report_max_bytes=size_option(report_max_bytes, "--report-max-bytes") or 0,
        batch_size=batch_size,
        replicas=tuple(dict.fromkeys([*settings.replicas, *(replica_url or ())])),
    )
    settings.store().close()  # no store, or no database: one line and its exit code, now
    run(served)
