"""The ingest pipeline: ``ingest``, ``add_many`` and ``add(update=True)`` write through here
(the Spark path reuses its batching and the validation of :mod:`dedup_store.ingest.records`).

A batch is validated (once per record), fingerprinted, then written in one transaction under the
store's lock (shared, with the batch's key locks: :mod:`dedup_store.db.write.locks`): its stored ids
looked up, the first document of each exact group found, its keys looked up among the stored
documents, its rows written, its candidates verified into edges, and the clusters those edges join
merged. :func:`ingest` streams records through it, fingerprinting the next batch (in the calling
thread or in worker processes, :mod:`dedup_store.ingest.workers`) while the last one is written. A
bulk load writes each batch in two halves: :func:`stage_batch` in memory on the calling thread,
while :func:`commit_batch` of the batches before it (up to :data:`WRITTEN_AHEAD`) runs on the
connection's :class:`~dedup_store.db.candidates.lane.Lane`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection

from dedup_store.core.params import FingerprintParams
from dedup_store.db.bulk import checkpoint, load
from dedup_store.db.candidates import hot
from dedup_store.db.candidates.lane import Lane
from dedup_store.db.candidates.lookup import Reach, connection_of
from dedup_store.db.candidates.stored import INDEXED, StoredKeys, new_rows
from dedup_store.db.matches import scoring
from dedup_store.db.reports import reads
from dedup_store.db.rows import batch_rows, key_rows
from dedup_store.db.rows.batch_rows import NewRows
from dedup_store.db.server.engine import Database
from dedup_store.db.write import batch as batch_write
from dedup_store.db.write import frequencies, locks, reclustering, verdicts
from dedup_store.errors import DedupStoreError
from dedup_store.ingest.prepared import BatchOutcome, PreparedBatch
from dedup_store.ingest.records import (
    Record,
    batches,
    lookup_ids,
)
from dedup_store.ingest.workers import Preparer, PrepareSettings
from dedup_store.ingest.workers import preparer as workers_preparer
from dedup_store.results import (
    AddResult,
    Document,
    IngestSummary,
    MatchRow,
    RecordError,
)

OnBatch = Callable[[Sequence[AddResult], list[RecordError]], None]
"""Called after each stored batch with its results (made as they are read: see
:class:`~dedup_store.results.BatchResults`) and its bad records."""
OnProgress = Callable[[int, int], None]
#: What :meth:`~dedup_store.DedupStore.ingest` is told with ``on_phase`` when a bulk load has
#: written its batches and builds its indexes.
INDEX_PHASE = "building the indexes"
"""Called with the numbers of documents fingerprinted and stored so far."""
#: A batch ends once its texts add up to this many characters, whatever its batch size.
BATCH_BYTES = 4 * 2**20

#: Batches a bulk load keeps queued on its lane while it stages the next. Staging a batch and
#: writing one take about as long, but each varies from batch to batch (a batch that flushes
#: the held key rows writes for seconds): with a queue, neither side waits for the other's
#: slow batch. Measured on 1M documents: about 10 % more documents a second than with one.
WRITTEN_AHEAD = 4


@dataclasses.dataclass(frozen=True)
class Destination:
    """Where batches are written: a store's database, schema and settings."""

    db: Database
    schema: str
    params: FingerprintParams
    keep_text: bool
    max_bytes: int


@dataclasses.dataclass
class WrittenBatch:
    """A written batch: what its per-record results are made of (:meth:`outcome`), on the
    caller's thread while the writer goes on with the next batch (or, in a bulk load, on the
    connection's lane while the caller stages the next batch)."""

    prepared: PreparedBatch
    ids: list[int]
    edges: list[MatchRow]
    mapping: dict[int, int]
    known: dict[str, int]
    twin_clusters: dict[int, int]

    @functools.cached_property
    def results(self) -> BatchOutcome:
        """The batch's results and bad records (:meth:`PreparedBatch.outcome`)."""
        return self.prepared.outcome(
            self.ids, self.edges, self.mapping, self.known, self.twin_clusters
        )


