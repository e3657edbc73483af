"""The store's tables as :class:`~dedup_store.service.DedupStore` reads and writes them.

:class:`StoreTables` owns every call of the service into the database layer, each in the
transaction it has always had: :meth:`Database.run` (a transaction of ours, or a savepoint of
the caller's), :meth:`Database.read` (one autocommit read), :meth:`Database.native` (psycopg's raw
cursor) or :meth:`Database.transaction` (a streamed read). The service validates, fingerprints
and builds the answers; it never sees a connection.

The bulk load, the review report's reads and the writes of documents (one at a time, in batches,
deleted) are imported by the methods that use them, so that a store opened for a ``check`` does
not load them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy import text as sa_text

from dedup_store.core.arrays import I64, U32
from dedup_store.core.fingerprint import Fingerprint
from dedup_store.core.params import FingerprintParams
from dedup_store.core.weights import DocumentFrequencies
from dedup_store.db.candidates import hot
from dedup_store.db.matches import exact_groups, scoring
from dedup_store.db.reports import reads
from dedup_store.db.reports.explain import StoredPair, stored_pair
from dedup_store.db.rows import key_rows
from dedup_store.db.schema import ddl, migrate, settings
from dedup_store.db.schema.settings import StoreSettings
from dedup_store.db.server import raw_statements
from dedup_store.db.server.engine import Database
from dedup_store.db.write import frequencies, locks, reclustering, verdicts
from dedup_store.db.write.reclustering import CutEdge
from dedup_store.db.write.verdicts import VerdictRow
from dedup_store.errors import UnknownDocumentError
from dedup_store.results import MatchRow

if TYPE_CHECKING:
    from dedup_store.db.write.single import SingleOutcome

#: What a parameter mismatch with a stored store says to do.
PARAMS_WAY_OUT = "open it with the stored parameters (omit them), or use another schema"

Params = FingerprintParams | Mapping[str, Any] | None


class StoreTables:
    """One store's tables, reached through ``db``, holding documents fingerprinted with
    ``params``; made by :meth:`open`.

    It also lists the hot keys its ``check`` and ``add`` statements have met
    (:class:`~dedup_store.db.candidates.hot.MetHotKeys`), to send their secondary keys at once.
    """

    def __init__(self, db: Database, params: FingerprintParams) -> None:
        self.db = db
        self.schema = db.schema
        self.params = params
        self.hot_keys = hot.MetHotKeys()

    @classmethod
    def open(
        cls, db: Database, params: Params, create: bool, chosen: StoreSettings
    ) -> tuple[StoreTables, StoreSettings]:
        """The tables of the store in ``db``'s schema and its settings; with ``create``, the
        store is made or completed first (a new one records ``params`` and the ``chosen``
        settings).

        A complete store at this code's revision is only read, on one autocommit connection, so
        opening it needs no privilege beyond reading and never waits on a writer.

        Raises:
            ParamsMismatchError: ``params`` (all of them, or the named ones) differ from the
                stored ones.
            StoreNotInitializedError: without ``create``, the schema holds no store.
        """
        opened = db.read(lambda conn: _ready(conn, db.schema, params), replica=True)
        if opened is None:
            opened = db.run(lambda conn: _open(conn, db.schema, params, create, chosen))
        stored, stored_settings = opened
        return cls(db, stored), stored_settings

    # -- single documents -------------------------------------------------------------------

    def add_one(
        self,
        fp: Fingerprint,
        external_id: str,
        meta: Mapping[str, Any] | None,
        body: str | None,
        language: str,
        meta_signature: U32 | None,
    ) -> SingleOutcome:
        """Write one new document in one statement (:mod:`~dedup_store.db.write.single`).

        When the document makes keys hot, their buckets are split and the statement runs again;
        every 64th document refreshes the planner's statistics of the tables that grew
        (:meth:`_refresh_statistics`). An outcome with ``judged`` or
        ``merge`` wrote nothing: the document goes in as a batch.
        """
        from dedup_store.db.write import single

        keys = locks.keys_of(self.schema, fp, external_id)
        statement, parameters = single.add_statement(
            self.schema, fp, external_id, meta, body, language, meta_signature,
            self.hot_slots(fp), exclusive=len(keys) > locks.MAX_KEY_LOCKS,
        )  # fmt: skip
        outcome = single.run(self.db, self.schema, statement, parameters, keys)
        if outcome.judged or outcome.merge:  # verdicts to apply, clusters to merge: as a batch
            return outcome
        if outcome.rekey:  # it owns hot keys, or makes keys hot: with its secondary keys
            self.hot_keys.learn(fp, outcome.touched)
            parameters = {**parameters, **hot.query_parameters(fp)}
        while outcome.rekey:  # the document makes keys hot: split their buckets, then add it
            self.db.run(lambda conn: self._promote(conn, fp))
            outcome = single.run(self.db, self.schema, statement, parameters, keys)
        if outcome.inserted and outcome.doc_id % 64 == 0:
            doc_id = outcome.doc_id
            self.db.run(lambda conn: self._refresh_statistics(conn, doc_id))
        return outcome

    def _refresh_statistics(self, conn: Connection, doc_id: int) -> None:
        """The planner's statistics of the recent key tier as it grows, and of the other tables
        every 1024th document (``doc_id``)."""
        from dedup_store.db.write import batch as batch_write

        key_rows.refresh_recent_statistics(conn, self.schema)
        if doc_id % 1024 == 0:
            batch_write.refresh_statistics(conn, self.schema, doc_id)

    def _promote(self, conn: Connection, fp: Fingerprint) -> None:
        """Split the buckets of the keys ``fp`` makes hot, under the writers' lock."""
        from dedup_store.db.write import single

        locks.lock_store(conn, self.schema)
        single.promote_pending(conn, self.schema, fp)

    def check_matches(self, fp: Fingerprint, signature: U32 | None) -> list[MatchRow]:
        """The matches of the statement of ``check`` for ``fp`` (with the metadata
        ``signature``): run again with every slot's secondary keys when ``fp`` owns hot keys
        not met before."""
        statement = scoring.check_statement(self.schema, fp, self.hot_slots(fp), signature)
        found = self._statement_rows(*statement, replica=True)
        touched = scoring.touched_slots(found)
        if touched:  # it owns hot keys not met before: again with every slot's secondary keys
            self.hot_keys.learn(fp, touched)
            again = scoring.check_statement(self.schema, fp, None, signature)
            found = self._statement_rows(*again, replica=True)
        return scoring.check_matches(found)

    def document_frequencies(self, features: I64) -> DocumentFrequencies:
        """The stored document frequencies of weighted SimHash ``features``."""
        statement, parameters = frequencies.read_statement(self.schema, features)
        rows = self._statement_rows(statement, parameters)
        return frequencies.frequencies_of(rows[0])

    def hot_slots(self, fp: Fingerprint) -> list[tuple[int, int]]:
        """The slots of ``fp`` whose key is listed as hot (:class:`hot.MetHotKeys`, seeded with
        the store's hot keys the first time)."""
        if not self.hot_keys.seeded:
            # a hint: a statement meeting a hot key not listed says so (``touched``)
            stored = self.db.read(lambda conn: hot.stored_hot_keys(conn, self.schema), replica=True)
            self.hot_keys.seed(stored)
        return self.hot_keys.slots(fp)

    def _statement_rows(
        self,
        statement: str,
        parameters: dict[str, Any],
        as_tuples: bool = False,
        replica: bool = False,
    ) -> list[Any]:
        """The rows of a single-document read, by column name (``as_tuples``: by position): on
        psycopg's raw cursor (``replica``: of a replica when one may serve it), or in the
        caller's transaction."""
        found = self.db.native(
            lambda raw: raw_statements.fetch_all(raw, statement, parameters, as_tuples),
            replica=replica,
        )
        if found is None:  # inside a caller's transaction
            found = self.db.in_caller(
                lambda _, raw: raw_statements.fetch_all(
                    raw, statement, parameters, as_tuples, caller=True
                )
            )
        if found is None:  # an asyncio caller's

            def rows(conn: Connection) -> list[Any]:
                with raw_statements.generic_plans(conn):
                    result = conn.execute(sa_text(statement), parameters)
                    return (
                        [tuple(r) for r in result]
                        if as_tuples
                        else [dict(r) for r in result.mappings()]
                    )

            return self.db.read(rows)
        return found

    # -- reads ------------------------------------------------------------------------------

    def similar_rows(self, external_id: str, limit: int | None, offset: int) -> list[Any] | None:
        """The rows of the documents ``external_id`` matches, best first (``None``: no such
        document; :mod:`~dedup_store.db.matches.exact_groups`)."""
        statement = exact_groups.similar_statement(self.schema)
        parameters = exact_groups.similar_parameters(external_id, self.params, limit, offset)
        found = self._statement_rows(statement, parameters, replica=True)
        rows = [MatchRow(**row) for row in found]
        if not rows and not self.db.read(
            lambda conn: exact_groups.exists(conn, self.schema, external_id), replica=True
        ):
            return None
        return rows

    def cluster_of(self, external_id: str) -> list[Any]:
        """The member rows of the cluster of document ``external_id``.

        Raises:
            UnknownDocumentError: it is not stored.
        """

        statement = reads.document_cluster_statement(self.schema)
        rows = self._statement_rows(
            statement, {"external_id": external_id}, as_tuples=True, replica=True
        )
        if not rows:
            raise UnknownDocumentError(external_id)
        return rows

    @contextmanager
    def cluster_rows(self, min_size: int, min_similarity: float | None) -> Iterator[Iterator[Any]]:
        """The member rows of every cluster of at least ``min_size`` members, oldest first,
        streamed in a transaction (:func:`~dedup_store.db.reports.reads.cluster_rows`)."""
        with self.db.transaction(replica=True) as conn:
            yield reads.cluster_rows(conn, self.schema, None, min_size, min_similarity)

    @contextmanager
    def pair_rows(
        self, min_similarity: float | None, pending: bool, expand: bool
    ) -> Iterator[Iterator[Any]]:
        """The stored (or, with ``expand``, implied) pairs, streamed in a transaction
        (:func:`~dedup_store.db.reports.reads.pair_rows`)."""
        with self.db.transaction(replica=True) as conn:
            yield reads.pair_rows(conn, self.schema, self.params, min_similarity, pending, expand)

    def export_rows(self) -> Iterator[Any]:
        """Every document with its cluster and best older match, streamed in a transaction
        (closed with the stream, its cursor first)."""
        with self.db.transaction(replica=True) as conn:
            yield from reads.export_rows(conn, self.schema, self.params)

    @contextmanager
    def report_rows(self, cluster: str | None) -> Iterator[tuple[Any, Iterator[Any]]]:
        """The review report's counts and items (of the cluster of document ``cluster``, or of
        the whole store), streamed in a transaction.

        Raises:
            UnknownDocumentError: ``cluster`` is not stored.
        """
        from dedup_store.db.reports import review_report

        with self.db.transaction(replica=True) as conn:
            label = None
            if cluster is not None:
                doc_id = _doc_id(conn, self.schema, cluster)
                label = reads.cluster_ids(conn, self.schema, [doc_id])[doc_id]
            counts = review_report.overview(conn, self.schema, self.params, label, cluster)
            yield counts, review_report.report_items(conn, self.schema, self.params, label)

    def stats_counts(self) -> dict[str, Any]:
        """The counts over the whole store (:func:`~dedup_store.db.reports.reads.stats_row`)."""
        return self.db.read(
            lambda conn: reads.stats_row(conn, self.schema, self.params), replica=True
        )

    def count_clusters(self) -> tuple[int, int]:
        """The store's clusters, counted: all of them, and those of two documents or more."""
        return self.db.read(lambda conn: reads.count_clusters(conn, self.schema))

    def count_documents(self, limit: int) -> int:
        """The stored documents, counted up to ``limit``."""
        return self.db.read(lambda conn: reads.count_documents(conn, self.schema, limit))

    def other_owner(self) -> str | None:
        """The owner of the store's tables, when this connection's role may not act as it."""
        return self.db.read(lambda conn: ddl.other_owner(conn, self.schema))

    # -- writes of the whole store ----------------------------------------------------------

    def delete(self, external_ids: list[str]) -> int:
        """Delete the documents ``external_ids`` under the writers' lock; returns how many.

        Raises:
            UnknownDocumentError: some id is not stored (then nothing is deleted).
        """
        from dedup_store.db.write import batch as batch_write

        def work(conn: Connection) -> int:
            locks.lock_store(conn, self.schema)
            found = reads.find_documents(conn, self.schema, external_ids)
            missing = [i for i in external_ids if i not in found]
            if missing:
                raise UnknownDocumentError(missing[0])
            batch_write.delete_documents(conn, self.schema, list(found.values()), self.params)
            return len(found)

        return self.db.run(work)

    def settle(self) -> dict[str, float]:
        """Move the recent tier of the key tables into the settled one
        (:func:`~dedup_store.db.bulk.load.settle`)."""
        from dedup_store.db.bulk.load import settle

        return self.db.run(lambda conn: settle(conn, self.schema))

    # -- review -----------------------------------------------------------------------------

    def stored_pair(self, a: str, b: str) -> tuple[StoredPair, VerdictRow | None]:
        """What the store holds of documents ``a`` and ``b``, and the verdict on them.

        Raises:
            UnknownDocumentError: either document is not stored.
        """

        with self.db.transaction(replica=True) as conn:
            pair = stored_pair(conn, self.schema, self.params, a, b)
            return pair, verdicts.of_pair(conn, self.schema, (a, b))

    def record_verdict(
        self, pair: tuple[str, str], verdict: str, note: str | None, by: str | None
    ) -> tuple[VerdictRow, list[CutEdge]]:
        """Record ``verdict`` on the documents of ``pair`` and recluster them, under the
        writers' lock; returns the verdict's row and the edges it cut.

        Raises:
            UnknownDocumentError: either document is not stored.
            InvalidParamsError: the verdict contradicts others.
        """

        def work(conn: Connection) -> tuple[VerdictRow, list[CutEdge]]:
            locks.lock_store(conn, self.schema)
            _require_documents(conn, self.schema, pair)
            row = verdicts.record(conn, self.schema, pair, verdict, note, by)
            verdicts.require_consistent(conn, self.schema, pair)
            labels = verdicts.cluster_labels(conn, self.schema, pair)
            reclustering.recluster(conn, self.schema, labels)
            return row, reclustering.cut_edges(conn, self.schema, self.params, pair)

        result: tuple[VerdictRow, list[CutEdge]] = self.db.run(work)
        return result

    def clear_verdict(self, pair: tuple[str, str]) -> bool:
        """Take back the verdict on ``pair`` and recluster it; returns whether there was one."""

        def work(conn: Connection) -> bool:
            locks.lock_store(conn, self.schema)
            cleared = verdicts.clear(conn, self.schema, pair)
            if cleared:
                labels = verdicts.cluster_labels(conn, self.schema, pair)
                reclustering.recluster(conn, self.schema, labels)
            return cleared

        result: bool = self.db.run(work)
        return result

    def verdict_rows(self) -> tuple[list[VerdictRow], list[CutEdge]]:
        """The rows of every verdict, newest first, and the edges they cut."""

        def work(conn: Connection) -> tuple[list[VerdictRow], list[CutEdge]]:
            rows = verdicts.all_rows(conn, self.schema)
            return rows, reclustering.cut_edges(conn, self.schema, self.params)

        result: tuple[list[VerdictRow], list[CutEdge]] = self.db.read(work, replica=True)
        return result

    def settings(self) -> StoreSettings:
        """The store's settings."""
        result: StoreSettings = self.db.read(
            lambda conn: settings.load(conn, self.schema), replica=True
        )
        return result

    def choose_canonical(self, external_id: str, by: str | None) -> None:
        """Declare document ``external_id`` the canonical one of its cluster.

        Raises:
            UnknownDocumentError: it is not stored.
        """

        def work(conn: Connection) -> None:
            _require_documents(conn, self.schema, (external_id,))
            settings.choose_canonical(conn, self.schema, external_id, by)

        self.db.run(work)

    def save_canonical_rule(self, rule: str) -> None:
        """Record ``rule`` (checked) as the store's canonical rule."""

        def work(conn: Connection) -> None:
            current = settings.load(conn, self.schema)
            settings.save(conn, self.schema, StoreSettings(current.keep_text, rule))

        self.db.run(work)


