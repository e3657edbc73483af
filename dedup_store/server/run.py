"""Run the application with uvicorn, in this process or in ``workers`` processes."""

from __future__ import annotations

import os
import shutil
import tempfile

import uvicorn

from dedup_store.server.logs import log_config
from dedup_store.server.metrics import ENV_MULTIPROC
from dedup_store.server.settings import ENV_SETTINGS, ServerSettings

#: Seconds an idle keep-alive connection stays open.
KEEP_ALIVE = 5


def serve(settings: ServerSettings) -> None:
    """Serve until SIGTERM or SIGINT, then stop accepting connections, finish the requests in
    flight (at most ``shutdown_timeout`` seconds; their store calls run to their end), and
    close the store.

    With several workers, each process opens the store and counts its own metrics, which a
    scrape adds up (prometheus_client's multiprocess mode, in a temporary directory).
    """
    os.environ[ENV_SETTINGS] = settings.to_json()
    shared = None
    if settings.workers > 1 and not os.environ.get(ENV_MULTIPROC):
        shared = tempfile.mkdtemp(prefix="dedup-store-metrics-")
        os.environ[ENV_MULTIPROC] = shared
    try:
        uvicorn.run(
            "dedup_store.server.app:create_server",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            http="dedup_store.server.protocol:HttpProtocol",
            log_config=log_config(),
            access_log=False,
            server_header=False,
            timeout_keep_alive=KEEP_ALIVE,
            timeout_graceful_shutdown=int(settings.shutdown_timeout),
        )
    finally:
        if shared is not None:
            shutil.rmtree(shared, ignore_errors=True)
