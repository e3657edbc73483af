"""The structure of a store: its tables as SQLAlchemy metadata, the per-slot key indexes its
parameters need, and its parameters row.

The migrations in ``migrations/versions`` are self-contained DDL and do not import this module; the
test suite checks that a database migrated to head matches :func:`build_metadata` exactly. The band
and block keys of a document are not in its ``documents`` row (they are functions of its signature
and SimHash); they live in two tables of their own, one per *tier*, whose columns depend on the
fingerprint parameters, so the store creates them when it opens
(:func:`dedup_store.db.candidates.tier_rows.create_key_tables`, :func:`create_key_indexes`). Each
holds one row per first document (exact copies have none): its id and a plain ``bigint`` column per
key slot, with an index per column. ``settled_keys`` holds the documents with ids up to
``key_tiers.settled_through``, ``recent_keys`` those added since. Incremental writes only insert
into ``recent_keys``, whose indexes stay small however large the store; a bulk load (or
``dedup-store db settle``) moves every document into ``settled_keys``, builds its indexes again and
empties ``recent_keys``. Building an index over the narrow rows reads a fifth of the bytes a scan of
``documents`` would. A lookup probes both tables
(:func:`dedup_store.db.candidates.lookup.slot_lookup`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.schema import AddConstraint

from dedup_store.config import DEFAULT_SCHEMA as DEFAULT_SCHEMA
from dedup_store.core.params import FingerprintParams
from dedup_store.db.schema.encoding import BAND, BLOCK, KEY_COLUMNS
from dedup_store.db.schema.names import qualified, quote
from dedup_store.results import Method

VERSION_TABLE = "alembic_version"
VIEWS = (
    "duplicate_pairs",
    "cluster_members",
    "cluster_sizes",
    "duplicates_per_day",
    "cluster_canonical",
    "duplicate_pairs_expanded",
)
#: What a reviewer can say of a pair (the ``verdict`` column of ``verdicts``).
VERDICTS = ("duplicate", "not_duplicate")


def build_metadata(schema: str = DEFAULT_SCHEMA) -> MetaData:
    """The tables of a store living in PostgreSQL schema ``schema``."""
    md = MetaData(schema=schema)
    _document_tables(md)
    _key_tables(md)
    _feature_tables(md)
    _review_tables(md)
    return md


def _created_at(name: str) -> Column[Any]:
    """A ``timestamptz`` column that defaults to the time of the insert."""
    return Column(name, DateTime(timezone=True), nullable=False, server_default=text("now()"))


def _single_row(name: str, md: MetaData, *columns: Column[Any]) -> Table:
    """A table of one row (``id`` 1)."""
    return Table(
        name,
        md,
        Column("id", SmallInteger, primary_key=True, autoincrement=False),
        *columns,
        CheckConstraint("id = 1", name=f"{name}_single_row"),
    )


def _document_tables(md: MetaData) -> None:
    """The parameters, the settings, the documents and the edges between them."""
    _single_row("params", md, Column("params", JSONB, nullable=False), _created_at("created_at"))
    _single_row(
        "settings",
        md,
        Column("keep_text", Boolean, nullable=False, server_default=text("false")),
        Column("canonical_rule", Text, nullable=False, server_default=text("'oldest'")),
    )
    Table(
        "documents",
        md,
        Column("id", BigInteger, primary_key=True, autoincrement=False),
        Column("external_id", Text, nullable=False, unique=True),
        Column("exact_hash", LargeBinary, nullable=False),
        Column("simhash", BigInteger, nullable=False),
        Column("signature", ARRAY(Integer), nullable=False),
        Column("shingles", ARRAY(Integer), nullable=False),
        Column("shingle_count", Integer, nullable=False),
        Column("token_count", Integer, nullable=False),
        Column("length", Integer, nullable=False),
        Column("language", Text, nullable=False),
        Column("meta", JSONB),
        Column("body", Text),
        Column("cluster_id", BigInteger, nullable=False),
        _created_at("created_at"),
        Column("exact_of", BigInteger),
        Column("meta_signature", ARRAY(Integer)),
        Index("documents_exact_hash", "exact_hash"),
        Index("documents_cluster_id", "cluster_id"),
        Index("documents_exact_of", "exact_of", postgresql_where=text("exact_of IS NOT NULL")),
    )
    Table(
        "edges",
        md,
        Column("a", BigInteger, ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True),
        Column("b", BigInteger, ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True),
        Column("method", Text, nullable=False),
        Column("jaccard", Float, nullable=False),
        Column("containment", Float, nullable=False),
        Column("hamming", SmallInteger, nullable=False),
        _created_at("found_at"),
        Column("meta_score", Float),
        CheckConstraint("a < b", name="edges_ordered"),
        CheckConstraint(
            f"method IN ({', '.join(repr(m.value) for m in Method)})", name="edges_method"
        ),
        Index("edges_b", "b"),
    )


def _key_tables(md: MetaData) -> None:
    """The tables of keys besides the tiers' (:func:`dedup_store.db.candidates.tier_rows`):
    the tiers' bound and filter, excerpt keys, hot keys and their secondary keys."""
    _single_row(
        "key_tiers",
        md,
        Column("settled_through", BigInteger, nullable=False),
        _created_at("settled_at"),
    )
    Table(
        "settled_filter",
        md,
        Column("part", Integer, primary_key=True, autoincrement=False),
        Column("settled_through", BigInteger, nullable=False),
        Column("build", BigInteger, nullable=False),
        Column("keys", BigInteger, nullable=False),
        Column("words", LargeBinary, nullable=False),
    )
    Table(
        "sample_keys",
        md,
        Column("key", Integer, nullable=False),
        Column("doc_id", BigInteger, nullable=False),
        Index("sample_keys_lookup", "key", postgresql_include=["doc_id"]),
    )
    Table(
        "hot_keys",
        md,
        Column("kind", SmallInteger, primary_key=True, autoincrement=False),
        Column("slot", SmallInteger, primary_key=True, autoincrement=False),
        Column("key", BigInteger, primary_key=True, autoincrement=False),
    )
    Table(
        "secondary_keys",
        md,
        Column("kind", SmallInteger, nullable=False),
        Column("slot", SmallInteger, nullable=False),
        Column("key", BigInteger, nullable=False),
        Column("doc_id", BigInteger, nullable=False),
        Index("secondary_keys_lookup", "kind", "slot", "key", "doc_id"),
        Index("secondary_keys_doc_id", "doc_id"),
    )


