"""SQL names of a store: the schema name is validated once, and every name is quoted.

A store's schema name comes from its caller (an argument, ``--schema`` or
``DEDUP_STORE_SCHEMA``). :func:`~dedup_store.config.validate_schema` accepts only plain
identifiers that are not PostgreSQL's own schemas, and every statement still composes names
through :func:`quote` (SQLAlchemy's PostgreSQL quoting, which always quotes and doubles embedded
quotes), so nothing given by a user reaches SQL text unquoted.
"""

from __future__ import annotations

import functools
from typing import Any

from dedup_store.config import validate_schema as validate_schema


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return str(_preparer().quote_identifier(name))


def qualified(schema: str, name: str | None = None) -> str:
    """The quoted schema, or ``schema.name`` with both parts quoted."""
    return quote(schema) if name is None else f"{quote(schema)}.{quote(name)}"


def regclass(schema: str, name: str) -> str:
    """SQL: the relation ``schema.name`` as a ``regclass`` constant, which the server resolves
    once, when it plans the statement (a parameter cast to ``regclass`` is looked up in the
    catalog on every execution)."""
    literal = qualified(schema, name).replace("'", "''")
    return f"CAST('{literal}' AS regclass)"


@functools.cache
def _preparer() -> Any:
    """SQLAlchemy's PostgreSQL quoting, loaded on first use (validating a name needs none)."""
    from sqlalchemy.dialects import postgresql

    return postgresql.dialect().identifier_preparer  # type: ignore[no-untyped-call]
