"""The database layer, by concern.

Rooms:

- :mod:`~dedup_store.db.server`: the PostgreSQL server itself.

  - :mod:`~dedup_store.db.server.engine`: connections and transactions (our own engine, or the
    caller's).
  - :mod:`~dedup_store.db.server.raw_statements`: the long statements of single-document calls,
    sent on psycopg's raw cursor with ``$n`` parameters (with the writers' locks and the commit
    in one pipeline).
  - :mod:`~dedup_store.db.server.binary_copy`: COPY in PostgreSQL's binary format, built with
    numpy (every write's rows go through it).
  - :mod:`~dedup_store.db.server.embedded`: the embedded PostgreSQL server.
  - :mod:`~dedup_store.db.server.tuning`: server settings sized from a machine's memory and cores.
  - :mod:`~dedup_store.db.server.backup`: dumps, restores and ``psql`` with matching client tools.

- :mod:`~dedup_store.db.schema`: the structure of a store.

  - :mod:`~dedup_store.db.schema.ddl`: the tables and the parameters row.
  - :mod:`~dedup_store.db.schema.migrate`: the Alembic migrations, configured in code.
  - :mod:`~dedup_store.db.schema.names`: schema names, validated once and quoted everywhere.
  - :mod:`~dedup_store.db.schema.encoding`: how fingerprints are stored (key kinds, 32-bit forms,
    array literals).
  - :mod:`~dedup_store.db.schema.settings`: the store's settings that are not fingerprint
    parameters, and the canonical documents a person declared.

- :mod:`~dedup_store.db.rows`: the rows the store writes, computed before its statements run;
  below the lookups, the scoring and the writers, which use them.

  - :mod:`~dedup_store.db.rows.key_rows`: the rows of ``slot_keys``, the band and block keys
    under one index.
  - :mod:`~dedup_store.db.rows.batch_rows`: a batch's new documents, their ids and COPY rows, and
    a bulk load's held rows of the key tables.

- :mod:`~dedup_store.db.candidates`: candidate pairs from the stored keys.

  - :mod:`~dedup_store.db.candidates.lookup`: the lookup of band, block and sample keys (one
    index probe per key), and the pairs inside a batch.
  - :mod:`~dedup_store.db.candidates.hot`: the main candidate search (``find_candidates``) and hot
    keys, their buckets split by secondary keys.
  - :mod:`~dedup_store.db.candidates.lane`: a connection whose statements run in order on a
    thread of its own.
  - :mod:`~dedup_store.db.candidates.stored`: what a write finds of the documents stored before
    it (``StoredKeys``).

- :mod:`~dedup_store.db.matches`: from candidate pairs to matches.

  - :mod:`~dedup_store.db.matches.scoring`: the match rule in SQL, the statement of ``check``,
    and the verification of a batch's candidates into matches and edges.
  - :mod:`~dedup_store.db.matches.exact_groups`: matches through exact groups, read from the
    stored edges.

- :mod:`~dedup_store.db.write`: documents written, clustered and deleted.

  - :mod:`~dedup_store.db.write.batch`: a whole batch of documents in a handful of set-based
    statements; cluster merges, relabelling and deletes.
  - :mod:`~dedup_store.db.write.single`: one new document written in one statement.
  - :mod:`~dedup_store.db.write.locks`: the advisory locks the writers of a store take.
  - :mod:`~dedup_store.db.write.verdicts`: a reviewer's verdicts on pairs and the clusters they
    shape.
  - :mod:`~dedup_store.db.write.frequencies`: document frequencies of weighted SimHash features,
    counted with every write and delete.

- :mod:`~dedup_store.db.bulk`: loads that are large against the store.

  - :mod:`~dedup_store.db.bulk.load`: a bulk load, written without per-key index maintenance.
  - :mod:`~dedup_store.db.bulk.checkpoint`: checkpoints while a bulk load builds its indexes.

- :mod:`~dedup_store.db.reports`: reads for people.

  - :mod:`~dedup_store.db.reports.reads`: reads for the caller (documents, clusters, pairs,
    export, counts).
  - :mod:`~dedup_store.db.reports.review_report`: the reads of the review report.
  - :mod:`~dedup_store.db.reports.explain`: what the store holds of a pair, for an explanation of
    its match.

:mod:`~dedup_store.db.repository`: the store's tables as the service reads and writes them (every
database call of :class:`~dedup_store.service.DedupStore`, each in the transaction it needs).

Outside the rooms, :mod:`dedup_store.db.migrate` only keeps the documented path of ``upgrade``
(``docs/embedding.md``); the migrations live in :mod:`~dedup_store.db.schema.migrate`.
"""
