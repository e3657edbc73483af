"""The exception tree of dedup_store.

Every error the package raises on purpose derives from :class:`DedupStoreError`, so a caller (and
the CLI) can catch one class. This module imports nothing else of ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DedupStoreError(Exception):
    """Base class of every error raised by dedup_store."""

    exit_code = 1


class OutputError(DedupStoreError):
    """A file the store writes (a report) cannot be written there: a missing folder, no room,
    no permission, or a path that is neither a regular file nor missing."""


class InvalidParamsError(DedupStoreError, ValueError):
    """Fingerprint parameters that are out of range or inconsistent."""

    exit_code = 2


class ParamsMismatchError(DedupStoreError):
    """Two sets of fingerprint parameters that must be equal differ.

    Attributes:
        differences: ``{name: (ours, theirs)}`` for every differing parameter.
    """

    exit_code = 3

    def __init__(
        self, differences: Mapping[str, tuple[Any, Any]], context: str = "", hint: str = ""
    ) -> None:
        self.differences = dict(differences)
        listed = ", ".join(f"{k}: {a!r} != {b!r}" for k, a, b in _rows(self.differences))
        prefix = f"{context}: " if context else ""
        suffix = f"; {hint}" if hint else ""
        super().__init__(f"{prefix}fingerprint parameters differ ({listed}){suffix}")


def _rows(diff: Mapping[str, tuple[Any, Any]]) -> list[tuple[str, Any, Any]]:
    return [(k, a, b) for k, (a, b) in sorted(diff.items())]


class InvalidNameError(DedupStoreError, ValueError):
    """A schema (or other SQL) name that is not a plain identifier."""

    exit_code = 2


class InvalidDocumentError(DedupStoreError, ValueError):
    """A document that cannot be fingerprinted: bad bytes, NUL characters, too large."""

    exit_code = 4


class EmptyDocumentError(InvalidDocumentError):
    """A document with no tokens left after canonicalization.

    Empty documents get no fingerprint at all: a zero fingerprint would match every other empty
    document and nothing else meaningfully.
    """

    #: What every empty document is told, whichever way it came in.
    MESSAGE = "document is empty after canonicalization (no words left)"

    def __init__(self, message: str = MESSAGE) -> None:
        super().__init__(message)


class InputFormatError(DedupStoreError, ValueError):
    """A malformed input record; names the file and line it came from."""

    exit_code = 4

    def __init__(self, message: str, source: str = "", line: int | None = None) -> None:
        self.source = source
        self.line = line
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {message}" if where else message)


class UnknownDocumentError(DedupStoreError, KeyError):
    """An external id that is not in the store."""

    exit_code = 5

    def __init__(self, external_id: str) -> None:
        self.external_id = external_id
        super().__init__(external_id)

    def __str__(self) -> str:
        return f"unknown document id: {quote_id(self.external_id)}"


class StoreNotInitializedError(DedupStoreError):
    """The database has no dedup_store schema yet."""

    exit_code = 6


class SchemaOutdatedError(DedupStoreError):
    """The database schema is behind (or ahead of) this version of the code."""

    exit_code = 6


class ForeignSchemaError(DedupStoreError):
    """The schema holds another application's Alembic migrations, not a store's."""

    exit_code = 6


class SparkError(DedupStoreError):
    """Apache Spark cannot run an ingest: the spark extra is not installed, the master URL is
    not one Spark takes, or the master does not answer."""


class DatabaseError(DedupStoreError):
    """A database problem we could not handle (connection refused, permission denied...).

    Attributes:
        sqlstate: the server's SQLSTATE code of the error, when it came from the server.
        detail: what went wrong without naming the database (its URL and options), for
            answers to clients other than the operator (the HTTP service's).
    """

    exit_code = 7
    sqlstate: str | None = None
    detail: str | None = None


class UnsupportedServerError(DatabaseError):
    """A PostgreSQL server older than the store's SQL needs (``bit_count``: PostgreSQL 14).

    Attributes:
        server_version: the server's ``server_version_num`` (``130011`` for 13.11).
        minimum: the oldest ``server_version_num`` the store runs on.
    """

    def __init__(self, server_version: int, minimum: int) -> None:
        self.server_version = server_version
        self.minimum = minimum
        super().__init__(
            f"PostgreSQL {_release(server_version)} is too old: dedup_store needs PostgreSQL "
            f"{minimum // 10000} or newer (server_version_num {server_version} < {minimum})"
        )


def _release(version_num: int) -> str:
    """``server_version_num`` as PostgreSQL writes its release (``13.11``, ``9.6.24``)."""
    major, rest = divmod(version_num, 10000)
    return f"{major}.{rest}" if major >= 10 else f"{major}.{rest // 100}.{rest % 100}"


class OwnerRequiredError(DatabaseError):
    """Work that drops and builds the store's indexes (a bulk load, settling the key tiers), which
    PostgreSQL allows only the owner of its tables, asked of another role.

    Attributes:
        owner: the role that owns the store's tables.
    """

    sqlstate = "42501"  # insufficient_privilege

    def __init__(self, work: str, owner: str) -> None:
        self.owner = owner
        super().__init__(
            f"{work} drops and builds the store's indexes, which only the owner of its tables "
            f"(role {owner!r}, or a member of it) may do: run it as that role"
        )


class ConflictError(DatabaseError):
    """Concurrent writers met in a way that only running the transaction again resolves: a
    deadlock, or a serialization failure. In a transaction of its own the store runs its work
    again; inside the caller's transaction it cannot (the caller's earlier work would be lost),
    so the caller rolls its transaction back and runs it again.
    """


ID_SHOWN_CHARS = 80
"""Characters of an id shown in a message; the rest is replaced by its length."""


def quote_id(value: object, limit: int = ID_SHOWN_CHARS) -> str:
    """An id as messages show it: quoted, control characters escaped, cut after ``limit``.

    Args:
        value: the id (any object; a non-string is shown by its ``repr``).
        limit: characters kept of a longer id, followed by its size in UTF-8 bytes.

    Returns:
        ``repr(value)`` when short, else e.g. ``'abc…' (4000 bytes)``.
    """
    if not isinstance(value, str) or len(value) <= limit:
        return repr(value)
    size = len(value.encode("utf-8", "surrogatepass"))
    return f"{value[:limit]!r}… ({size} bytes)"
