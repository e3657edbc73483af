"""One batch of documents on its way into the store: validation, fingerprints, outcomes.

Everything here is done before (or after) the database transaction of the batch, so the time the
writers' lock is held is spent on SQL only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from dedup_store.core.canonical import has_cjk
from dedup_store.core.fingerprint import FingerprintBatch, fingerprint_batch, validate_text
from dedup_store.core.params import FingerprintParams
from dedup_store.db.repository import EdgeRow
from dedup_store.db.verify import merging_methods
from dedup_store.errors import DedupStoreError, EmptyDocumentError, InvalidDocumentError
from dedup_store.results import AddResult, Document, Match, Method, RecordError, Status

_METHOD_ORDER = {m.value: i for i, m in enumerate(Method)}
MAX_ID_LENGTH = 1000


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
        return kind(str(error))

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
        edges: Sequence[EdgeRow],
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
        matches: dict[int, list[EdgeRow]] = {}
        for edge in edges:
            matches.setdefault(edge.b, []).append(edge)
        results: dict[int, AddResult] = {}
        cluster_of_id = {
            external_id: twin_clusters.get(doc_id)
            for external_id, doc_id in {**self.known_before, **known}.items()
        }
        for row, doc_id in zip(self.rows_to_insert(known), ids, strict=True):
            position = self.row_position[row]
            external_id = self.documents[position].id
            found = sorted(matches.get(doc_id, []), key=_edge_rank)
            status = _status(
                found, self.update and external_id in self.known_before, self.batch.params
            )
            cluster = mapping.get(doc_id, doc_id)
            cluster_of_id[external_id] = cluster
            results[position] = AddResult(external_id, status, [_match(e) for e in found], cluster)
        not_inserted = [p for p in self.row_position + self.skipped if p not in results]
        for position in not_inserted:
            external_id = self.documents[position].id
            results[position] = AddResult(
                external_id, Status.SKIPPED, [], cluster_of_id.get(external_id)
            )
        return BatchOutcome([results[p] for p in sorted(results)], self.record_errors())


def _edge_rank(edge: EdgeRow) -> tuple[int, float, str]:
    return (_METHOD_ORDER[edge.method], -edge.jaccard, edge.a_external_id)


def _match(edge: EdgeRow) -> Match:
    return Match(
        edge.a_external_id, Method(edge.method), edge.jaccard, edge.containment, edge.hamming
    )


def _status(edges: Sequence[EdgeRow], replaced: bool, params: FingerprintParams) -> Status:
    if replaced:
        return Status.UPDATED
    return Status.of((e.method for e in edges), merging_methods(params))


def prepare_batch(
    documents: list[Document],
    params: FingerprintParams,
    known: Mapping[str, int],
    update: bool,
    max_bytes: int,
) -> PreparedBatch:
    """Validate and fingerprint a batch; known ids are skipped unless ``update``."""
    errors: list[tuple[int, RecordError, type[DedupStoreError]]] = []
    skipped: list[int] = []
    seen: set[str] = set()
    positions: list[int] = []
    for position, doc in enumerate(documents):
        try:
            _validate(doc, max_bytes)
        except DedupStoreError as e:
            errors.append((position, _record_error(doc, str(e)), type(e)))
            continue
        if doc.id in seen or (doc.id in known and not update):
            skipped.append(position)
        else:
            positions.append(position)
        seen.add(doc.id)
    batch = fingerprint_batch([documents[p].text for p in positions], params)
    empty = {positions[row] for row in batch.empty_index}
    message = "document is empty after canonicalization (no words left)"
    errors.extend((p, _record_error(documents[p], message), EmptyDocumentError) for p in empty)
    errors.sort(key=lambda item: item[0])
    row_position = [p for p in positions if p not in empty]
    return PreparedBatch(documents, batch, row_position, dict(known), skipped, errors, update)


def _validate(doc: Document, max_bytes: int) -> None:
    if not isinstance(doc.id, str) or not doc.id or "\x00" in doc.id or len(doc.id) > MAX_ID_LENGTH:
        raise InvalidDocumentError(
            f"document id must be a non-empty string without NUL, at most {MAX_ID_LENGTH} "
            f"characters, got {doc.id!r:.80}"
        )
    validate_text(doc.text, max_bytes)
    if doc.meta is not None:
        _validate_meta(doc.meta)


def _validate_meta(meta: Any) -> None:
    if not isinstance(meta, Mapping):
        raise InvalidDocumentError(f"metadata must be a mapping, got {type(meta).__name__}")
    try:
        encoded = json.dumps(meta, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise InvalidDocumentError(f"metadata is not JSON-serializable: {e}") from None
    if "\\u0000" in encoded:
        raise InvalidDocumentError("metadata contains a NUL character")


def _record_error(doc: Document, message: str) -> RecordError:
    return RecordError(doc.source, doc.line, doc.id if isinstance(doc.id, str) else None, message)


def guess_language(canonical_text: str) -> str:
    """``en``/``ru``/``zh``/``ja`` or ``und``, from the script of the text (best effort)."""
    if canonical_text.isascii():
        return "en"
    if has_cjk(canonical_text):
        kana = any("\u3040" <= ch <= "\u30ff" for ch in canonical_text)
        return "ja" if kana else "zh"
    cyrillic = sum("\u0400" <= ch <= "\u04ff" for ch in canonical_text)
    return "ru" if cyrillic * 2 > len(canonical_text.replace(" ", "")) else "und"
