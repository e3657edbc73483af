"""Where a store's database is: an explicit URL, the ``DEDUP_STORE_URL`` environment variable,
or the embedded PostgreSQL server, started on demand (:mod:`dedup_store.db.server.embedded`,
imported only then)."""

from __future__ import annotations

import os
from collections.abc import Callable

from dedup_store import config


def resolve_url(db_url: str | None = None, announce: Callable[[str], None] | None = None) -> str:
    """Return the SQLAlchemy URL of the database to use.

    Args:
        db_url: An explicit URL (from ``--db-url`` or the caller); wins over everything else.
        announce: Called with a line for the user when the embedded server's cluster is made
            (the first run, which takes a few seconds).

    Returns:
        A ``postgresql+psycopg://`` URL. Without ``db_url`` and ``DEDUP_STORE_URL`` the embedded
        server is started (or attached to) and its URL returned.

    Raises:
        DatabaseError: The URL is not a PostgreSQL URL, or the embedded server cannot start.
    """
    explicit = db_url if db_url else os.environ.get(config.ENV_URL, "").strip()
    if explicit:
        return config.normalize_url(explicit)
    from dedup_store.db.server import embedded

    return embedded.start(announce=announce)


def describe_source(db_url: str | None = None) -> str:
    """Say where :func:`resolve_url` takes the database from, without starting anything.

    Args:
        db_url: The explicit URL, if any.

    Returns:
        ``"argument"``, ``"environment"`` (``DEDUP_STORE_URL``) or ``"embedded"``.
    """
    if db_url:
        return "argument"
    if os.environ.get(config.ENV_URL, "").strip():
        return "environment"
    return "embedded"