def _feature_tables(md: MetaData) -> None:
    """The document frequencies of weighted SimHash features."""
    Table(
        "feature_df",
        md,
        Column("feature", BigInteger, primary_key=True, autoincrement=False),
        Column("df", BigInteger, nullable=False),
    )
    _single_row("feature_documents", md, Column("documents", BigInteger, nullable=False))
    Table(
        "document_features",
        md,
        Column("doc_id", BigInteger, primary_key=True, autoincrement=False),
        Column("features", ARRAY(BigInteger), nullable=False),
    )


def _review_tables(md: MetaData) -> None:
    """A reviewer's verdicts on pairs and chosen canonical documents."""
    Table(
        "verdicts",
        md,
        Column("a", Text, primary_key=True),
        Column("b", Text, primary_key=True),
        Column("verdict", Text, nullable=False),
        Column("note", Text),
        Column("reviewer", Text),
        _created_at("decided_at"),
        CheckConstraint("a < b", name="verdicts_ordered"),
        CheckConstraint(
            f"verdict IN ({', '.join(repr(v) for v in VERDICTS)})", name="verdicts_verdict"
        ),
        Index("verdicts_b", "b"),
    )
    Table(
        "canonical_choices",
        md,
        Column("external_id", Text, primary_key=True),
        Column("reviewer", Text),
        _created_at("chosen_at"),
    )


#: The tiers of the key tables: documents up to ``settled_through``, and those after.
SETTLED, RECENT = "settled", "recent"

#: The table of each tier: one row per first document (exact copies have none), its id and one
#: ``bigint`` column per key slot (:func:`key_column`).
TIER_TABLES = {SETTLED: "settled_keys", RECENT: "recent_keys"}