@dataclasses.dataclass
class StagedBatch:
    """A batch whose ids, candidates and rows are worked out, to be written by
    :func:`commit_batch` (which then only sends them).

    Attributes:
        prepared: the batch.
        known: stored ids found among the batch's (their rows are skipped).
        new: the rows to insert, with their ids.
        secondary: the ``secondary_keys`` rows to write (hot slots).
        promotion: the keys a bulk load made hot with the batch, to record with it.
        rows: the new documents' COPY rows (:func:`~dedup_store.db.rows.batch_rows.document_rows`).
        verified: the parameters that score and store the candidates that may match
            (:func:`~dedup_store.db.matches.scoring.verified_parameters`).
        bulk_load: the batch is part of a bulk load.
        held: where a bulk load holds the batch's sample keys and key rows
            (:class:`~dedup_store.db.rows.batch_rows.HeldRows`).
        shared: the batch holds the store's lock shared (with its key locks), so it locks the
            cluster labels it merges.
        reviewed: verdicts may bear on the batch (:attr:`StoredKeys.reviewed
            <dedup_store.db.candidates.stored.StoredKeys.reviewed>`).
    """

    prepared: PreparedBatch
    known: dict[str, int]
    new: NewRows
    secondary: key_rows.KeyRows
    promotion: hot.Promotion
    rows: batch_rows.DocumentRows
    verified: dict[str, Any]
    bulk_load: bool
    held: batch_rows.HeldRows | None = None
    shared: bool = False
    reviewed: bool = True


def write_batch(
    conn: Connection, dest: Destination, prepared: PreparedBatch, stored: StoredKeys = INDEXED
) -> WrittenBatch:
    """Write a prepared batch in the transaction of ``conn``, holding the store's lock (a bulk
    load holds it exclusively already; :func:`lock_batch`).

    ``stored`` answers the lookups of the keys and exact hashes of stored documents: the
    store's indexes, or memory during a bulk load.
    """
    shared = False
    if not stored.bulk_load:
        dest.db.without_jit(conn)
        shared = lock_batch(conn, dest, prepared)
    return commit_batch(conn, dest, stage_batch(conn, dest, prepared, stored, shared))


def lock_batch(conn: Connection, dest: Destination, prepared: PreparedBatch) -> bool:
    """Take the store's lock for a batch; returns whether shared.

    Shared, with the key locks of its documents (:func:`~dedup_store.db.write.locks.batch_keys`)
    and of the partners that verdicts name (read under the shared lock, as verdicts change
    under the exclusive one only); exclusive for a batch that replaces documents, for a store
    whose SimHashes are weighed by document frequencies, or for too many keys.
    """
    schema = dest.schema
    if prepared.update or dest.params.weighted:
        return locks.lock_store(conn, schema)
    ids = prepared.candidate_ids()  # the records that passed: a bad id is never written
    if not locks.lock_store(conn, schema, locks.batch_keys(schema, prepared.batch, ids)):
        return False
    partners = set(verdicts.partners(conn, schema, ids)) - set(ids)
    if partners:  # after the batch's own keys: a deadlock is possible, and retried
        locks.lock_store(conn, schema, locks.id_keys(schema, sorted(partners)))
    return True


def stage_batch(
    conn: Reach,
    dest: Destination,
    prepared: PreparedBatch,
    stored: StoredKeys,
    shared: bool = False,
) -> StagedBatch:
    """The first half of :func:`write_batch`: what the batch writes, and its candidates.

    During a bulk load (``stored`` in memory) this needs no SQL unless the batch makes keys hot
    or meets documents stored before the load: ``conn`` is then reached through a
    :class:`~dedup_store.db.candidates.lane.Lane` still writing the batch before.
    """
    schema, params = dest.schema, dest.params
    known = stored.documents(conn, schema, prepared.candidate_ids())
    if prepared.update and known:  # replaced, but those whose text and metadata are the same
        replacements = prepared.replacements(known)
        same = batch_write.unchanged(connection_of(conn), schema, replacements, dest.keep_text)
        replaced = [doc_id for external_id, doc_id in known.items() if external_id not in same]
        if replaced:
            batch_write.delete_documents(connection_of(conn), schema, replaced, params)
        known = {external_id: known[external_id] for external_id in same}
    rows = prepared.rows_to_insert(known)
    row_array = np.asarray(rows, dtype=np.int64)
    if params.weighted:  # the store's document frequencies as of now, plus the batch's
        batch = frequencies.weigh(connection_of(conn), schema, prepared.batch, row_array)
        prepared.weigh(batch)
    ids = stored.allocate_ids(conn, schema, len(rows), shared)
    new = new_rows(conn, schema, prepared.batch, row_array, ids, stored, prepared.stored_shingles)
    firsts = new.firsts  # exact copies have no keys of their own
    found, secondary, promotion = hot.find_candidates(
        conn, schema, prepared.batch, new.rows[firsts], new.ids[firsts], stored
    )
    stored.added(new, [prepared.document_of_row(r).id for r in rows])
    inter, possible = scoring.batch_intersections(conn, schema, new, found, stored)
    encoded = prepared.encoded_rows(dest.keep_text)
    with_meta = prepared.meta is not None
    return StagedBatch(
        prepared,
        known,
        new,
        secondary,
        promotion,
        batch_rows.document_rows(
            new,
            [encoded[r] for r in new.rows.tolist()],
            with_meta,
            stored.frozen,
            settled=stored.bulk_load,
        ),
        scoring.verified_parameters(new, found, inter, possible),
        stored.bulk_load,
        stored.held,
        shared,
        stored.reviewed,
    )


