"""A batch validated and fingerprinted, ready to be written (:mod:`dedup_store.ingest.pipeline`).

:func:`prepare_batch` touches no database: the ids already stored are given to it. It runs in the
calling thread or in a worker process (:mod:`dedup_store.ingest.workers`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dedup_store.core.fingerprint import FingerprintBatch, fingerprint_valid_texts
from dedup_store.core.metadata import MetaSignatures, exact_key, meta_members, meta_signatures
from dedup_store.core.params import FingerprintParams
from dedup_store.core.scripts import guess_language
from dedup_store.db.matches.scoring import merging_methods
from dedup_store.db.rows import batch_rows
from dedup_store.db.schema.encoding import StoredShingles, sorted_top32
from dedup_store.errors import DedupStoreError, EmptyDocumentError
from dedup_store.ingest.records import describe, record_error, validate_document
from dedup_store.results import (
    BatchResults,
    Document,
    MatchRow,
    RecordError,
    Status,
    Unmade,
)


@dataclasses.dataclass
class BatchOutcome:
    """Results (in input order, bad records left out) and the bad records of a batch."""

    results: BatchResults
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
        meta: with ``meta_fields``, the signatures of the rows' metadata sets (the rows'
            exact hashes are then their :func:`~dedup_store.core.metadata.exact_key`).
        stored_shingles: the shingles of every row as the store keeps them
            (:func:`~dedup_store.db.schema.encoding.sorted_top32`), once :meth:`store_shingles` made
            them.
    """

    documents: list[Document]
    batch: FingerprintBatch
    row_position: list[int]
    known_before: dict[str, int]
    skipped: list[int]
    errors: list[tuple[int, RecordError, type[DedupStoreError]]]
    update: bool
    meta: MetaSignatures | None = None
    _rows: list[bytes] | None = dataclasses.field(default=None, repr=False)
    stored_shingles: StoredShingles | None = dataclasses.field(default=None, repr=False)

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

    def replacements(self, known: Mapping[str, int]) -> list[tuple[str, bytes, Any, str]]:
        """``(external id, exact hash, metadata, text)`` of the rows whose ids are ``known``."""
        rows = [(r, self.document_of_row(r)) for r in range(len(self.row_position))]
        hashes = self.batch.exact_hashes
        return [(d.id, hashes[r], d.meta, d.text) for r, d in rows if d.id in known]

    def document_of_row(self, row: int) -> Document:
        """The record of fingerprint row ``row``."""
        return self.documents[self.row_position[row]]

    def encoded_rows(self, keep_text: bool) -> list[bytes]:
        """Each fingerprint row's document row up to the columns it gets when it is written
        (:func:`~dedup_store.db.rows.batch_rows.encode_rows`), computed on the first call: call it
        while the batches before are being written."""
        if self._rows is None:
            docs = [self.document_of_row(r) for r in range(len(self.row_position))]
            self._rows = batch_rows.encode_rows(
                self.batch,
                [d.id for d in docs],
                [d.meta for d in docs],
                [d.text if keep_text else None for d in docs],
                [self.language_of_row(r) for r in range(len(docs))],
                self.meta,
            )
        return self._rows

    def store_shingles(self) -> None:
        """Make :attr:`stored_shingles` (with the fingerprints, in a worker process when there
        is one: writing the batch then only picks rows out of them)."""
        if self.stored_shingles is None:
            rows = np.arange(len(self.row_position), dtype=np.int64)
            self.stored_shingles = sorted_top32(self.batch, rows)

    def weigh(self, batch: FingerprintBatch) -> None:
        """Replace the batch by ``batch``, the same rows with their SimHashes weighted by the
        store's document frequencies (:func:`dedup_store.db.write.frequencies.weigh`); the encoded
        rows hold no SimHash and stay."""
        self.batch = batch

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
        replaced = self.known_before if self.update else {}
        inserted = [self.row_position[row] for row in self.rows_to_insert(known)]
        clusters = [mapping.get(i, i) for i in ids] if mapping else list(ids)
        others = self._matched(inserted, ids, clusters, matches, replaced)
        if len(inserted) == len(self.row_position) and not self.skipped:  # most batches
            external_ids = [self.documents[p].id for p in inserted]
            return BatchOutcome(BatchResults(external_ids, clusters, others), self.record_errors())
        by_position = dict(zip(inserted, clusters, strict=True))
        cluster_of = {
            external_id: twin_clusters.get(doc_id)
            for external_id, doc_id in {**self.known_before, **known}.items()
        }
        cluster_of.update((self.documents[p].id, c) for p, c in by_position.items())
        other_at = {inserted[index]: result for index, result in others.items()}
        order = sorted(self.row_position + self.skipped)
        external_ids = [self.documents[p].id for p in order]
        results: dict[int, Unmade] = {}
        for index, position in enumerate(order):
            if position in other_at:
                results[index] = other_at[position]
            elif position not in by_position:  # known under the lock, or a repeated id
                external_id = external_ids[index]
                results[index] = (external_id, Status.SKIPPED, [], cluster_of.get(external_id))
        placed = [by_position.get(p) for p in order]
        return BatchOutcome(BatchResults(external_ids, placed, results), self.record_errors())

    def _matched(
        self,
        inserted: list[int],
        ids: Sequence[int],
        clusters: list[int],
        matches: Mapping[int | None, list[MatchRow]],
        replaced: Mapping[str, int],
    ) -> dict[int, Unmade]:
        """``{index in inserted: result}`` of the inserted records that have matches or
        replace a stored document (the others are new documents without matches)."""
        merging = merging_methods(self.batch.params)
        chosen: Iterable[int] = range(len(inserted))
        if not replaced:
            index_of = {doc_id: index for index, doc_id in enumerate(ids)}
            chosen = sorted(index_of[doc_id] for doc_id in matches if doc_id in index_of)
        results: dict[int, Unmade] = {}
        for index in chosen:
            position = inserted[index]
            external_id = self.documents[position].id
            found = matches.get(ids[index], [])
            if external_id in replaced:
                status = Status.UPDATED
            elif found:
                status = Status.of((e.method for e in found), merging)
            else:
                continue
            results[index] = (external_id, status, found, clusters[index])
        return results


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
    members: dict[int, list[str]] = {}
    for position, doc in enumerate(documents):
        try:
            validate_document(doc, max_bytes)
            members[position] = meta_members(doc.meta, params.meta_fields)
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
    batch = fingerprint_valid_texts([documents[p].text for p in positions], params)
    empty = {positions[row] for row in batch.empty_index}
    errors.extend(
        (
            p,
            record_error(
                documents[p], EmptyDocumentError.MESSAGE, None if first is None else first + p
            ),
            EmptyDocumentError,
        )
        for p in empty
    )
    errors.sort(key=lambda item: item[0])
    row_position = [p for p in positions if p not in empty]
    skipped.sort()
    meta = None
    if params.uses_meta:
        batch, meta = with_metadata(batch, [members[p] for p in row_position])
    return PreparedBatch(documents, batch, row_position, dict(known), skipped, errors, update, meta)


def with_metadata(
    batch: FingerprintBatch, members: Sequence[Sequence[str]]
) -> tuple[FingerprintBatch, MetaSignatures]:
    """The batch with the exact keys of its rows whose metadata sets have ``members``
    (:func:`~dedup_store.core.metadata.exact_key`), and the sets' signatures."""
    keys = [exact_key(h, m) for h, m in zip(batch.exact_hashes, members, strict=True)]
    signatures = meta_signatures(members, batch.params)
    return dataclasses.replace(batch, exact_hashes=keys), signatures
