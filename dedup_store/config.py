"""Settings from arguments and ``DEDUP_STORE_*`` environment variables.

The database is chosen in this order (:mod:`dedup_store.db.server.location`): an explicit URL
(``--db-url``), the ``DEDUP_STORE_URL`` environment variable, and finally the embedded
PostgreSQL server (:mod:`dedup_store.db.server.embedded`), which is started on demand. A store's
schema name is checked here once (:func:`validate_schema`), for the library and the command line.
This module imports nothing of the database layer.

Passwords never leave this module in clear text: :func:`redact` hides the password of a URL and
:func:`scrub` removes passwords from any message (an exception from the driver, for instance)
before it is printed. A password may hold an ``@`` that was not percent-encoded
(``postgresql://app:p@ss@host/db``), so the password is taken to run to the *last* ``@`` of
the URL: a URL with an ``@`` after its host (in a query value) is hidden up to that ``@``, which
hides too much rather than too little. This module imports SQLAlchemy only when a URL has to be
parsed, so that the command line starts quickly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from dedup_store.errors import DatabaseError, InvalidNameError

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

__all__ = [
    "DEFAULT_SCHEMA",
    "ENV_KERNELS",
    "ENV_REPLICA_URLS",
    "ENV_SCHEMA",
    "ENV_URL",
    "libpq_url",
    "normalize_url",
    "redact",
    "replica_urls",
    "schema_name",
    "scrub",
    "scrub_exception",
    "validate_schema",
]

ENV_URL = "DEDUP_STORE_URL"
ENV_SCHEMA = "DEDUP_STORE_SCHEMA"
#: URLs of streaming replicas to read from, separated by commas or white space.
ENV_REPLICA_URLS = "DEDUP_STORE_REPLICA_URLS"
#: Set to ``reference`` to run the reference kernels instead of the compiled ones.
ENV_KERNELS = "DEDUP_STORE_KERNELS"
DEFAULT_SCHEMA = "dedup"

_DRIVER = "postgresql+psycopg"
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_MASK = "***"
_ENCODE_HINT = (
    "a user or password holding @, :, / or % must be percent-encoded "
    "(@ is %40, : is %3A, / is %2F, % is %25)"
)
# scheme://user:password@ -- the password is anything up to the last "@" of the URL (an "@"
# in a password is often left unencoded, and a "/" may be in it too).
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)(?P<pw>\S*)@")
# libpq key/value form and URL query strings: password=secret, password='se cret'.
_KV_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|[^\s&;,]+)", re.I)


def normalize_url(url: str) -> str:
    """Point a PostgreSQL URL at the psycopg 3 driver.

    ``postgresql://`` and ``postgres://`` become ``postgresql+psycopg://``; a URL that already names
    a driver is kept as it is.

    Args:
        url: A database URL.

    Returns:
        The URL as SQLAlchemy should receive it.

    Raises:
        DatabaseError: The URL cannot be parsed (its message says how to encode a password),
            holds an unencoded ``@`` before its host, or is not a PostgreSQL URL.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    head = url.split("?", 1)[0].partition("://")[2]
    if head.count("@") > 1:  # the user or password holds an "@" that was not encoded
        raise DatabaseError(f"invalid database URL: {redact(url)}: {_ENCODE_HINT}")
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise DatabaseError(
            f"invalid database URL: {redact(url)} (expected "
            f"postgresql://user:password@host:port/database; {_ENCODE_HINT})"
        ) from None
    backend = parsed.drivername.split("+", 1)[0]
    if backend not in _POSTGRES_SCHEMES:
        raise DatabaseError(
            f"not a PostgreSQL URL: {redact(url)} (expected postgresql://user@host:port/database)"
        )
    if "+" not in parsed.drivername:
        parsed = parsed.set(drivername=_DRIVER)
    elif backend == "postgres":
        parsed = parsed.set(drivername="postgresql" + parsed.drivername[len(backend) :])
    return parsed.render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """``url`` as libpq (``psql``, ``pg_dump``) takes it: ``postgresql://`` without a driver.

    Args:
        url: A PostgreSQL URL, with or without a driver (``postgresql+psycopg://``).

    Returns:
        The same URL with the scheme ``postgresql``.
    """
    scheme, sep, rest = url.partition("://")
    if sep and scheme.split("+", 1)[0] in _POSTGRES_SCHEMES:
        return f"postgresql://{rest}"
    return url


