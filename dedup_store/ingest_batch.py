"""One batch of documents on its way into the store: validation, fingerprints, outcomes.

Everything here is done before (or after) the database transaction of the batch, so the time the
writers' lock is held is spent on SQL only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from dedup_store.core.fingerprint import FingerprintBatch, fingerprint_batch, validate_text
from dedup_store.core.params import FingerprintParams
from dedup_store.core.scripts import guess_language
from dedup_store.db.verify import merging_methods
from dedup_store.errors import (
    DedupStoreError,
    EmptyDocumentError,
    InvalidDocumentError,
    quote_id,
)
from dedup_store.results import (
    AddResult,
    Document,
    MatchRow,
    RecordError,
    Status,
    sorted_matches,
)

MAX_ID_BYTES = 1024
"""Longest external id, in UTF-8 bytes."""
MAX_META_DEPTH = 100
"""Deepest nesting of lists and objects in metadata."""


@dataclasses.dataclass
class BatchOutcome:
    """Results (in input order, bad records left out) and the bad records of a batch."""

    results: list[AddResult]
    errors: list[RecordError]


@dataclasses.dataclass
class PreparedBatch:
    """A validated, fingerprinted batch.

    Attributes:
        documents: the batch's records, in input order.
        batch: fingerprints of the records to be written.
        row_position: input position of each fingerprint row.
        known_before: ``{external id: internal id}`` of stored ids seen before fingerprinting.
        skipped: input positions reported as skipped (known ids; an id repeated in the batch,
            whose first occurrence wins).
        errors: ``(input position, error, exception class to raise)`` of bad records.
        update: replace known ids instead of skipping them.
    """

    documents: list[Document]
    batch: FingerprintBatch
    row_position: list[int]
    known_before: dict[str, int]
    skipped: list[int]
    errors: list[tuple[int, RecordError, type[DedupStoreError]]]
    update: bool

    def first_error(self) -> DedupStoreError:
        """The exception to raise for the first bad record."""
        _, error, kind = self.errors[0]
        return kind(describe(error))

    def record_errors(self) -> list[RecordError]:
        """The bad records, in input order."""
        return [error for _, error, _ in self.errors]

    def candidate_ids(self) -> list[str]:
        """External ids of the fingerprinted rows."""
        return [self.documents[p].id for p in self.row_position]

    def rows_to_insert(self, known: Mapping[str, int]) -> list[int]:
        """Fingerprint rows whose ids are not stored (``known`` is read under the lock)."""
        return [r for r, p in enumerate(self.row_position) if self.documents[p].id not in known]

    def document_of_row(self, row: int) -> Document:
        """The record of fingerprint row ``row``."""
        return self.documents[self.row_position[row]]

    def language_of_row(self, row: int) -> str:
        """A best-effort language guess from the script of the canonical text."""
        return guess_language(self.batch.canonical_texts[row])

    def twin_ids(self, known: Mapping[str, int]) -> list[int]:
        """Internal ids of the stored documents that skipped records are twins of."""
        return list({**self.known_before, **known}.values())

    def outcome(
        self,
        ids: Sequence[int],
        edges: Sequence[MatchRow],
        mapping: Mapping[int, int],
        known: Mapping[str, int],
        twin_clusters: Mapping[int, int],
    ) -> BatchOutcome:
        """Per-record results once the batch is written.

        Args:
            ids: internal ids of the inserted rows (in :meth:`rows_to_insert` order).
            edges: the edges the batch stored.
            mapping: cluster relabelling done by the batch.
            known: stored ids found under the lock (their rows were skipped).
            twin_clusters: ``{internal id: cluster id}`` of the :meth:`twin_ids`.
        """
        matches: dict[int | None, list[MatchRow]] = {}
        for edge in edges:
            matches.setdefault(edge.new_id, []).append(edge)
        results: dict[int, AddResult] = {}
        cluster_of_id = {
            external_id: twin_clusters.get(doc_id)
            for external_id, doc_id in {**self.known_before, **known}.items()
        }
        for row, doc_id in zip(self.rows_to_insert(known), ids, strict=True):
            position = self.row_position[row]
            external_id = self.documents[position].id
            found = matches.get(doc_id, [])
            replaced = self.update and external_id in self.known_before
            merging = merging_methods(self.batch.params)
            status = Status.UPDATED if replaced else Status.of((e.method for e in found), merging)
            cluster = mapping.get(doc_id, doc_id)
            cluster_of_id[external_id] = cluster
            results[position] = AddResult(external_id, status, sorted_matches(found), cluster)
        not_inserted = [p for p in self.row_position + self.skipped if p not in results]
        for position in not_inserted:
            external_id = self.documents[position].id
            results[position] = AddResult(
                external_id, Status.SKIPPED, [], cluster_of_id.get(external_id)
            )
        return BatchOutcome([results[p] for p in sorted(results)], self.record_errors())


def prepare_batch(
    documents: list[Document],
    params: FingerprintParams,
    known: Mapping[str, int],
    update: bool,
    max_bytes: int,
    first: int | None = None,
) -> PreparedBatch:
    """Validate and fingerprint a batch; known ids are skipped unless ``update``.

    An id repeated in the batch is written once: its first copy, or with ``update`` its last
    copy (as if the copies had been added one after the other); the other copies are skipped.

    Args:
        documents: the records of the batch.
        params: the store's fingerprint parameters.
        known: ``{external id: internal id}`` of the batch's ids already stored.
        update: replace known ids instead of skipping them.
        max_bytes: largest accepted text, in UTF-8 bytes.
        first: number of the batch's first record in the whole input (counting from 1); a bad
            record without a source file and line is reported by its number.
    """
    errors: list[tuple[int, RecordError, type[DedupStoreError]]] = []
    skipped: list[int] = []
    chosen: dict[str, int] = {}
    for position, doc in enumerate(documents):
        try:
            validate_document(doc, max_bytes)
        except DedupStoreError as e:
            number = None if first is None else first + position
            errors.append((position, record_error(doc, str(e), number), type(e)))
            continue
        earlier = chosen.get(doc.id)
        if earlier is not None and update:
            skipped.append(earlier)
            chosen[doc.id] = position
        elif earlier is not None or (doc.id in known and not update):
            skipped.append(position)
        else:
            chosen[doc.id] = position
    positions = sorted(chosen.values())
    batch = fingerprint_batch([documents[p].text for p in positions], params)
    empty = {positions[row] for row in batch.empty_index}
    message = "document is empty after canonicalization (no words left)"
    errors.extend(
        (
            p,
            record_error(documents[p], message, None if first is None else first + p),
            EmptyDocumentError,
        )
        for p in empty
    )
    errors.sort(key=lambda item: item[0])
    row_position = [p for p in positions if p not in empty]
    skipped.sort()
    return PreparedBatch(documents, batch, row_position, dict(known), skipped, errors, update)


def validate_document(doc: Document, max_bytes: int) -> None:
    """Check that a record can be stored: its id, text and metadata.

    Raises:
        InvalidDocumentError: the first problem found.
    """
    validate_id(doc.id)
    validate_text(doc.text, max_bytes)
    if doc.meta is not None:
        validate_meta(doc.meta)


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
