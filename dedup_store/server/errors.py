"""Errors as HTTP answers: each error class of :mod:`dedup_store.errors` has one status, as it
has one exit code on the command line, and the answer carries the command line's message.

An answer is a JSON object: ``error`` (the class name), ``message``, ``exit_code`` (the command
line's for the same error) and, for a bad record, ``field`` (``id``, ``text``, ``meta`` or the
name of a parameter).
"""

from __future__ import annotations

from typing import Any

from dedup_store.errors import DatabaseError, DedupStoreError, EmptyDocumentError

#: The HTTP status of each exit code of the command line (see docs/cli.md).
STATUS_OF_EXIT_CODE = {
    1: 500,  # DedupStoreError: any other error of ours
    2: 400,  # InvalidParamsError, InvalidNameError: parameters out of range or inconsistent
    3: 409,  # ParamsMismatchError: the store was made with other fingerprint parameters
    4: 422,  # InvalidDocumentError, EmptyDocumentError, InputFormatError: a bad record
    5: 404,  # UnknownDocumentError
    6: 503,  # StoreNotInitializedError, SchemaOutdatedError, ForeignSchemaError
    7: 503,  # DatabaseError, OwnerRequiredError: the database cannot be reached or refused
}


def status_of(error: DedupStoreError) -> int:
    """The HTTP status of one of our errors."""
    return STATUS_OF_EXIT_CODE.get(error.exit_code, 500)


class RequestError(Exception):
    """A request refused by the server itself: unreadable JSON (400), a bad record naming its
    field (422), too large (413), no or a wrong token (401), too slow or too busy.

    Attributes:
        status: the HTTP status.
        error: the name of the error (a class of :mod:`dedup_store.errors` where the command
            line has one for the same problem).
        exit_code: the command line's exit code for the same problem, if it has one.
        field: the field or parameter at fault.
    """

    def __init__(
        self,
        status: int,
        error: str,
        message: str,
        *,
        exit_code: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.exit_code = exit_code
        self.field = field

    @classmethod
    def of(cls, error: DedupStoreError, field: str | None = None) -> RequestError:
        """One of our errors as a request error, with its status and exit code."""
        name = type(error).__name__
        message = str(error)
        if isinstance(error, DatabaseError):  # never the database's URL or options
            message = error.detail or "the database refused the request or cannot be reached"
        return cls(status_of(error), name, message, exit_code=error.exit_code, field=field)

    def body(self) -> dict[str, Any]:
        """The JSON answer."""
        answer: dict[str, Any] = {"error": self.error, "message": str(self)}
        if self.exit_code is not None:
            answer["exit_code"] = self.exit_code
        if self.field is not None:
            answer["field"] = self.field
        return answer


def store_error(error: DedupStoreError) -> RequestError:
    """The answer to one of the store's errors (an empty document's names the field
    ``text``: no words were left in it)."""
    return RequestError.of(error, "text" if isinstance(error, EmptyDocumentError) else None)


def bad_json(message: str) -> RequestError:
    """A body (or a line of one) that is not JSON, or not the JSON expected: 400."""
    return RequestError(400, "MalformedJSON", message, exit_code=4)


def bad_field(field: str, message: str, error: str = "InputFormatError") -> RequestError:
    """A record, or a body, with a field missing or of the wrong type: 422."""
    return RequestError(422, error, message, exit_code=4, field=field)


def too_large(message: str, field: str | None = None) -> RequestError:
    """A request body or a document larger than the server's limit: 413."""
    error = "RequestTooLarge" if field is None else "InvalidDocumentError"
    return RequestError(413, error, message, exit_code=4, field=field)
