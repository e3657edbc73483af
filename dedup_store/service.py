"""The service facade: :class:`DedupStore`.

It validates, fingerprints and builds the answers; every read and write goes through the
store's tables (:class:`~dedup_store.db.repository.StoreTables`).

The ingest pipeline, the preparation of an added document and the report are imported by the
methods that use them (the bulk load by the tables' ``settle``), so that a store opened for a
``check`` (a command line run per document) does not load them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any, Literal

from dedup_store.core.fingerprint import (
    Fingerprint,
    FingerprintBatch,
    feature_index,
    fingerprint_valid_texts,
    reweighted,
)
from dedup_store.core.matchrule import merging_methods
from dedup_store.core.metadata import with_meta
from dedup_store.core.params import FingerprintParams
from dedup_store.core.validation import DEFAULT_MAX_BYTES, validate_text
from dedup_store.db.repository import StoreTables
from dedup_store.db.schema.ddl import DEFAULT_SCHEMA
from dedup_store.db.schema.names import validate_schema
from dedup_store.db.schema.settings import StoreSettings, check_rule
from dedup_store.db.server.engine import Bind, Database
from dedup_store.db.server.replicas import ReadSource
from dedup_store.errors import EmptyDocumentError, OwnerRequiredError, UnknownDocumentError
from dedup_store.ingest.records import Record, stored_ids, validate_meta
from dedup_store.plumbing import Closing
from dedup_store.results import (
    AddResult,
    CheckResult,
    Cluster,
    Document,
    IngestSummary,
    Match,
    Method,
    Pair,
    Stats,
    Status,
    joined_cluster,
    sorted_matches,
)
from dedup_store.review.reviewing import Reviewing

if TYPE_CHECKING:
    from dedup_store.ingest.pipeline import OnBatch, OnProgress
    from dedup_store.review.report.model import ReportSummary

#: A load of at least this many times the documents stored is written in bulk by default.
BULK_FACTOR = 4
#: A load known to hold fewer documents is not written in bulk by default: rebuilding the
#: store's two dozen lookup indexes costs more than maintaining them for so few documents.
BULK_MINIMUM = 1000
#: ``workers="auto"`` starts a fingerprinting process only on a machine with at least this many
#: cores. A load already keeps two busy, the calling process and the server's backend that
#: takes its rows; on two cores a worker only competes with them and adds its start (a new
#: interpreter and its imports): measured on a 2-core machine, the CLI loaded 2,500 man pages
#: in 2.1 s without one against 2.7-3.3 s with one, and 100k ~600-word documents (466 MB) in
#: the same time either way.
AUTO_WORKER_CORES = 3


def _auto_workers(records: Iterable[Record], bulk: bool, cores: int | None = None) -> int:
    """The fingerprinting processes ``workers="auto"`` starts for a load of ``records`` on a
    machine with ``cores`` cores (default: this one's)."""
    large = bulk or (isinstance(records, Sized) and len(records) >= BULK_MINIMUM)
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return 1 if large and cores >= AUTO_WORKER_CORES else 0


class DedupStore(Reviewing, Closing):
    """Near-duplicate detection backed by PostgreSQL.

    Args:
        bind: a database URL, a SQLAlchemy Engine, or a Connection (SQLAlchemy's, or a psycopg
            3 connection, as Django's). With a Connection the store works inside the caller's
            transaction (in savepoints) and never commits or rolls it back; with a URL or
            Engine every call is its own transaction.
        params: fingerprint parameters. A new store records them; an existing store refuses
            different ones (:class:`~dedup_store.errors.ParamsMismatchError`); ``None`` uses the
            stored ones (or the defaults for a new store). A mapping names only some
            parameters: a new store takes the defaults for the others, an existing one is
            compared on the named ones only.
        schema: the PostgreSQL schema holding the store's tables.
        create: create the store when the schema has none (otherwise
            :class:`~dedup_store.errors.StoreNotInitializedError`).
        keep_text: store each document's original text (for explanations and reports);
            ``None`` follows the store's setting, which a new store takes from this argument.
        canonical_rule: a new store's rule for the canonical document of each cluster
            (:meth:`set_canonical_rule`; default ``oldest``).
        max_bytes: largest accepted document, in UTF-8 bytes.
        pool_size: connections each of the store's two pools keeps open, given a URL (default
            5 for transactions, 3 for reads and ``add``): the number of threads that share the
            store. A store is safe to share between threads; each call takes a connection of
            its own.
        replicas: URLs of PostgreSQL streaming replicas (hot standbys) of the database, to send
            reads to (:mod:`~dedup_store.db.server.replicas`): ``check``, ``similar``,
            ``cluster``, ``clusters``, ``pairs``, ``explain``, ``report``, ``stats`` and
            ``export`` read a replica whose lag is at most ``max_replica_lag`` seconds and that
            has replayed this store's own writes; every write, and the decision of ``add``,
            goes to the primary. Ignored with a Connection (everything stays on it).
        max_replica_lag: the largest lag, in seconds, of a replica that serves reads.
    """

    def __init__(
        self,
        bind: Bind,
        params: FingerprintParams | Mapping[str, Any] | None = None,
        schema: str = DEFAULT_SCHEMA,
        *,
        create: bool = True,
        keep_text: bool | None = None,
        canonical_rule: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        pool_size: int | None = None,
        replicas: Sequence[str] = (),
        max_replica_lag: float = 1.0,
    ) -> None:
        self.schema = validate_schema(schema)  # before any statement is built with it
        self.max_bytes = max_bytes
        self._db = Database(bind, schema, pool_size, replicas, max_replica_lag)
        chosen = StoreSettings(bool(keep_text), check_rule(canonical_rule or "oldest"))
        try:
            self._tables, stored = StoreTables.open(self._db, params, create, chosen)
        except BaseException:
            self._db.close()
            raise
        self.params = self._tables.params
        self.keep_text: bool = stored.keep_text if keep_text is None else keep_text

    # -- writing ----------------------------------------------------------------------------

    def add(
        self, id: str, text: str, meta: Mapping[str, Any] | None = None, *, update: bool = False
    ) -> AddResult:
        """Add one document; returns whether it is new or a duplicate, its matches and cluster.

        Raises:
            InvalidDocumentError: bad text (NUL, invalid UTF-8, too large) or id.
            EmptyDocumentError: no words left after canonicalization.
        """
        from dedup_store.ingest.prepared import prepare_batch

        document = Document(id, text, meta)
        if update or self.params.weighted:  # weighted: weighed under the lock, as a batch
            return self.add_many([document], update=update)[0]
        prepared = prepare_batch([document], self.params, {}, False, self.max_bytes)
        if prepared.errors:
            raise prepared.first_error()
        fp = prepared.batch.row(0)
        language = prepared.language_of_row(0)
        body = text if self.keep_text else None

        meta_signature = prepared.meta.row(0) if prepared.meta else None
        outcome = self._tables.add_one(fp, id, meta, body, language, meta_signature)
        if outcome.judged or outcome.merge:  # verdicts to apply, clusters to merge: as a batch
            return self.add_many([document])[0]
        if not outcome.inserted:
            return AddResult(id, Status.SKIPPED, [], outcome.cluster_id)
        status = Status.of((m.method for m in outcome.matches), merging_methods(self.params))
        return AddResult(id, status, sorted_matches(outcome.matches), outcome.cluster_id)

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
        bulk: bool | None = None,
        workers: int | Literal["auto"] = 0,
        on_phase: Callable[[str], None] | None = None,
    ) -> IngestSummary:
        """Stream records into the store, one transaction per batch, in bounded memory; or,
        for a load large against the store, in one bulk load.

        Known ids are skipped (``Status.SKIPPED``) unless ``update`` replaces them, so running
        the same input twice is harmless. A bad record raises with ``on_error="stop"`` (nothing
        of its batch is written) or is reported and skipped with ``on_error="skip"``.

        A bulk load (:mod:`dedup_store.db.bulk.load`) writes the same batches with the same results
        in one transaction, without maintaining the key lookup indexes, and builds them at the
        end: several times faster on a large load, but other writers and readers of the store
        wait until it commits, and an interrupted load leaves the store as it was (run it
        again). A bad record with ``on_error="stop"`` still commits the batches before it.

        Args:
            records: documents, or ``(id, text[, meta])`` tuples.
            batch_size: most documents per transaction (a batch also ends once it holds
                :data:`~dedup_store.ingest.pipeline.BATCH_BYTES` of text, so long documents are
                stored, and reported, sooner).
            update: replace documents whose id is stored instead of skipping them (those whose
                text and metadata are unchanged are still skipped: nothing is rewritten, so
                their internal ids, clusters and first-seen times stay).
            on_error: ``stop`` raises the first bad record, ``skip`` reports it and goes on.
            on_batch: called after each stored batch with its results (a sequence in input
                order, whose :class:`AddResult` values are made as they are read) and its bad
                records. In a bulk load a batch is reported once written in the load's
                transaction: an error other than a bad record or an interrupt rolls the whole
                load back, the batches reported before it included.
            on_progress: called with the counts of documents fingerprinted and stored so far,
                after each batch is fingerprinted and after it is stored.
            count_clusters: also count the store's clusters at the end (a whole-store
                aggregate); otherwise ``IngestSummary.clusters`` is ``None``.
            bulk: load in bulk; ``None`` decides: a bulk load when the store holds no
                documents, or when ``records`` has a length of at least
                :data:`BULK_FACTOR` times the documents stored; never for ``records`` with a
                length below :data:`BULK_MINIMUM`, with ``update``, inside a caller's
                Connection (where it must be asked for) or for a role that does not own the
                store's tables (a bulk load rebuilds their indexes; asked for, it raises
                :class:`~dedup_store.errors.OwnerRequiredError`).
            workers: processes that fingerprint the next batches while this one writes
                (:mod:`dedup_store.ingest.workers`); 0 fingerprints in the calling thread; ``auto``
                starts one on a machine with :data:`AUTO_WORKER_CORES` cores or more, for a
                bulk load or a load of at least :data:`BULK_MINIMUM` records (starting a
                process costs about a second). They are started with the ``spawn`` method,
                so a script that asks for them must ingest under
                ``if __name__ == "__main__":``.
            on_phase: called with :data:`~dedup_store.ingest.pipeline.INDEX_PHASE` when a bulk load
                has written its batches and builds the indexes (which takes a while on a large
                load, with no batch to report meanwhile).
        """
        from dedup_store.ingest import pipeline

        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if bulk is None:
            bulk = self._bulk_pays(records, update) and self._tables.other_owner() is None
        elif bulk:
            self._require_owner("a bulk load")
        if workers == "auto":
            workers = _auto_workers(records, bulk)
        destination = pipeline.Destination(
            self._db, self.schema, self.params, self.keep_text, self.max_bytes
        )
        summary = pipeline.ingest(
            destination,
            records,
            batch_size=batch_size,
            update=update,
            on_error=on_error,
            on_batch=on_batch,
            on_progress=on_progress,
            bulk_load=bulk,
            workers=workers,
            on_phase=on_phase,
        )
        if count_clusters:
            summary.clusters, summary.duplicate_clusters = self._tables.count_clusters()
        return summary

    # -- reading ----------------------------------------------------------------------------

    def check(self, text: str, meta: Mapping[str, Any] | None = None) -> CheckResult:
        """What :meth:`add` would answer for ``text`` with ``meta``, without writing anything.

        Raises:
            InvalidDocumentError, EmptyDocumentError: as :meth:`add` (metadata included).
        """
        if meta is not None:
            validate_meta(meta)
        batch = fingerprint_valid_texts([validate_text(text, self.max_bytes)], self.params)
        if batch.empty_index:
            raise EmptyDocumentError()
        fp = self._weighted(batch) if self.params.weighted else batch.row(0)
        fp, signature = with_meta(fp, meta)
        rows = self._tables.check_matches(fp, signature)
        merging = merging_methods(self.params)
        status = Status.of((r.method for r in rows), merging)
        return CheckResult(status, sorted_matches(rows), joined_cluster(rows, merging))

    def _weighted(self, batch: FingerprintBatch) -> Fingerprint:
        """The fingerprint of a batch of one text weighed with the store's document frequencies
        as if it were added now (a store with weighted SimHash features)."""
        index = batch.feature_index or feature_index(batch)
        return reweighted(batch, self._tables.document_frequencies(index.unique)).row(0)

    def settle(self) -> dict[str, float]:
        """Move the documents added since the last bulk load (or settle) from the recent tier
        of the key tables into the settled one: the settled table's index is built again over
        every document, the recent one starts empty, so later incremental writes insert into a
        small index again. As long as it runs (the index build of the whole store), readers
        wait.

        Returns:
            ``settled_through`` (the largest settled id), ``moved`` (documents that were in the
            recent tier) and ``seconds`` (the index build).
        """
        self._require_owner("settling the key tiers")
        return self._tables.settle()

    def _require_owner(self, work: str) -> None:
        """Refuse ``work`` that drops and builds the store's indexes, unless the role owns them.

        Raises:
            OwnerRequiredError: naming the owner.
        """
        owner = self._tables.other_owner()
        if owner is not None:
            raise OwnerRequiredError(work, owner)

    def similar(self, id: str, *, limit: int | None = None, offset: int = 0) -> list[Match]:
        """The documents that document ``id`` matches (older and newer), best first.

        An exact copy answers as its whole exact group does: the other copies (method
        ``exact``) and every document that a member of the group matches, with the copies of
        that document too, each once, with the scores of the best stored edge between the
        two groups (:mod:`dedup_store.db.matches.exact_groups`).

        Args:
            id: the document's external id.
            limit: return at most this many matches (``None``: all of them).
            offset: skip this many of the best matches first (for paging with ``limit``).

        Raises:
            UnknownDocumentError: no document has id ``id``.
        """
        if (limit is not None and limit < 0) or offset < 0:
            raise ValueError(f"limit and offset must not be negative, got {limit} and {offset}")
        stored_ids(id)
        rows = self._tables.similar_rows(id, limit, offset)
        if rows is None:
            raise UnknownDocumentError(id)
        return [row.match() for row in rows]

    def cluster(self, id: str) -> Cluster:
        """The cluster of document ``id``.

        Raises:
            UnknownDocumentError: no document has id ``id``.
        """
        stored_ids(id)
        return next(_group_clusters(self._tables.cluster_of(id)))

    def clusters(
        self, min_size: int = 2, *, min_similarity: float | None = None
    ) -> Iterator[Cluster]:
        """Every cluster with at least ``min_size`` members, oldest first (streamed).

        With ``min_similarity``, the clusters the stored merging edges of at least that score
        make (verdicts applied), as a stricter store would keep them, without re-ingesting.
        """
        with self._tables.cluster_rows(min_size, min_similarity) as rows:
            yield from _group_clusters(rows)

    def pairs(
        self, *, min_similarity: float | None = None, pending: bool = False, expand: bool = False
    ) -> Iterator[Pair]:
        """Every stored match edge with its verdict (streamed); only those of at least
        ``min_similarity``; with ``pending``, the undecided ones (exact copies aside), the most
        doubtful first: excerpts, SimHash-only matches, then the closest to the threshold.

        With ``expand``, every pair the stored edges imply instead: the copies of an exact
        group with each other, and each member of a group with each member of every group it
        matches, with the scores of the best stored edge between the two groups
        (:attr:`Pair.via_exact_of` tells the implied ones; a group of k copies gives
        k (k - 1) / 2 pairs). The pending pairs are stored ones: not with ``expand``.
        """
        if pending and expand:
            raise ValueError("pending lists stored pairs: it does not go with expand")
        with self._tables.pair_rows(min_similarity, pending, expand) as rows:
            for row in rows:  # columns named as Pair's fields
                yield Pair(**{**row._mapping, "method": Method(row.method)})

    def export(self) -> Iterator[dict[str, Any]]:
        """Every document with its cluster, its metadata, and the scores of its best match
        with an older document (``match`` and the scores are ``None`` without one), streamed."""
        names = ("id", "cluster_id", "representative", "created_at", "meta", "match", "method")
        scores = ("jaccard", "meta_score", "score")
        for row in self._tables.export_rows():
            record = dict(zip(names + scores, row, strict=True))
            record["created_at"] = record["created_at"].isoformat()
            yield record

    def stats(self) -> Stats:
        """Counts over the whole store."""
        counts = self._tables.stats_counts()
        replicas = self._db.replicas
        if replicas is not None:
            counts["replicas"] = {"servers": replicas.status(), **replicas.counters}
        return Stats(**counts, params=self.params.to_dict(), schema=self.schema)

    @property
    def last_read(self) -> ReadSource | None:
        """Where this thread's last read of a store with replicas was served: the replica
        (``None``: the primary), its lag in seconds when it served it, and whether the primary
        could not be reached (the lag is then the age of the last transaction the replica
        replayed: how stale the answer may be). ``None`` for a store without replicas."""
        return None if self._db.replicas is None else self._db.replicas.last_read

    def report(
        self,
        out: str | os.PathLike[str],
        *,
        cluster: str | None = None,
        max_bytes: int | None = None,
        max_words: int | None = None,
        workers: int | Literal["auto"] = 0,
    ) -> ReportSummary:
        """Write the review report, one self-contained HTML file: an overview, the clusters
        largest first with their members, canonical document and pairs, and each pair's two
        texts side by side with the changed words highlighted (when the store keeps texts).

        Args:
            out: the file to write.
            cluster: report only the cluster of this document.
            max_bytes: the file's byte budget (default 64 MiB): beyond it, pairs keep their
                scores but not their texts.
            max_words: words of each text a pair's alignment covers at most (default 5000).
            workers: processes that align the next pairs while the file is written; 0 aligns
                them in the calling thread; ``auto`` starts one per core for a report of a few
                thousand pairs with texts. The processes are spawned, so a program that uses
                them must call this under ``if __name__ == "__main__":``.

        Raises:
            UnknownDocumentError: ``cluster`` is not stored.
        """
        import time

        from dedup_store.review.report import ReportOptions, write_report

        started = time.perf_counter()
        options = ReportOptions.of(
            max_bytes=max_bytes, max_words=max_words, html=self.params.html, workers=workers
        )
        with self._tables.report_rows(cluster) as (counts, items):
            return write_report(out, counts, items, options, started=started)

    # -- deleting ---------------------------------------------------------------------------

    def delete(self, ids: str | Iterable[str]) -> int:
        """Delete documents, their keys and edges; clusters they bridged are split.

        Raises:
            UnknownDocumentError: some id is not stored (then nothing is deleted).
        """
        wanted = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))
        stored_ids(*wanted)
        return self._tables.delete(wanted)

    # -- plumbing ---------------------------------------------------------------------------

    def _bulk_pays(self, records: Iterable[Record], update: bool) -> bool:
        """Whether a load of ``records`` is large against the store (see :meth:`ingest`)."""
        if update or self._db.connection is not None:
            return False
        size = len(records) if isinstance(records, Sized) else 0
        if isinstance(records, Sized) and size < BULK_MINIMUM:
            return False
        stored = self._tables.count_documents(size // BULK_FACTOR + 1)
        return stored == 0 or stored * BULK_FACTOR <= size

    def close(self) -> None:
        """Release the engine the store created (a caller's Engine or Connection is left open)."""
        self._db.close()


def _group_clusters(rows: Iterable[Any]) -> Iterator[Cluster]:
    for cluster_id, group in itertools.groupby(rows, key=lambda r: r[0]):
        members = list(group)
        yield Cluster(
            cluster_id=cluster_id,
            representative=members[0][1],
            members=[m[2] for m in members],
            first_seen=min(m[3] for m in members),
            last_seen=max(m[3] for m in members),
            canonical=members[0][4],
        )