def commit_batch(conn: Connection, dest: Destination, staged: StagedBatch) -> WrittenBatch:
    """The second half of :func:`write_batch`: write the rows, score and store the edges,
    merge the clusters."""
    schema, prepared, new = dest.schema, staged.prepared, staged.new
    promotion = staged.promotion
    hot.record_hot(conn, schema, promotion.kinds, promotion.slots, promotion.keys)
    batch_write.insert_documents(conn, schema, staged.rows, staged.secondary, staged.held)
    frequencies.add(conn, schema, prepared.batch, new.rows, new.ids)
    edges = scoring.store_verified(conn, schema, staged.verified)
    mapping = batch_write.merge_clusters(conn, schema, edges, dest.params, staged.shared)
    # a reviewer named a new one, or a merge joined a vetoed pair or clusters a verdict cut
    new_ids = new.ids.tolist()
    if staged.reviewed and reclustering.apply_to_new(conn, schema, new_ids, staged.shared):
        labels = reads.cluster_ids(conn, schema, new_ids)
        mapping = {**mapping, **{i: label for i, label in labels.items() if label != i}}
    if len(new.ids):
        # a bulk load plans only statements on documents (by id and by cluster, whose plans
        # do not change as it grows), and analyzes everything at its end
        if staged.bulk_load:
            batch_write.refresh_statistics(conn, schema, int(new.ids[-1]), ("documents",), growth=4)
        else:
            batch_write.refresh_statistics(conn, schema, int(new.ids[-1]))
            key_rows.refresh_recent_statistics(conn, schema)
    twin_clusters = reads.cluster_ids(conn, schema, prepared.twin_ids(staged.known))
    return WrittenBatch(prepared, new_ids, edges, mapping, staged.known, twin_clusters)


def ingest(
    dest: Destination,
    records: Iterable[Record],
    *,
    batch_size: int,
    update: bool,
    on_error: Literal["skip", "stop"],
    on_batch: OnBatch | None,
    on_progress: OnProgress | None,
    bulk_load: bool = False,
    workers: int = 0,
    on_phase: Callable[[str], None] | None = None,
) -> IngestSummary:
    """Stream ``records`` into the store, one transaction per batch, or all of them in one
    bulk load (see :meth:`dedup_store.DedupStore.ingest`); ``workers`` processes fingerprint
    the batches (:mod:`dedup_store.ingest.workers`)."""
    if bulk_load and update:
        raise ValueError("a bulk load adds documents: it cannot update them")
    settings = PrepareSettings(dest.params, dest.max_bytes, update, dest.keep_text)
    with workers_preparer(settings, workers) as preparer:
        if bulk_load:
            return _bulk_ingest(
                dest, records, batch_size, on_error, on_batch, on_progress, preparer, on_phase
            )
        own_engine = dest.db.connection is None
        try:
            return _stream(
                records,
                batch_size,
                on_error,
                on_batch,
                on_progress,
                prepare=lambda chunk, first: preparer.submit(
                    chunk, _stored_ids(dest, chunk), first
                ),
                ahead=preparer.ahead,
                write=lambda prepared: _write(dest, prepared, INDEXED),
                pipelined=own_engine,
            )
        except _StoppedAt as stop:
            raise stop.error from None