def redact(url: str | URL) -> str:
    """Return ``url`` with its password (also a ``password=`` query item) replaced by ``***``.

    This is the one place that hides passwords of URLs: everything between ``user:`` and the
    last ``@`` is hidden, so an unencoded ``@`` in a password leaks no part of it (a URL parser
    would end the password at the first ``@`` and show the rest as the host).

    Args:
        url: A database URL, as text or a SQLAlchemy ``URL``.

    Returns:
        The URL safe to print, percent-escapes decoded for reading.
    """
    text = url if isinstance(url, str) else url.render_as_string(hide_password=False)
    return scrub(unquote(scrub(text)))


def scrub(message: str, secrets: Iterable[str] = ()) -> str:
    """Remove passwords from an arbitrary message.

    Hides the password part of every ``scheme://user:password@`` URL, every ``password=...``
    item, and every literal occurrence of ``secrets`` (raw and percent-encoded).

    Args:
        message: Text that may contain passwords, e.g. a driver's error message.
        secrets: Passwords known to the caller (for instance the one in the URL it connected with).

    Returns:
        The message with each password replaced by ``***``.
    """
    for secret in secrets:
        if secret:
            for form in {secret, quote(secret, safe="")}:
                # whole words only: hiding every "b" of a message would hide nothing
                message = re.sub(rf"(?<!\w){re.escape(form)}(?!\w)", _MASK, message)
    message = _URL_PASSWORD.sub(lambda m: m["head"] + (_MASK if m["pw"] else "") + "@", message)
    return _KV_PASSWORD.sub(lambda m: m["head"] + _MASK, message)


def scrub_exception(exc: BaseException, url: str | URL | None = None) -> str:
    """Return the message of ``exc`` without passwords.

    Args:
        exc: Any exception, typically from SQLAlchemy or psycopg.
        url: The URL that was used, so that its password is removed even where it appears bare.

    Returns:
        ``str(exc)`` scrubbed by :func:`scrub`.
    """
    return scrub(str(exc), passwords_of(url))


def passwords_of(url: str | URL | None) -> list[str]:
    """The password of ``url`` in every form it may be printed in (none when it has none).

    The password runs from ``user:`` to the last ``@`` (see :func:`redact`); the result holds
    it as written, percent-decoded, and the parts between its ``@`` characters, which is how a
    driver shows it when it took the part after the first ``@`` for the host.
    """
    if url is None:
        return []
    text = url if isinstance(url, str) else url.render_as_string(hide_password=False)
    found: list[str] = []
    match = _URL_PASSWORD.match(text.strip())
    if match and match["pw"]:
        found.append(match["pw"])
    found.extend(m["pw"].strip("'") for m in _KV_PASSWORD.finditer(text))
    forms = {form for pw in found for form in (pw, unquote(pw))}
    pieces = {piece for form in forms for piece in form.split("@")}
    return sorted((forms | pieces) - {""}, key=len, reverse=True)


def schema_name(schema: str | None = None) -> str:
    """Return the PostgreSQL schema that holds the store's tables.

    Args:
        schema: An explicit name; otherwise ``DEDUP_STORE_SCHEMA``, otherwise ``"dedup"``.

    Returns:
        The schema name.

    Raises:
        InvalidNameError: The name is refused by
            :func:`validate_schema`.
    """
    return validate_schema(schema or os.environ.get(ENV_SCHEMA, "").strip() or DEFAULT_SCHEMA)


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


def replica_urls(given: Iterable[str] = ()) -> list[str]:
    """The replicas' URLs: those ``given`` (``--replica-url``), else those of
    ``DEDUP_STORE_REPLICA_URLS`` (separated by commas or white space)."""
    urls = [url.strip() for url in given if url.strip()]
    if urls:
        return urls
    return [url for url in re.split(r"[\s,]+", os.environ.get(ENV_REPLICA_URLS, "")) if url]
