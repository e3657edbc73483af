"""SQL names of a store: the schema name is validated once, and every name is quoted.

A store's schema name comes from its caller (an argument, ``--schema`` or
``DEDUP_STORE_SCHEMA``). :func:`validate_schema` accepts only plain identifiers that are not
PostgreSQL's own schemas, and every statement still composes names through :func:`quote`
(SQLAlchemy's PostgreSQL quoting, which always quotes and doubles embedded quotes), so nothing
given by a user reaches SQL text unquoted.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from dedup_store.errors import InvalidNameError

#: Letters, digits and ``_``, not starting with a digit; PostgreSQL keeps at most 63 bytes of a
#: name (longer ones are truncated silently, so they are refused here).
SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
#: Schemas of PostgreSQL itself: ``pg_catalog``, ``pg_toast``, ``pg_temp_N``... (every ``pg_``
#: name is reserved) and ``information_schema``.
_RESERVED = re.compile(r"pg_.*|information_schema", re.IGNORECASE)


def validate_schema(name: object) -> str:
    """Return ``name`` when it is a valid store schema name.

    This is the one check of a schema name, for the library and the command line alike.

    Raises:
        InvalidNameError: not a string, not a plain identifier of at most 63 characters, or
            the name of one of PostgreSQL's own schemas.
    """
    if not isinstance(name, str) or SCHEMA_NAME.fullmatch(name) is None:
        shown = repr(name)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise InvalidNameError(
            f"invalid schema name {shown}: use ASCII letters, digits and _ "
            "(not a digit first), at most 63 characters"
        )
    if _RESERVED.fullmatch(name):
        raise InvalidNameError(
            f"invalid schema name {name!r}: the schema belongs to PostgreSQL; "
            "choose another --schema for the store"
        )
    return name


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return str(_preparer().quote_identifier(name))


def qualified(schema: str, name: str | None = None) -> str:
    """The quoted schema, or ``schema.name`` with both parts quoted."""
    return quote(schema) if name is None else f"{quote(schema)}.{quote(name)}"


@functools.cache
def _preparer() -> Any:
    """SQLAlchemy's PostgreSQL quoting, loaded on first use (validating a name needs none)."""
    from sqlalchemy.dialects import postgresql

    return postgresql.dialect().identifier_preparer  # type: ignore[no-untyped-call]
