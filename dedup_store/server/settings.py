"""The settings of ``dedup-store serve``, handed to each worker process as JSON in the
environment, and the database URL its store connects with."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
from typing import Any

from dedup_store.config import DEFAULT_SCHEMA
from dedup_store.core.validation import DEFAULT_MAX_BYTES

#: The environment variable holding the bearer token clients must send.
ENV_TOKEN = "DEDUP_STORE_TOKEN"
#: The environment variable through which the command hands its settings to the workers.
ENV_SETTINGS = "DEDUP_STORE_SERVE_SETTINGS"
#: The ``application_name`` of the server's database connections (``pg_stat_activity``).
APPLICATION_NAME = "dedup-store serve"
MIB = 2**20


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """What one server process needs to know.

    Attributes:
        url: the database URL (resolved: an explicit URL or the embedded server's).
        schema: the store's schema.
        host, port: where to listen.
        workers: server processes.
        threads: threads per process that run the store's calls, and the size of its
            connection pools.
        max_bytes: largest document text, in UTF-8 bytes (413 beyond).
        max_request_bytes: largest request body (413 beyond), batches included.
        timeout: seconds a request may wait for a free thread, or for its body to arrive, and
            that one SQL statement may run (PostgreSQL's ``statement_timeout``).
        shutdown_timeout: seconds a stopping server waits for requests in flight.
        report_max_bytes: largest report the server writes (the ``max_bytes`` of
            :meth:`~dedup_store.DedupStore.report`).
        batch_size: documents per transaction of a batch request, unless it asks for fewer.
        replicas: URLs of streaming replicas that serve the store's reads.
    """

    url: str
    schema: str = DEFAULT_SCHEMA
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    threads: int = 8
    max_bytes: int = DEFAULT_MAX_BYTES
    max_request_bytes: int = 64 * MIB
    timeout: float = 30.0
    shutdown_timeout: float = 30.0
    report_max_bytes: int = 64 * MIB
    batch_size: int = 500
    replicas: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The settings as JSON (for :data:`ENV_SETTINGS`)."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServerSettings:
        """Settings written by :meth:`to_json`."""
        values: dict[str, Any] = json.loads(text)
        values["replicas"] = tuple(values.get("replicas", ()))
        return cls(**values)

    @classmethod
    def from_environment(cls) -> ServerSettings:
        """The settings the command left in :data:`ENV_SETTINGS`."""
        return cls.from_json(os.environ[ENV_SETTINGS])

    def store_url(self) -> str:
        """:attr:`url` with the server's ``application_name`` and, as the server's bound on
        one SQL statement, PostgreSQL's ``statement_timeout`` of :attr:`timeout` seconds."""
        from sqlalchemy.engine import make_url

        parsed = make_url(self.url)
        query = dict(parsed.query)
        limit = f"-c statement_timeout={round(self.timeout * 1000)}"
        options = query.get("options")
        query["options"] = f"{options} {limit}" if isinstance(options, str) else limit
        query.setdefault("application_name", APPLICATION_NAME)
        return parsed.set(query=query).render_as_string(hide_password=False)


def token_from_environment() -> str | None:
    """The bearer token clients must send (:data:`ENV_TOKEN`), ``None`` when unset or empty."""
    return os.environ.get(ENV_TOKEN, "").strip() or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