def _bulk_ingest(
    dest: Destination,
    records: Iterable[Record],
    batch_size: int,
    on_error: Literal["skip", "stop"],
    on_batch: OnBatch | None,
    on_progress: OnProgress | None,
    preparer: Preparer,
    on_phase: Callable[[str], None] | None = None,
) -> IngestSummary:
    """One transaction: drop the lookup indexes, write the batches with lookups in memory,
    build the indexes, commit (:mod:`dedup_store.db.bulk.load`).

    Each batch is staged here (:func:`stage_batch`) while the statements of the batches before
    it (up to :data:`WRITTEN_AHEAD`) run on the connection's
    :class:`~dedup_store.db.candidates.lane.Lane`.

    A bad record with ``on_error="stop"``, or an interrupt (``KeyboardInterrupt``), ends the
    load as in the incremental path: the batches written before it are committed (with the
    indexes built), then the error is raised. Any other error rolls the whole load back.
    """
    stopped: BaseException | None = None
    with dest.db.transaction() as conn:
        dest.db.without_jit(conn)
        own = dest.db.connection is None
        stored = load.begin(conn, dest.schema, dest.params, own_transaction=own)
        known = stored.external_ids

        def prepare(chunk: list[Document], first: int) -> Future[PreparedBatch]:
            ids = {d.id: known[d.id] for d in chunk if isinstance(d.id, str) and d.id in known}
            return preparer.submit(chunk, ids, first)

        summary = IngestSummary()
        try:
            with checkpoint.rolling(conn, stored.frozen), Lane(conn) as lane:

                def write(prepared: PreparedBatch) -> Future[WrittenBatch]:
                    staged = stage_batch(lane.connection, dest, prepared, stored)
                    # the per-record results are made on this thread, when reported: the
                    # lane's thread is the load's critical path
                    return lane.submit(lambda c: commit_batch(c, dest, staged))

                summary = _stream(
                    records,
                    batch_size,
                    on_error,
                    on_batch,
                    on_progress,
                    prepare=prepare,
                    ahead=preparer.ahead,
                    write=write,
                    pipelined=False,
                )
        except _StoppedAt as stop:
            stopped = stop.error
        except KeyboardInterrupt as interrupt:
            stopped = interrupt
        if on_phase is not None:
            on_phase(INDEX_PHASE)
        seconds = load.finish(conn, dest.schema, dest.params, load.BUILD_SETTINGS, stored)
    if stopped is not None:
        raise stopped.with_traceback(None)
    summary.bulk = True
    summary.index_seconds = seconds["indexes"]
    summary.seconds += sum(seconds.values())
    return summary


class _StoppedAt(Exception):
    """A bad record stopped the stream (``on_error="stop"``); the batches before it are
    written."""

    def __init__(self, error: DedupStoreError) -> None:
        super().__init__(str(error))
        self.error = error


def _stream(
    records: Iterable[Record],
    batch_size: int,
    on_error: Literal["skip", "stop"],
    on_batch: OnBatch | None,
    on_progress: OnProgress | None,
    *,
    prepare: Callable[[list[Document], int], Future[PreparedBatch]],
    ahead: int,
    write: Callable[[PreparedBatch], WrittenBatch | Future[WrittenBatch]],
    pipelined: bool,
) -> IngestSummary:
    """Prepare and write ``records`` batch by batch.

    ``prepare`` may work in the background: up to ``ahead`` more batches are submitted to it
    before the result of the oldest is taken (an interrupt while the input is read still
    stores those batches). With ``pipelined``, batch k+1 is written by a
    background thread while batch k+2 is taken from ``prepare`` here (the writer mostly waits
    on the server); the first batch is written on the caller's thread.

    Raises:
        _StoppedAt: a bad record with ``on_error="stop"``.
    """
    summary = IngestSummary()
    started = time.perf_counter()
    progress = _Progress(on_progress)
    with contextlib.ExitStack() as stack:
        flow = _Flow(summary, on_batch, progress, write)
        # a batch being written when the caller is interrupted is still reported
        stack.callback(flow.settle)
        queued: collections.deque[Future[PreparedBatch]] = collections.deque()
        writer = stack if pipelined else None
        first = 1
        chunks = batches(records, batch_size, BATCH_BYTES)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except KeyboardInterrupt:  # while reading: the batches read before it are stored
                while queued:
                    flow.step(queued.popleft().result(), on_error, writer)
                flow.drain()
                raise
            queued.append(prepare(chunk, first))
            first += len(chunk)
            while len(queued) > ahead:
                flow.step(queued.popleft().result(), on_error, writer)
        while queued:
            flow.step(queued.popleft().result(), on_error, writer)
        flow.drain()
    summary.seconds = time.perf_counter() - started
    return summary