# -- opening --------------------------------------------------------------------------------


def _open(
    conn: Connection, schema: str, params: Params, create: bool, chosen: StoreSettings
) -> tuple[FingerprintParams, StoreSettings]:
    """Check (and with ``create``, make or complete) the store; returns its params and
    settings (``chosen`` for a new store)."""
    opened = _ready(conn, schema, params)
    if opened is not None:
        return opened
    if not create:
        migrate.verify_schema(conn, schema)
    locks.lock_store(conn, schema)
    stored = _create(conn, schema, params, chosen)
    return stored, settings.load(conn, schema)


def _ready(
    conn: Connection, schema: str, params: Params
) -> tuple[FingerprintParams, StoreSettings] | None:
    """The params and settings of a complete store at this code's revision (refusing other
    ``params``), else ``None``."""
    stored = _ready_params(conn, schema)
    if stored is None:
        return None
    if params is not None:
        _require(schema, stored, params)
    return stored, settings.load(conn, schema)


def _require(
    schema: str, stored: FingerprintParams, params: FingerprintParams | Mapping[str, Any]
) -> None:
    """Refuse ``params`` (all of them, or the named ones) that differ from the stored ones."""
    context = f"store {schema!r} was created with other parameters"
    if isinstance(params, FingerprintParams):
        stored.require_same(params, context, PARAMS_WAY_OUT)
        return
    wanted = {**stored.to_dict(), **params}
    stored.require_same(FingerprintParams.from_dict(wanted), context, PARAMS_WAY_OUT)


