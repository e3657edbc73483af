"""The database layer, by concern.

- :mod:`~dedup_store.db.engine`, :mod:`~dedup_store.db.native`: connections and transactions
  (our own engine, or the caller's), and the psycopg fast path of single-document calls.
- :mod:`~dedup_store.db.names`: schema names, validated once and quoted everywhere.
- :mod:`~dedup_store.db.ddl`, :mod:`~dedup_store.db.migrate`: the tables, the per-slot key
  indexes, the parameters row, and the Alembic migrations.
- :mod:`~dedup_store.db.encoding`: how fingerprints are stored (key kinds, 32-bit forms,
  array literals).
- :mod:`~dedup_store.db.lookup`: candidate pairs from the stored keys.
- :mod:`~dedup_store.db.scoring`: verification of candidates into matches and edges.
- :mod:`~dedup_store.db.write`, :mod:`~dedup_store.db.bulk_copy`, :mod:`~dedup_store.db.single`:
  writing batches (COPY), single documents, deletes and cluster maintenance.
- :mod:`~dedup_store.db.reports`: reads for the caller.
- :mod:`~dedup_store.db.embedded`: the embedded PostgreSQL server.
"""