class _Flow:
    """The write side of :func:`_stream`: each prepared batch is written, then reported.

    ``write`` either writes a batch and returns it, or (a staged bulk load) stages it and
    returns the future of its statements, which run while the next batches are staged.
    """

    def __init__(
        self,
        summary: IngestSummary,
        on_batch: OnBatch | None,
        progress: _Progress,
        write: Callable[[PreparedBatch], WrittenBatch | Future[WrittenBatch]],
    ) -> None:
        self.summary, self.on_batch, self.progress, self.write = summary, on_batch, progress, write
        self.writer: ThreadPoolExecutor | None = None
        self.pending: collections.deque[Future[WrittenBatch]] = collections.deque()

    def step(
        self,
        prepared: PreparedBatch,
        on_error: Literal["skip", "stop"],
        stack: contextlib.ExitStack | None,
    ) -> None:
        """Write ``prepared`` and report the batches before it; ``stack`` (pipelined) holds
        the writer thread, which writes each batch once the one before it is reported."""
        self.progress.fingerprinted(len(prepared.documents))
        if prepared.errors and on_error == "stop":
            self.drain()
            raise _StoppedAt(prepared.first_error())
        if stack is not None:
            self.drain()
            summary = self.summary
            if self.writer is None and summary.documents + summary.errors > 0:
                self.writer = stack.enter_context(ThreadPoolExecutor(max_workers=1))
            if self.writer is not None:
                self.pending.append(self.writer.submit(self._written, prepared))
                return
        written = self.write(prepared)
        if isinstance(written, Future):
            self.pending.append(written)
            self.drain(keep=WRITTEN_AHEAD)  # written while this one and others were staged
        else:
            self.drain()
            self.progress.stored(_report(written, self.summary, self.on_batch))

    def _written(self, prepared: PreparedBatch) -> WrittenBatch:
        """``write(prepared)``, waited for."""
        written = self.write(prepared)
        return written.result() if isinstance(written, Future) else written

    def drain(self, keep: int = 0) -> None:
        """Report the batches being written, oldest first, until ``keep`` are left."""
        while len(self.pending) > keep:
            written = self.pending[0].result()
            self.pending.popleft()
            self.progress.stored(_report(written, self.summary, self.on_batch))

    def settle(self) -> None:
        """Report the batches still being written when ``ingest`` stops early, up to the
        first that failed (the error that stopped ``ingest`` is the one raised)."""
        while self.pending:
            pending = self.pending.popleft()
            if pending.exception() is not None:
                self.pending.clear()
                return
            _report(pending.result(), self.summary, self.on_batch)


def _stored_ids(dest: Destination, documents: list[Document]) -> dict[str, int]:
    """``{external id: id}`` of the ``documents`` already stored (ids that are known are not
    fingerprinted)."""
    ids = lookup_ids(documents)
    return dest.db.run(lambda conn: reads.find_documents(conn, dest.schema, ids))


def _write(dest: Destination, prepared: PreparedBatch, stored: StoredKeys) -> WrittenBatch:
    """Write a prepared batch in one transaction (retried on serialization failures);
    ``stored`` answers its lookups, but for a batch that replaces documents: it deletes them
    first, which only its own connection sees."""
    stored = INDEXED if prepared.update else stored
    return dest.db.run(lambda conn: write_batch(conn, dest, prepared, stored))


def _report(written: WrittenBatch, summary: IngestSummary, on_batch: OnBatch | None) -> int:
    """Count a written batch into ``summary``; returns the number of records it held."""
    outcome = written.results
    summary.count_all(outcome.results)
    summary.errors += len(outcome.errors)
    if on_batch is not None:
        on_batch(outcome.results, outcome.errors)
    return len(outcome.results) + len(outcome.errors)


class _Progress:
    """Running counts for an ``on_progress`` callback."""

    def __init__(self, callback: OnProgress | None) -> None:
        self.callback = callback
        self.done = self.saved = 0

    def fingerprinted(self, count: int) -> None:
        self.done += count
        self._tell()

    def stored(self, count: int) -> None:
        self.saved += count
        self._tell()

    def _tell(self) -> None:
        if self.callback is not None:
            self.callback(self.done, self.saved)