def _ready_params(conn: Connection, schema: str) -> FingerprintParams | None:
    """The params of a complete store at this code's revision, else ``None``."""
    if migrate.current_revision(conn, schema) != migrate.head():
        return None
    stored = ddl.load_params(conn, schema)
    if stored is None or key_rows.missing(conn, schema):
        return None
    if reclustering.vetoed_together(conn, schema):  # verdicts of a store made before 0016
        return None
    return stored


def _create(
    conn: Connection, schema: str, params: Params, chosen: StoreSettings
) -> FingerprintParams:
    """Create or complete the store under the writers' lock (a new store records the
    ``chosen`` settings)."""
    if migrate.current_revision(conn, schema) is None:
        migrate.upgrade_connection(conn, schema)
    migrate.verify_schema(conn, schema)
    stored = ddl.load_params(conn, schema)
    if stored is None:
        if isinstance(params, FingerprintParams):
            stored = params
        else:
            stored = FingerprintParams.from_dict(dict(params or {}))
        ddl.save_params(conn, schema, stored)
        settings.save(conn, schema, chosen)
    elif params is not None:
        _require(schema, stored, params)
    key_rows.fill_missing(conn, schema, stored)
    reclustering.recluster(conn, schema, reclustering.vetoed_together(conn, schema))
    return stored


# -- documents by external id ---------------------------------------------------------------


def _doc_id(conn: Connection, schema: str, external_id: str) -> int:
    """The id of document ``external_id``.

    Raises:
        UnknownDocumentError: it is not stored.
    """
    found = reads.find_documents(conn, schema, [external_id])
    if external_id not in found:
        raise UnknownDocumentError(external_id)
    return found[external_id]


def _require_documents(conn: Connection, schema: str, ids: tuple[str, ...]) -> None:
    """Raise :class:`~dedup_store.errors.UnknownDocumentError` for the first of ``ids`` that
    is not stored."""
    found = reads.find_documents(conn, schema, list(ids))
    for external_id in ids:
        if external_id not in found:
            raise UnknownDocumentError(external_id)
