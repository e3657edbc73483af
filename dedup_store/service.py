"""The service facade: :class:`DedupStore`."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, Literal

import numpy as np
from sqlalchemy import Connection
from sqlalchemy import text as sa_text

from dedup_store.core.fingerprint import DEFAULT_MAX_BYTES, fingerprint
from dedup_store.core.params import FingerprintParams
from dedup_store.db import candidates, hot, migrate, native, queries, repository, single
from dedup_store.db.engine import Bind, Database
from dedup_store.db.names import validate_schema
from dedup_store.db.queries import MatchRow
from dedup_store.db.schema import DEFAULT_SCHEMA
from dedup_store.db.verify import merging_methods
from dedup_store.errors import InvalidDocumentError, UnknownDocumentError
from dedup_store.ingest_batch import BatchOutcome, PreparedBatch, lookup_ids, prepare_batch
from dedup_store.results import (
    AddResult,
    Cluster,
    Document,
    IngestSummary,
    Match,
    Method,
    Pair,
    RecordError,
    Stats,
    Status,
)

Record = Document | tuple[str, str] | tuple[str, str, Mapping[str, Any] | None]
OnBatch = Callable[[list[AddResult], list[RecordError]], None]
OnProgress = Callable[[int, int], None]
"""Called with the numbers of documents fingerprinted and stored so far."""
#: A batch ends once its texts add up to this many characters, whatever its batch size.
BATCH_BYTES = 4 * 2**20
_METHOD_ORDER = {m.value: i for i, m in enumerate(Method)}


def _match(row: MatchRow) -> Match:
    return Match(row.external_id, Method(row.method), row.jaccard, row.containment, row.hamming)


def sorted_matches(rows: Iterable[MatchRow]) -> list[Match]:
    """Matches best first: exact, then by method order and decreasing Jaccard."""
    ordered = sorted(rows, key=lambda r: (_METHOD_ORDER[r.method], -r.jaccard, r.external_id))
    return [_match(r) for r in ordered]


class DedupStore:
    """Near-duplicate detection backed by PostgreSQL.

    Args:
        bind: a database URL, a SQLAlchemy Engine, or a Connection. With a Connection the store
            works inside the caller's transaction (in savepoints) and never commits or rolls it
            back; with a URL or Engine every call is its own transaction.
        params: fingerprint parameters. A new store records them; an existing store refuses
            different ones (:class:`~dedup_store.errors.ParamsMismatchError`); ``None`` uses the
            stored ones (or the defaults for a new store). A mapping names only some
            parameters: a new store takes the defaults for the others, an existing one is
            compared on the named ones only.
        schema: the PostgreSQL schema holding the store's tables.
        create: create the store when the schema has none (otherwise
            :class:`~dedup_store.errors.StoreNotInitializedError`).
        keep_text: also store each document's original text.
        max_bytes: largest accepted document, in UTF-8 bytes.
    """

    def __init__(
        self,
        bind: Bind,
        params: FingerprintParams | Mapping[str, Any] | None = None,
        schema: str = DEFAULT_SCHEMA,
        *,
        create: bool = True,
        keep_text: bool = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.schema = validate_schema(schema)  # before any statement is built with it
        self.keep_text = keep_text
        self.max_bytes = max_bytes
        self._db = Database(bind, schema)
        try:
            self.params = self._db.run(lambda conn: self._open(conn, params, create))
        except BaseException:
            self._db.close()
            raise

    def _open(
        self, conn: Connection, params: FingerprintParams | Mapping[str, Any] | None, create: bool
    ) -> FingerprintParams:
        """Check (and with ``create``, make or complete) the store; returns its params.

        An existing, complete store is only read, so opening it needs no privilege beyond
        reading and never waits on a writer.
        """
        stored = self._ready_params(conn)
        if stored is None:
            if not create:
                migrate.verify_schema(conn, self.schema)
            repository.lock_writers(conn, self.schema)
            stored = self._create(conn, params)
        elif params is not None:
            self._require(stored, params)
        return stored

    def _require(
        self, stored: FingerprintParams, params: FingerprintParams | Mapping[str, Any]
    ) -> None:
        """Refuse ``params`` (all of them, or the named ones) that differ from the stored ones."""
        context = f"store {self.schema!r} was created with other parameters"
        if isinstance(params, FingerprintParams):
            stored.require_same(params, context)
            return
        wanted = {**stored.to_dict(), **params}
        stored.require_same(FingerprintParams.from_dict(wanted), context)

    def _ready_params(self, conn: Connection) -> FingerprintParams | None:
        """The params of a complete store at this code's revision, else ``None``."""
        if migrate.current_revision(conn, self.schema) != migrate.head():
            return None
        stored = queries.load_params(conn, self.schema)
        if stored is None or candidates.missing_key_indexes(conn, self.schema, stored):
            return None
        return stored

    def _create(
        self, conn: Connection, params: FingerprintParams | Mapping[str, Any] | None
    ) -> FingerprintParams:
        """Create or complete the store under the writers' lock."""
        if migrate.current_revision(conn, self.schema) is None:
            migrate.upgrade_connection(conn, self.schema)
        migrate.verify_schema(conn, self.schema)
        stored = queries.load_params(conn, self.schema)
        if stored is None:
            if isinstance(params, FingerprintParams):
                stored = params
            else:
                stored = FingerprintParams.from_dict(dict(params or {}))
            queries.save_params(conn, self.schema, stored)
        elif params is not None:
            self._require(stored, params)
        missing = candidates.missing_key_indexes(conn, self.schema, stored)
        candidates.create_key_indexes(conn, self.schema, missing)
        return stored

    # -- writing ----------------------------------------------------------------------------

    def add(
        self, id: str, text: str, meta: Mapping[str, Any] | None = None, *, update: bool = False
    ) -> AddResult:
        """Add one document; returns whether it is new or a duplicate, its matches and cluster.

        Raises:
            InvalidDocumentError: bad text (NUL, invalid UTF-8, too large) or id.
            EmptyDocumentError: no words left after canonicalization.
        """
        document = Document(id, text, meta)
        if update:
            return self.add_many([document], update=True)[0]
        prepared = prepare_batch([document], self.params, {}, False, self.max_bytes)
        if prepared.errors:
            raise prepared.first_error()
        fp = prepared.batch.row(0)
        language = prepared.language_of_row(0)
        body = text if self.keep_text else None

        statement, parameters = single.add_statement(self.schema, fp, id, meta, body, language)
        outcome = single.outcome(self._add_rows(statement, parameters))

        def promote(conn: Connection) -> None:
            repository.lock_writers(conn, self.schema)
            single.promote_pending(conn, self.schema, fp)

        while outcome.rekey:  # the document makes keys hot: split their buckets, then add it
            self._db.run(promote)
            outcome = single.outcome(self._add_rows(statement, parameters))
        if outcome.inserted and outcome.doc_id % 1024 == 0:
            self._db.run(
                lambda conn: repository.refresh_statistics(conn, self.schema, outcome.doc_id)
            )
        if not outcome.inserted:
            return AddResult(id, Status.SKIPPED, [], outcome.cluster_id)
        matches = sorted_matches(outcome.matches)
        return AddResult(id, _status(matches, self.params), matches, outcome.cluster_id)

    def _add_rows(self, statement: str, parameters: dict[str, Any]) -> list[Any]:
        """The rows of the statement of :func:`single.add_statement`, run with the lock."""
        rows = self._db.native(
            lambda raw: native.locked_statement(
                raw, repository.lock_name(self.schema), statement, parameters
            )
        )
        if rows is None:  # inside a caller's transaction

            def work(conn: Connection) -> list[Any]:
                repository.lock_writers(conn, self.schema)
                return list(conn.execute(sa_text(statement), parameters))

            rows = self._db.run(work)
        return list(rows)

    def add_many(
        self, records: Iterable[Record], *, batch_size: int = 2000, update: bool = False
    ) -> list[AddResult]:
        """Add many documents in batches; the first bad record raises (earlier batches stay)."""
        results: list[AddResult] = []
        self.ingest(
            records,
            batch_size=batch_size,
            update=update,
            on_error="stop",
            on_batch=lambda done, _errors: results.extend(done),
        )
        return results

    def ingest(
        self,
        records: Iterable[Record],
        *,
        batch_size: int = 2000,
        update: bool = False,
        on_error: Literal["skip", "stop"] = "stop",
        on_batch: OnBatch | None = None,
        on_progress: OnProgress | None = None,
        count_clusters: bool = False,
    ) -> IngestSummary:
        """Stream records into the store, one transaction per batch, in bounded memory.

        Known ids are skipped (``Status.SKIPPED``) unless ``update`` replaces them, so running
        the same input twice is harmless. A bad record raises with ``on_error="stop"`` (nothing
        of its batch is written) or is reported and skipped with ``on_error="skip"``.

        Args:
            records: documents, or ``(id, text[, meta])`` tuples.
            batch_size: most documents per transaction (a batch also ends once it holds
                :data:`BATCH_BYTES` of text, so long documents are stored, and reported, sooner).
            update: replace documents whose id is stored instead of skipping them.
            on_error: ``stop`` raises the first bad record, ``skip`` reports it and goes on.
            on_batch: called after each stored batch with its results and bad records.
            on_progress: called with the counts of documents fingerprinted and stored so far,
                after each batch is fingerprinted and after it is stored.
            count_clusters: also count the store's clusters at the end (a whole-store
                aggregate); otherwise ``IngestSummary.clusters`` is ``None``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        summary = IngestSummary()
        started = time.perf_counter()
        progress = _Progress(on_progress)
        # With our own engine, batch k+1 is written by a background thread while batch k+2 is
        # fingerprinted here (the writer mostly waits on the server); the first batch, and every
        # batch on a caller's Connection, is written on the caller's thread.
        pipelined = self._db.connection is None
        with contextlib.ExitStack() as stack:
            writer: ThreadPoolExecutor | None = None
            pending: Future[BatchOutcome] | None = None
            first = 1
            # a batch being written when the caller is interrupted is still reported
            stack.callback(lambda: self._settle(pending, summary, on_batch))
            for chunk in _batches(records, batch_size, BATCH_BYTES):
                prepared = self._prepare(chunk, update, first)
                first += len(chunk)
                progress.fingerprinted(len(chunk))
                if pending is not None:
                    progress.stored(self._report(pending.result(), summary, on_batch))
                    pending = None
                if prepared.errors and on_error == "stop":
                    raise prepared.first_error()
                if writer is None and pipelined and summary.documents + summary.errors > 0:
                    writer = stack.enter_context(ThreadPoolExecutor(max_workers=1))
                if writer is not None:
                    pending = writer.submit(self._write, prepared)
                else:
                    progress.stored(self._report(self._write(prepared), summary, on_batch))
            if pending is not None:
                progress.stored(self._report(pending.result(), summary, on_batch))
                pending = None
        summary.seconds = time.perf_counter() - started
        if count_clusters:
            summary.clusters = self.stats().clusters
        return summary

    def _settle(
        self,
        pending: Future[BatchOutcome] | None,
        summary: IngestSummary,
        on_batch: OnBatch | None,
    ) -> None:
        """Report a batch still being written when ``ingest`` stops early (its result is lost
        if the write itself failed: the error that stopped ``ingest`` is the one raised)."""
        if pending is not None and pending.exception() is None:
            self._report(pending.result(), summary, on_batch)

    @staticmethod
    def _report(outcome: BatchOutcome, summary: IngestSummary, on_batch: OnBatch | None) -> int:
        """Count a written batch into ``summary``; returns the number of records it held."""
        for result in outcome.results:
            summary.count(result)
        summary.errors += len(outcome.errors)
        if on_batch is not None:
            on_batch(outcome.results, outcome.errors)
        return len(outcome.results) + len(outcome.errors)

    def _prepare(self, documents: list[Document], update: bool, first: int) -> PreparedBatch:
        """Validate and fingerprint a batch (ids already stored are not fingerprinted)."""
        ids = lookup_ids(documents)
        known = self._run(lambda c: queries.find_documents(c, self.schema, ids))
        return prepare_batch(documents, self.params, known, update, self.max_bytes, first)

    def _write(self, prepared: PreparedBatch) -> BatchOutcome:
        """Write a prepared batch in one transaction (retried on serialization failures)."""
        return self._db.run(partial(self._write_batch, prepared=prepared))

    def _write_batch(self, conn: Connection, prepared: PreparedBatch) -> BatchOutcome:
        self._db.without_jit(conn)
        repository.lock_writers(conn, self.schema)
        known = queries.find_documents(conn, self.schema, prepared.candidate_ids())
        if prepared.update and known:
            repository.delete_documents(conn, self.schema, list(known.values()), self.params)
            known = {}
        rows = prepared.rows_to_insert(known)
        new = repository.new_rows(
            conn, self.schema, prepared.batch, np.asarray(rows, dtype=np.int64)
        )
        ids = new.ids
        firsts = new.firsts
        found, secondary = hot.find_candidates(
            conn, self.schema, prepared.batch, new.rows[firsts], ids[firsts]
        )
        docs = [prepared.document_of_row(r) for r in rows]
        repository.insert_documents(
            conn,
            self.schema,
            new,
            [d.id for d in docs],
            [d.meta for d in docs],
            [d.text if self.keep_text else None for d in docs],
            [prepared.language_of_row(r) for r in rows],
            secondary,
        )
        edges = repository.store_edges(conn, self.schema, new, found)
        mapping = repository.merge_clusters(conn, self.schema, edges, self.params)
        if len(ids):
            repository.refresh_statistics(conn, self.schema, int(ids[-1]))
        twin_clusters = queries.cluster_ids(conn, self.schema, prepared.twin_ids(known))
        return prepared.outcome(ids.tolist(), edges, mapping, known, twin_clusters)

    # -- reading ----------------------------------------------------------------------------

    def check(self, text: str) -> AddResult:
        """What :meth:`add` would answer for ``text``, without writing anything.

        Raises:
            InvalidDocumentError, EmptyDocumentError: as :meth:`add`.
        """
        fp = fingerprint(text, self.params)
        statement, parameters = queries.check_statement(self.schema, fp)
        found = self._db.native(lambda raw: native.fetch_all(raw, statement, parameters))
        if found is None:  # inside a caller's transaction
            found = self._run(lambda conn: list(conn.execute(sa_text(statement), parameters)))
        rows = [MatchRow(*row) for row in found]
        matches = sorted_matches(rows)
        status = _status(matches, self.params)
        merging = merging_methods(self.params)
        joined = [r for r in rows if r.method in merging]
        best = min(joined, key=lambda r: (_METHOD_ORDER[r.method], -r.jaccard), default=None)
        return AddResult("", status, matches, best.cluster_id if best else None)

    def similar(self, id: str) -> list[Match]:
        """The stored matches of document ``id`` (older and newer), best first."""

        def work(conn: Connection) -> list[MatchRow]:
            return queries.stored_matches(conn, self.schema, self._doc_id(conn, id))

        return sorted_matches(self._run(work))

    def cluster(self, id: str) -> Cluster:
        """The cluster of document ``id``."""

        def work(conn: Connection) -> Cluster:
            label = queries.cluster_ids(conn, self.schema, [self._doc_id(conn, id)])
            rows = queries.cluster_rows(conn, self.schema, next(iter(label.values())), 1)
            return next(_group_clusters(rows))

        result: Cluster = self._db.run(work)  # a server-side cursor needs a transaction
        return result

    def clusters(self, min_size: int = 2) -> Iterator[Cluster]:
        """Every cluster with at least ``min_size`` members, oldest first (streamed)."""
        with self._db.transaction() as conn:
            yield from _group_clusters(queries.cluster_rows(conn, self.schema, None, min_size))

    def pairs(self) -> Iterator[Pair]:
        """Every stored match edge (streamed)."""
        with self._db.transaction() as conn:
            for row in queries.pair_rows(conn, self.schema):
                a, b, method, jaccard, containment, hamming, found_at, excerpt = row
                yield Pair(a, b, Method(method), jaccard, containment, hamming, found_at, excerpt)

    def export(self) -> Iterator[dict[str, Any]]:
        """Every document with its cluster (streamed)."""
        with self._db.transaction() as conn:
            for external_id, cluster_id, representative, created_at, meta in queries.export_rows(
                conn, self.schema
            ):
                yield {
                    "id": external_id,
                    "cluster_id": cluster_id,
                    "representative": representative,
                    "created_at": created_at.isoformat(),
                    "meta": meta,
                }

    def stats(self) -> Stats:
        """Counts over the whole store."""
        counts = self._run(lambda conn: queries.stats_row(conn, self.schema, self.params))
        return Stats(**counts, params=self.params.to_dict(), schema=self.schema)

    # -- deleting ---------------------------------------------------------------------------

    def delete(self, ids: str | Iterable[str]) -> int:
        """Delete documents, their keys and edges; clusters they bridged are split.

        Raises:
            UnknownDocumentError: some id is not stored (then nothing is deleted).
        """
        wanted = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))

        def work(conn: Connection) -> int:
            repository.lock_writers(conn, self.schema)
            found = queries.find_documents(conn, self.schema, wanted)
            missing = [i for i in wanted if i not in found]
            if missing:
                raise UnknownDocumentError(missing[0])
            repository.delete_documents(conn, self.schema, list(found.values()), self.params)
            return len(found)

        return self._db.run(work)

    # -- plumbing ---------------------------------------------------------------------------

    def _run(self, work: Callable[[Connection], Any]) -> Any:
        return self._db.read(work)

    def _doc_id(self, conn: Connection, external_id: str) -> int:
        found = queries.find_documents(conn, self.schema, [external_id])
        if external_id not in found:
            raise UnknownDocumentError(external_id)
        return found[external_id]

    def close(self) -> None:
        """Release the engine the store created (a caller's Engine or Connection is left open)."""
        self._db.close()

    def __enter__(self) -> DedupStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _status(matches: Sequence[Match], params: FingerprintParams) -> Status:
    return Status.of((m.method.value for m in matches), merging_methods(params))


def _as_document(record: Record) -> Document:
    if isinstance(record, Document):
        return record
    if isinstance(record, tuple) and len(record) in (2, 3):
        return Document(*record)
    raise InvalidDocumentError(
        f"expected a Document or an (id, text[, meta]) tuple, got {type(record).__name__}"
    )


def _batches(records: Iterable[Record], size: int, max_chars: int) -> Iterator[list[Document]]:
    """Lists of at most ``size`` documents and (unless one document is larger) ``max_chars``."""
    batch: list[Document] = []
    chars = 0
    for record in records:
        document = _as_document(record)
        batch.append(document)
        chars += len(document.text) if isinstance(document.text, str) else 0
        if len(batch) >= size or chars >= max_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


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


def _group_clusters(rows: Iterable[Any]) -> Iterator[Cluster]:
    for cluster_id, group in itertools.groupby(rows, key=lambda r: r[0]):
        members = list(group)
        yield Cluster(
            cluster_id=cluster_id,
            representative=members[0][1],
            members=[m[2] for m in members],
            first_seen=min(m[3] for m in members),
            last_seen=max(m[3] for m in members),
        )