#: Storage parameters of the recent tier's table. The store's connections plan a statement once
#: (``plan_cache_mode = force_generic_plan``), and a plan made while the planner's statistics
#: say the table holds a few rows scans it whole for each of a batch's thousands of keys, a cost
#: that grows with every row inserted until the table is analyzed again. Emptied by a settle or
#: a bulk load (``TRUNCATE``, never analyzed then), the table has no statistics, which the
#: planner takes for ten pages and probes through the indexes; autovacuum analyzes it only once
#: it holds thousands of rows, where the indexes are the cheaper plan too.
RECENT_STORAGE = "autovacuum_analyze_threshold = 10000"


@dataclasses.dataclass(frozen=True)
class KeyIndex:
    """One per-slot key index: its name, the kind's column name (:data:`KEY_COLUMNS`) and slot
    whose keys it holds, and its tier."""

    name: str
    column: str
    slot: int
    tier: str

    @property
    def table(self) -> str:
        """The tier's table, which the index is on."""
        return TIER_TABLES[self.tier]

    def definition(self, schema: str) -> str:
        """SQL: ``CREATE INDEX`` of this index.

        With the id, a lookup reads the index alone once the table's pages are all-visible. The
        settled tier takes no rows but at a settle, which builds its indexes again: full pages.
        """
        storage = " WITH (fillfactor = 100)" if self.tier == SETTLED else ""
        return (
            f"CREATE INDEX {quote(self.name)} ON {qualified(schema, self.table)} "
            f"({quote(key_column(self.column, self.slot))}) INCLUDE (id){storage}"
        )


def key_column(column: str, slot: int) -> str:
    """The tier tables' column of ``slot`` of the kind named ``column`` (``band_3`` for slot 3
    of the ``band_keys``)."""
    return f"{column.removesuffix('_keys')}_{int(slot)}"


def id_index(tier: str) -> str:
    """The name of the unique index on the id of ``tier``'s table."""
    return f"{TIER_TABLES[tier]}_id"


def key_indexes(
    params: FingerprintParams, tiers: tuple[str, ...] = (SETTLED, RECENT)
) -> list[KeyIndex]:
    """Every per-slot key index a store with ``params`` needs in ``tiers``."""
    return [
        KeyIndex(f"{TIER_TABLES[tier]}_{key_column(column, slot)}", column, slot, tier)
        for tier in tiers
        for _kind, column, slot in key_slots(params)
    ]


def key_slots(params: FingerprintParams) -> list[tuple[int, str, int]]:
    """``(kind, its column name, slot)`` of every band and block key slot of ``params``."""
    counts = {BAND: params.band_key_count, BLOCK: params.block_key_count}
    return [
        (kind, KEY_COLUMNS[kind], slot)
        for kind, count in counts.items()
        for slot in range(1, count + 1)
    ]


def missing_key_indexes(conn: Connection, schema: str, params: FingerprintParams) -> list[KeyIndex]:
    """The per-slot key indexes a store with ``params`` needs and does not have (all of them
    while it lacks a tier table)."""
    names = text(
        "SELECT indexname FROM pg_indexes WHERE schemaname = :s AND tablename = ANY(:tables)"
    )
    tables = list(TIER_TABLES.values())
    existing = set(conn.execute(names, {"s": schema, "tables": tables}).scalars())
    if any(id_index(tier) not in existing for tier in TIER_TABLES):
        return key_indexes(params)
    return [index for index in key_indexes(params) if index.name not in existing]


def create_key_indexes(conn: Connection, schema: str, indexes: list[KeyIndex]) -> None:
    """Create the per-slot key indexes ``indexes`` (from :func:`missing_key_indexes`)."""
    for index in indexes:
        conn.execute(text(index.definition(schema)))


def edge_links(conn: Connection, schema: str) -> dict[str, str]:
    """``{column: constraint name}`` of the foreign keys of ``edges`` to ``documents``."""
    rows = conn.execute(
        text(
            "SELECT a.attname, c.conname FROM pg_constraint c "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1] "
            "WHERE c.conrelid = CAST(:edges AS regclass) AND c.contype = 'f'"
        ),
        {"edges": qualified(schema, "edges")},
    )
    return {str(column): str(name) for column, name in rows}


