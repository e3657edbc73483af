"""Input records: what makes one storable, and how a bad one is reported.

Every record is checked here once, before it is fingerprinted: its id, its text and its
metadata. A bad record becomes a :class:`~dedup_store.results.RecordError` naming its file and
line (or its number in the input), so that ``ingest`` can skip it and go on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from dedup_store.core.validation import validate_text
from dedup_store.errors import InvalidDocumentError, UnknownDocumentError, quote_id
from dedup_store.results import Document, RecordError

Record = Document | tuple[str, str] | tuple[str, str, Mapping[str, Any] | None]
"""What ``add_many`` and ``ingest`` take: documents, or ``(id, text[, meta])`` tuples."""
MAX_ID_BYTES = 1024
"""Longest external id, in UTF-8 bytes."""
MAX_META_DEPTH = 100
"""Deepest nesting of lists and objects in metadata."""


def as_document(record: Record) -> Document:
    """A record as a :class:`Document`."""
    if isinstance(record, Document):
        return record
    if isinstance(record, tuple) and len(record) in (2, 3):
        return Document(*record)
    raise InvalidDocumentError(
        f"expected a Document or an (id, text[, meta]) tuple, got {type(record).__name__}"
    )


def batches(records: Iterable[Record], size: int, max_chars: int) -> Iterator[list[Document]]:
    """Lists of at most ``size`` documents and (unless one document is larger) ``max_chars``."""
    batch: list[Document] = []
    chars = 0
    for record in records:
        document = as_document(record)
        batch.append(document)
        chars += len(document.text) if isinstance(document.text, str) else 0
        if len(batch) >= size or chars >= max_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def validate_document(doc: Document, max_bytes: int) -> None:
    """Check that a record can be stored: its id, text and metadata.

    Raises:
        InvalidDocumentError: the first problem found.
    """
    validate_id(doc.id)
    validate_text(doc.text, max_bytes)
    if doc.meta is not None:
        validate_meta(doc.meta)


def stored_ids(*ids: str) -> None:
    """Refuse ids that no stored document can have (a NUL character: :func:`validate_id` refuses
    it when a document is added), before they reach the database, which cannot take them.

    Raises:
        UnknownDocumentError: naming the first such id.
    """
    for doc_id in ids:
        if not nameable(doc_id):
            raise UnknownDocumentError(doc_id)


def nameable(doc_id: str) -> bool:
    """Whether a stored document can have id ``doc_id`` (it has no NUL character)."""
    return "\x00" not in doc_id


def validate_id(doc_id: object) -> None:
    """Check an external id: a non-empty string, valid Unicode, without NUL, short enough.

    The limit is in UTF-8 bytes (:data:`MAX_ID_BYTES`), well under the size a btree index
    entry may have in PostgreSQL (2,704 bytes), so 1,024 ASCII characters fit but only 341
    Chinese ones.

    Raises:
        InvalidDocumentError: naming the problem (and the id, shortened).
    """
    if not isinstance(doc_id, str):
        raise InvalidDocumentError(f"document id must be a string, got {type(doc_id).__name__}")
    if not doc_id:
        raise InvalidDocumentError("document id is empty")
    if "\x00" in doc_id:
        raise InvalidDocumentError(f"document id {quote_id(doc_id)} contains a NUL character")
    try:
        size = len(doc_id.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidDocumentError(
            f"document id {quote_id(doc_id)} is not valid Unicode "
            f"(a lone surrogate at character {e.start})"
        ) from None
    if size > MAX_ID_BYTES:  # so more than 80 characters: quote_id shows the size
        raise InvalidDocumentError(
            f"document id {quote_id(doc_id)} is longer than the limit of {MAX_ID_BYTES} bytes"
        )


def validate_meta(meta: object) -> None:
    """Check metadata: a mapping that JSON (and PostgreSQL's jsonb) can hold.

    Raises:
        InvalidDocumentError: not a mapping, nested deeper than :data:`MAX_META_DEPTH`, not
            serializable, NaN or infinite numbers, lone surrogates or NUL characters.
    """
    if not isinstance(meta, Mapping):
        raise InvalidDocumentError(f"metadata must be a mapping, got {type(meta).__name__}")
    if _depth_over(meta, MAX_META_DEPTH):
        raise InvalidDocumentError(f"metadata is nested deeper than {MAX_META_DEPTH} levels")
    try:
        encoded = json.dumps(meta, ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        if "Out of range float" in str(e):
            raise InvalidDocumentError("metadata holds NaN or Infinity (not JSON)") from None
        raise InvalidDocumentError(f"metadata is not JSON-serializable: {e}") from None
    except TypeError as e:
        raise InvalidDocumentError(f"metadata is not JSON-serializable: {e}") from None
    if "\\u0000" in encoded:
        raise InvalidDocumentError("metadata contains a NUL character")
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidDocumentError("metadata is not valid Unicode (a lone surrogate)") from None


def _depth_over(value: object, limit: int) -> bool:
    """Whether containers nest more than ``limit`` levels deep (without recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
    return False


def record_error(doc: Document, message: str, number: int | None = None) -> RecordError:
    """The error of a bad record; its id only when the id itself is valid.

    Args:
        doc: the record.
        message: what is wrong.
        number: the record's number in the input, used as its line when it has no source.
    """
    valid_id = isinstance(doc.id, str) and not _id_problem(doc.id)
    line = doc.line if doc.source is not None or number is None else number
    return RecordError(doc.source, line, doc.id if valid_id else None, message)


def lookup_ids(documents: Sequence[Document]) -> list[str]:
    """The ids of a batch worth looking up in the store (valid ones; bad ones are reported)."""
    return [d.id for d in documents if isinstance(d.id, str) and not _id_problem(d.id)]


def _id_problem(doc_id: str) -> bool:
    try:
        validate_id(doc_id)
    except InvalidDocumentError:
        return True
    return False


def describe(error: RecordError) -> str:
    """A record error as one line, its id quoted and shortened (:func:`quote_id`)."""
    if error.source and error.line:
        where = f"{error.source}:{error.line}: "
    else:
        where = f"record {error.line}: " if error.line else ""
    what = f"document {quote_id(error.external_id)}: " if error.external_id else ""
    return f"{where}{what}{error.message}"
