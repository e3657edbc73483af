"""Request bodies: JSON read as the command line reads JSON Lines, and records checked before
any store call, each problem answered with its status and the field at fault.

A document is a JSON object as a line of ``dedup-store ingest``'s JSON Lines: its ``id`` (a
string or an integer), its ``text``, and any other field kept as its metadata.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson

from dedup_store.core.validation import validate_text
from dedup_store.errors import InvalidDocumentError
from dedup_store.ingest.inputs import non_number_message, strict_json
from dedup_store.ingest.records import validate_id, validate_meta
from dedup_store.results import Document
from dedup_store.server.errors import RequestError, bad_field, bad_json, too_large

ID_FIELD = "id"
TEXT_FIELD = "text"
#: Nineteen digits in a row: a number that orjson might not read as Python's reader does.
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def json_value(raw: bytes, where: str) -> Any:
    """The JSON of a body, or of one line of a batch (``where`` names it in messages); a UTF-8
    byte order mark before it is skipped.

    Raises:
        RequestError: 400 for bytes that are not UTF-8 or not JSON (``NaN`` and ``Infinity``
            are refused, as the command line refuses them).
    """
    if _LONG_NUMBER.search(raw) is None:  # orjson reads an integer beyond 64 bits as a float
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # read again below, for the command line's message (or what orjson refuses)
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")  # a BOM, as ``ingest`` reads files
    except UnicodeDecodeError as e:
        snippet = raw[e.start : e.start + 4].hex(" ")
        raise bad_json(f"{where}: invalid UTF-8 (bytes {snippet})") from None
    try:
        return strict_json(text)
    except json.JSONDecodeError as e:
        place = f"line {e.lineno}, column {e.colno}" if e.lineno > 1 else f"column {e.colno}"
        raise bad_json(f"{where}: malformed JSON: {e.msg} ({place})") from None
    except RecursionError:
        raise bad_json(f"{where}: JSON is nested too deeply to read") from None
    except ValueError as e:
        message = non_number_message(e) or "JSON holds a number too long to read"
        raise bad_json(f"{where}: {message}") from None


def json_object(raw: bytes, where: str) -> dict[str, Any]:
    """The JSON object of a body or line.

    Raises:
        RequestError: 400 when it is not JSON, or not an object.
    """
    value = json_value(raw, where)
    if not isinstance(value, dict):
        raise bad_json(f"{where}: expected a JSON object, got {json_type(value)}")
    return value


def json_type(value: object) -> str:
    """How a message names the JSON type of ``value``."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def document_of(obj: Mapping[str, Any], where: str, max_bytes: int) -> Document:
    """The document a JSON object holds, checked as the store will check it.

    Raises:
        RequestError: 422 naming the field (``id``, ``text`` or ``meta``) of a bad record,
            413 for a text of more than ``max_bytes`` bytes in UTF-8.
    """
    if ID_FIELD not in obj:
        raise bad_field(ID_FIELD, f"{where}: missing id field {ID_FIELD!r}")
    doc_id = obj[ID_FIELD]
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
        message = f"{where}: id field {ID_FIELD!r} must be a string or integer"
        raise bad_field(ID_FIELD, message)
    doc_id = str(doc_id)
    _check(ID_FIELD, where, validate_id, doc_id)
    text = text_of(obj, where, max_bytes)
    meta = {k: v for k, v in obj.items() if k not in (ID_FIELD, TEXT_FIELD)} or None
    if meta is not None:
        _check("meta", where, validate_meta, meta)
    return Document(doc_id, text, meta)


def text_of(obj: Mapping[str, Any], where: str, max_bytes: int) -> str:
    """The ``text`` of a JSON object, checked.

    Raises:
        RequestError: 422 when it is missing, not a string or not storable (NUL, a lone
            surrogate), 413 when larger than ``max_bytes``.
    """
    if TEXT_FIELD not in obj:
        raise bad_field(TEXT_FIELD, f"{where}: missing text field {TEXT_FIELD!r}")
    text = obj[TEXT_FIELD]
    if not isinstance(text, str):
        message = f"{where}: text field {TEXT_FIELD!r} must be a string, got {json_type(text)}"
        raise bad_field(TEXT_FIELD, message)
    size = len(text) if text.isascii() else _utf8_size(text)
    if size is not None and size > max_bytes and "\x00" not in text:
        try:
            validate_text(text, max_bytes)
        except InvalidDocumentError as e:
            raise too_large(f"{where}: {e}", TEXT_FIELD) from None
    _check(TEXT_FIELD, where, validate_text, text, max_bytes)
    return text


def meta_of(obj: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The metadata of a text to check: the fields other than ``id`` and ``text``.

    Raises:
        RequestError: 422 (field ``meta``) for metadata the store cannot keep.
    """
    meta = {k: v for k, v in obj.items() if k not in (ID_FIELD, TEXT_FIELD)} or None
    if meta is not None:
        _check("meta", where, validate_meta, meta)
    return meta


def string_field(
    obj: Mapping[str, Any], name: str, where: str, *, required: bool = True
) -> str | None:
    """A string field of a JSON object (``None`` when absent and not ``required``).

    Raises:
        RequestError: 422 naming the field when it is missing or not a string.
    """
    value = obj.get(name)
    if value is None:
        if required:
            raise bad_field(name, f"{where}: missing field {name!r}")
        return None
    if not isinstance(value, str):
        raise bad_field(name, f"{where}: field {name!r} must be a string, got {json_type(value)}")
    if "\x00" in value:
        raise bad_field(name, f"{where}: field {name!r} contains a NUL character")
    return value


def _check(field: str, where: str, check: Any, *args: Any) -> None:
    """Run one of the store's checks; its error becomes a 422 naming ``field``."""
    try:
        check(*args)
    except InvalidDocumentError as e:
        raise RequestError(
            422, type(e).__name__, f"{where}: {e}", exit_code=4, field=field
        ) from None


def _utf8_size(text: str) -> int | None:
    """Bytes of ``text`` in UTF-8, ``None`` when it holds a lone surrogate."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None
