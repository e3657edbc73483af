"""The database layer, by concern.

Rooms:

- :mod:`~dedup_store.db.server`: the PostgreSQL server itself.

  - :mod:`~dedup_store.db.server.engine`: connections and transactions (our own engine, or the
    caller's).
  - :mod:`~dedup_store.db.server.embedded`: the embedded PostgreSQL server.
  - :mod:`~dedup_store.db.server.tuning`: server settings sized from a machine's memory and cores.
  - :mod:`~dedup_store.db.server.backup`: dumps, restores and ``psql`` with matching client tools.

- :mod:`~dedup_store.db.schema`: the structure of a store.

  - :mod:`~dedup_store.db.schema.ddl`: the tables, the per-slot key indexes and the parameters
    row.
  - :mod:`~dedup_store.db.schema.migrate`: the Alembic migrations, configured in code
    (:mod:`dedup_store.db.migrate` keeps the documented path of ``upgrade``).
  - :mod:`~dedup_store.db.schema.names`: schema names, validated once and quoted everywhere.
  - :mod:`~dedup_store.db.schema.encoding`: how fingerprints are stored (key kinds, 32-bit forms,
    array literals).

- :mod:`~dedup_store.db.candidates`: candidate pairs from the stored keys.

  - :mod:`~dedup_store.db.candidates.lookup`: the lookup of band, block and sample keys, and the
    pairs inside a batch.
  - :mod:`~dedup_store.db.candidates.hot`: the main candidate search (``find_candidates``) and hot
    keys, their buckets split by secondary keys.
  - :mod:`~dedup_store.db.candidates.side`: lookups of the settled tier on connections of their
    own.
  - :mod:`~dedup_store.db.candidates.settled_filter`: the filter of the settled tier's keys.
  - :mod:`~dedup_store.db.candidates.lane`: a connection whose statements run in order on a
    thread of its own.
  - :mod:`~dedup_store.db.candidates.stored`: what a write finds of the documents stored before
    it (the ``StoredKeys`` protocol).
  - :mod:`~dedup_store.db.candidates.tier_rows`: the rows of the key tiers' tables.

Modules not yet in a room:

- :mod:`~dedup_store.db.native`: the psycopg fast path of single-document calls (positional
  ``$n`` parameters).
- :mod:`~dedup_store.db.settings`: the store's settings that are not fingerprint parameters, and
  the canonical documents a person declared.
- :mod:`~dedup_store.db.scoring`: verification of candidates into matches and edges.
- :mod:`~dedup_store.db.exact_groups`: matches through exact groups, read from the stored edges.
- :mod:`~dedup_store.db.frequencies`: document frequencies of weighted SimHash features.
- :mod:`~dedup_store.db.write`: a whole batch of documents in a handful of set-based statements.
- :mod:`~dedup_store.db.single`: one new document written in one statement.
- :mod:`~dedup_store.db.bulk`, :mod:`~dedup_store.db.bulk_copy`,
  :mod:`~dedup_store.db.checkpoint`: bulk loads (without per-key index maintenance, binary
  COPY, checkpoints while the indexes build).
- :mod:`~dedup_store.db.locks`: the advisory locks the writers of a store take.
- :mod:`~dedup_store.db.verdicts`: a reviewer's verdicts on pairs and the clusters they shape.
- :mod:`~dedup_store.db.reports`: reads for the caller (documents, clusters, pairs, export,
  counts).
- :mod:`~dedup_store.db.report_rows`: the reads of the review report.
- :mod:`~dedup_store.db.explain`: what the store holds of a pair, for an explanation of its match.
"""