def drop_edge_links(conn: Connection, schema: str) -> None:
    """Drop the foreign keys of ``edges`` for the rest of the transaction, for a load that
    holds the store's tables (:func:`add_edge_links` adds them back).

    Nothing deletes a document while such a load runs, so the check of each edge as it is
    written (two primary-key lookups that also lock the documents' rows: 25 µs an edge, and
    dirty pages of ``documents`` the load has just written) buys nothing that the single check
    of every edge at the end does not.
    """
    edges = qualified(schema, "edges")
    for name in edge_links(conn, schema).values():
        conn.execute(text(f"ALTER TABLE {edges} DROP CONSTRAINT {quote(name)}"))


def add_edge_links(conn: Connection, schema: str) -> None:
    """Add the foreign keys of ``edges`` that the store lacks (:func:`drop_edge_links`), as
    the models define them; PostgreSQL checks every stored edge against ``documents`` at once."""
    present = edge_links(conn, schema)
    edges = build_metadata(schema).tables[f"{schema}.edges"]
    for constraint in sorted(edges.foreign_key_constraints, key=lambda c: c.column_keys[0]):
        if constraint.column_keys[0] not in present:
            conn.execute(AddConstraint(constraint))


def create_id_index(conn: Connection, schema: str, tier: str) -> None:
    """Create the unique index on the id of ``tier``'s table."""
    conn.execute(
        text(
            f"CREATE UNIQUE INDEX {quote(id_index(tier))} "
            f"ON {qualified(schema, TIER_TABLES[tier])} (id) WITH (fillfactor = 100)"
        )
    )


def create_settled_trigger(conn: Connection, schema: str) -> None:
    """Have every statement that inserts or updates rows of ``settled_keys`` delete the filter
    of the settled tier's keys (``settled_filter``, which migration 0011 creates with the
    trigger's function)."""
    s = qualified(schema)
    conn.execute(
        text(
            f"CREATE TRIGGER settled_keys_changed AFTER INSERT OR UPDATE ON {s}.settled_keys "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.settled_keys_changed()"
        )
    )


#: The tables a bulk load and settling rebuild the indexes (or files) of.
REBUILT_TABLES = ("documents", "edges", "sample_keys", "settled_keys", "recent_keys")


def other_owner(conn: Connection, schema: str) -> str | None:
    """The role owning the store's :data:`REBUILT_TABLES` when the current user may not act as
    their owner (it is neither that role, a member of it, nor a superuser), else ``None``."""
    names = [qualified(schema, table) for table in REBUILT_TABLES]
    row = conn.execute(
        text(
            "SELECT pg_get_userbyid(c.relowner) FROM unnest(CAST(:names AS text[])) AS n(name) "
            "JOIN pg_class c ON c.oid = to_regclass(n.name) "
            "WHERE NOT pg_has_role(current_user, c.relowner, 'USAGE') LIMIT 1"
        ),
        {"names": names},
    ).first()
    return None if row is None else str(row[0])


def settled_through(conn: Connection, schema: str) -> int:
    """The largest id of the settled tier of the key indexes."""
    return int(
        conn.execute(
            text(f"SELECT settled_through FROM {qualified(schema, 'key_tiers')} WHERE id = 1")
        ).scalar_one()
    )


def set_settled_through(conn: Connection, schema: str, last_id: int) -> None:
    """Record ``last_id`` as the largest id of the settled tier (the key indexes are built
    for it by the caller, in the same transaction)."""
    conn.execute(
        text(
            f"UPDATE {qualified(schema, 'key_tiers')} "
            "SET settled_through = :last, settled_at = now() WHERE id = 1"
        ),
        {"last": int(last_id)},
    )


def load_params(conn: Connection, schema: str) -> FingerprintParams | None:
    """The params the store was created with, or ``None`` before they are saved."""
    row = conn.execute(text(f"SELECT params FROM {qualified(schema)}.params WHERE id = 1")).first()
    return None if row is None else FingerprintParams.from_stored(row[0])


def save_params(conn: Connection, schema: str, params: FingerprintParams) -> None:
    """Record the store's params (once)."""
    conn.execute(
        text(f"INSERT INTO {qualified(schema)}.params (id, params) VALUES (1, CAST(:p AS jsonb))"),
        {"p": params.to_json()},
    )
