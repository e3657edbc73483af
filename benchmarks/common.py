"""What every benchmark script shares: the database options and the scratch schemas.

The database of a benchmark is ``--url``, by default ``$DEDUP_STORE_TEST_URL`` or the local
test database; a store lives in a schema of its own (``--schema`` where a script lets it be
chosen), dropped afterwards unless ``--keep``; ``--reuse`` takes a store a ``--keep`` run left.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import sqlalchemy as sa
from psycopg import sql

from dedup_store.db.schema.names import quote

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
URL_ENV = "DEDUP_STORE_TEST_URL"
URL_HELP = "PostgreSQL URL (default $DEDUP_STORE_TEST_URL or %(default)s)"


def default_url(fallback: str = DEFAULT_URL) -> str:
    """``$DEDUP_STORE_TEST_URL``, or ``fallback`` when it is not set."""
    return os.environ.get(URL_ENV, fallback)


def add_url(
    parser: argparse.ArgumentParser, help: str | None = URL_HELP, fallback: str = DEFAULT_URL
) -> None:
    """``--url``: the PostgreSQL URL, from ``$DEDUP_STORE_TEST_URL`` unless given."""
    parser.add_argument("--url", default=default_url(fallback), help=help)


def add_seed(parser: argparse.ArgumentParser, default: int, help: str | None = None) -> None:
    """``--seed``: the seed of the script's corpus (and of whatever else it draws)."""
    parser.add_argument("--seed", type=int, default=default, help=help)


def add_store_options(
    parser: argparse.ArgumentParser,
    *,
    keep: str,
    schema: tuple[str, str] | None = None,
    reuse: str | None = None,
) -> None:
    """``--schema`` (when ``schema`` gives its default and help), ``--reuse`` (when ``reuse``
    gives its help) and ``--keep``, in that order."""
    if schema is not None:
        parser.add_argument("--schema", default=schema[0], help=schema[1])
    if reuse is not None:
        parser.add_argument("--reuse", action="store_true", help=reuse)
    parser.add_argument("--keep", action="store_true", help=keep)


def sqlalchemy_url(url: str) -> str:
    """``url`` with the psycopg 3 driver named, as SQLAlchemy needs it."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def conninfo(url: str) -> str:
    """``url`` as libpq accepts it (without a SQLAlchemy driver name)."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def drop_schema(target: sa.Engine | str, schema: str) -> None:
    """Drop ``schema`` and everything in it, if it exists, through an engine or a URL."""
    if isinstance(target, str):
        with psycopg.connect(conninfo(target), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        return
    with target.begin() as conn:
        conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE"))


@contextmanager
def scratch_schema(target: sa.Engine | str, schema: str, keep: bool = False) -> Iterator[str]:
    """A fresh ``schema`` for a store: dropped before, and after unless ``keep``."""
    drop_schema(target, schema)
    try:
        yield schema
    finally:
        if not keep:
            drop_schema(target, schema)
