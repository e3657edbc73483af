"""Staging tables: the executors write a load where readers cannot see it.

The executors COPY a load's documents, their band and block keys, excerpt keys, secondary keys and
edges into unlogged tables of the store's schema, each partition over its own connection. The driver
then moves them into the store in its one transaction (:func:`publish`): it drops the lookup
indexes, inserts the staged rows set-wise, builds the indexes in bulk and drops the staging tables,
so the load becomes visible all at once, or (killed at any point) not at all. A killed load's
staging tables are dropped by the next load of the store (:func:`clean`), which holds the writers'
lock.
"""

from __future__ import annotations

import dataclasses
import uuid

from sqlalchemy import Connection, text

from dedup_store.core.params import FingerprintParams
from dedup_store.db.bulk import load
from dedup_store.db.rows import key_rows
from dedup_store.db.rows.batch_rows import DOCUMENT_COLUMNS
from dedup_store.db.schema import ddl
from dedup_store.db.schema.names import qualified, quote

PREFIX = "spark_load_"
#: The store's tables a load writes, with the columns the executors fill.
STAGED: dict[str, tuple[str, ...]] = {
    "documents": DOCUMENT_COLUMNS,
    "sample_keys": ("key", "doc_id"),
    "secondary_keys": ("kind", "slot", "key", "doc_id"),
    "edges": ("a", "b", "method", "jaccard", "containment", "hamming"),
    key_rows.SETTLED: key_rows.COLUMNS,
}


@dataclasses.dataclass(frozen=True)
class Staging:
    """The staging tables of one load: ``tables[store table]`` is its staging table's name."""

    schema: str
    tables: dict[str, str]

    @classmethod
    def create(cls, conn: Connection, schema: str) -> Staging:
        """Create empty staging tables shaped like the store's (commit before the executors
        write into them)."""
        token = uuid.uuid4().hex[:12]
        tables = {table: f"{PREFIX}{token}_{table}" for table in STAGED}
        for table, staged in tables.items():
            conn.execute(
                text(
                    f"CREATE UNLOGGED TABLE {qualified(schema, staged)} "
                    f"(LIKE {qualified(schema, table)} INCLUDING DEFAULTS)"
                )
            )
        return cls(schema, tables)

    def drop(self, conn: Connection) -> None:
        """Drop the staging tables."""
        for staged in self.tables.values():
            conn.execute(text(f"DROP TABLE IF EXISTS {qualified(self.schema, staged)}"))


def clean(conn: Connection, schema: str) -> int:
    """Drop the staging tables killed loads left in ``schema``; returns how many."""
    names = conn.execute(
        text(
            "SELECT tablename FROM pg_tables WHERE schemaname = :s "
            "AND starts_with(tablename, :prefix)"
        ),
        {"s": schema, "prefix": PREFIX},
    ).scalars()
    dropped = 0
    for name in list(names):
        conn.execute(text(f"DROP TABLE IF EXISTS {qualified(schema, name)}"))
        dropped += 1
    return dropped


def publish(conn: Connection, staging: Staging, params: FingerprintParams) -> dict[str, float]:
    """Move the staged rows into the store in the transaction of ``conn`` (which holds the
    store's lock exclusively): drop the lookup indexes and the foreign keys of ``edges``,
    insert set-wise, build the indexes and add the keys back, drop the staging tables. Returns
    the seconds of the index build and of ``ANALYZE``."""
    schema = staging.schema
    load.drop_lookup_indexes(conn, schema)
    ddl.drop_edge_links(conn, schema)
    for table, columns in STAGED.items():
        names = ", ".join(quote(c) for c in columns)
        conn.execute(
            text(
                f"INSERT INTO {qualified(schema, table)} ({names}) "
                f"SELECT {names} FROM {qualified(schema, staging.tables[table])}"
            )
        )
    staging.drop(conn)
    return load.finish(conn, schema, params, load.BUILD_SETTINGS)
