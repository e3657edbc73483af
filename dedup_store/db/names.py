"""SQL names of a store: the schema name is validated once, and every name is quoted.

A store's schema name comes from its caller (an argument, ``--schema`` or
``DEDUP_STORE_SCHEMA``). :func:`validate_schema` accepts only plain identifiers, and every
statement still composes names through :func:`quote` (SQLAlchemy's PostgreSQL quoting, which
always quotes and doubles embedded quotes), so nothing given by a user reaches SQL text
unquoted.
"""

from __future__ import annotations

import re

from sqlalchemy.dialects import postgresql

from dedup_store.errors import InvalidNameError

#: Letters, digits, ``_`` and ``$``, not starting with a digit or ``$``; PostgreSQL keeps at most
#: 63 bytes of a name (longer ones are truncated silently, so they are refused here).
SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
_PREPARER = postgresql.dialect().identifier_preparer  # type: ignore[no-untyped-call]


def validate_schema(name: object) -> str:
    """Return ``name`` when it is a valid store schema name.

    Raises:
        InvalidNameError: not a string, or not a plain identifier of at most 63 characters.
    """
    if not isinstance(name, str) or SCHEMA_NAME.fullmatch(name) is None:
        shown = repr(name)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise InvalidNameError(
            f"invalid schema name {shown}: use letters, digits, _ and $ "
            "(not first), at most 63 characters"
        )
    return name


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return str(_PREPARER.quote_identifier(name))


def qualified(schema: str, name: str | None = None) -> str:
    """The quoted schema, or ``schema.name`` with both parts quoted."""
    return quote(schema) if name is None else f"{quote(schema)}.{quote(name)}"
