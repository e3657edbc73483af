"""The structure of a store: its tables as SQLAlchemy metadata, the per-slot key indexes its
parameters need, and its parameters row.

The migrations in ``migrations/versions`` are self-contained DDL and do not import this module;
the test suite checks that a database migrated to head matches :func:`build_metadata` exactly.
The per-slot indexes on ``documents.band_keys`` and ``documents.block_keys`` depend on the
fingerprint parameters; the store creates them when it opens (:func:`create_key_indexes`). Each
slot has two, one per tier: the *settled* index over the documents with ids up to
``key_tiers.settled_through``, the *recent* one over the documents added since. Incremental writes
only insert into the recent indexes, which stay small however large the store; a bulk load (or
``dedup-store db settle``) builds the settled ones over every document again and leaves the
recent ones empty. A lookup probes both tiers (:func:`dedup_store.db.lookup.slot_lookup`).
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import (
    BigInteger,
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

from dedup_store.config import DEFAULT_SCHEMA as DEFAULT_SCHEMA
from dedup_store.core.params import FingerprintParams
from dedup_store.db.encoding import BAND, BLOCK, KEY_COLUMNS
from dedup_store.db.names import qualified, quote
from dedup_store.results import Method

VERSION_TABLE = "alembic_version"
VIEWS = ("duplicate_pairs", "cluster_members", "cluster_sizes", "duplicates_per_day")


def build_metadata(schema: str = DEFAULT_SCHEMA) -> MetaData:
    """The tables of a store living in PostgreSQL schema ``schema``."""
    md = MetaData(schema=schema)
    Table(
        "params",
        md,
        Column("id", SmallInteger, primary_key=True, autoincrement=False),
        Column("params", JSONB, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        CheckConstraint("id = 1", name="params_single_row"),
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
        Column("band_keys", ARRAY(BigInteger), nullable=False),
        Column("block_keys", ARRAY(BigInteger), nullable=False),
        Column("shingle_count", Integer, nullable=False),
        Column("token_count", Integer, nullable=False),
        Column("length", Integer, nullable=False),
        Column("language", Text, nullable=False),
        Column("meta", JSONB),
        Column("body", Text),
        Column("cluster_id", BigInteger, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("exact_of", BigInteger),
        Column("meta_signature", ARRAY(Integer)),
        Index("documents_exact_hash", "exact_hash", postgresql_using="hash"),
        Index("documents_cluster_id", "cluster_id"),
        Index("documents_exact_of", "exact_of", postgresql_where=text("exact_of IS NOT NULL")),
    )
    Table(
        "key_tiers",
        md,
        Column("id", SmallInteger, primary_key=True, autoincrement=False),
        Column("settled_through", BigInteger, nullable=False),
        Column("settled_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        CheckConstraint("id = 1", name="key_tiers_single_row"),
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
    Table(
        "feature_df",
        md,
        Column("feature", BigInteger, primary_key=True, autoincrement=False),
        Column("df", BigInteger, nullable=False),
    )
    Table(
        "feature_documents",
        md,
        Column("id", SmallInteger, primary_key=True, autoincrement=False),
        Column("documents", BigInteger, nullable=False),
        CheckConstraint("id = 1", name="feature_documents_single_row"),
    )
    Table(
        "document_features",
        md,
        Column("doc_id", BigInteger, primary_key=True, autoincrement=False),
        Column("features", ARRAY(BigInteger), nullable=False),
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
        Column("found_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        Column("meta_score", Float),
        CheckConstraint("a < b", name="edges_ordered"),
        CheckConstraint(
            f"method IN ({', '.join(repr(m.value) for m in Method)})", name="edges_method"
        ),
        Index("edges_b", "b"),
    )
    return md


_INDEX_PREFIX = {BAND: "documents_band_", BLOCK: "documents_block_"}


#: The tiers of a slot's key index: documents up to ``settled_through``, and those after.
SETTLED, RECENT = "settled", "recent"


@dataclasses.dataclass(frozen=True)
class KeyIndex:
    """One per-slot key index: its name, the array column and slot it indexes, and its tier."""

    name: str
    column: str
    slot: int
    tier: str

    def key(self, alias: str = "") -> str:
        """The indexed expression, as SQL (``alias``: the table's, with its dot)."""
        return key_expression(alias, self.column, self.slot, self.tier)

    def predicate(self, settled_through: int) -> str:
        """The index's condition: the documents of its tier (without exact copies), as SQL."""
        bound = tier_condition("id", self.tier, settled_through)
        return f"exact_of IS NULL AND {bound}" if self.tier == SETTLED else bound


def key_expression(alias: str, column: str, slot: int, tier: str) -> str:
    """SQL: the key of ``slot`` in the array ``column`` as the index of ``tier`` holds it.

    The settled index leaves exact copies out by its condition. The recent one holds them
    with a ``NULL`` key instead, which no lookup matches: its condition then reads only the
    id, the first column, so building it (empty, at the end of a bulk load) reads no more
    of each row than that.
    """
    key = f"{alias}{quote(column)}[{int(slot)}]"
    return key if tier == SETTLED else f"(CASE WHEN {alias}exact_of IS NULL THEN {key} END)"


def tier_condition(column: str, tier: str, settled_through: int) -> str:
    """SQL: the ids in ``column`` of the documents of ``tier`` (``column`` is SQL too).

    Spelled ``(id + 0)``, in the indexes' predicates and in the lookups alike: the lookup of a
    tier then matches that tier's partial index and nothing else, never the primary key's
    range of ``id`` (whose estimate, from statistics taken when the tier was empty, would have
    the planner walk the whole recent tier for every key).
    """
    return f"({column} + 0) {'<=' if tier == SETTLED else '>'} {int(settled_through)}"


def key_indexes(params: FingerprintParams) -> list[KeyIndex]:
    """Every per-slot key index a store with ``params`` needs, both tiers of each slot."""
    counts = {BAND: params.band_key_count, BLOCK: params.block_key_count}
    return [
        KeyIndex(
            f"{_INDEX_PREFIX[kind]}{slot}{'_recent' if tier == RECENT else ''}",
            KEY_COLUMNS[kind],
            slot,
            tier,
        )
        for kind, count in counts.items()
        for slot in range(1, count + 1)
        for tier in (SETTLED, RECENT)
    ]


def missing_key_indexes(conn: Connection, schema: str, params: FingerprintParams) -> list[KeyIndex]:
    """The per-slot key indexes a store with ``params`` needs and does not have."""
    names = text(
        "SELECT indexname FROM pg_indexes WHERE schemaname = :s AND tablename = 'documents'"
    )
    existing = set(conn.execute(names, {"s": schema}).scalars())
    return [index for index in key_indexes(params) if index.name not in existing]


def create_key_indexes(
    conn: Connection, schema: str, indexes: list[KeyIndex], settled_through: int
) -> None:
    """Create the per-slot key indexes ``indexes`` (from :func:`missing_key_indexes`), bounded
    by ``settled_through`` (:func:`settled_through`)."""
    for index in indexes:
        # the settled tier takes no new documents (their ids are past its bound): full pages
        storage = " WITH (fillfactor = 100)" if index.tier == SETTLED else ""
        conn.execute(
            text(
                f"CREATE INDEX {quote(index.name)} ON {qualified(schema, 'documents')} "
                f"USING btree (({index.key()})){storage} WHERE {index.predicate(settled_through)}"
            )
        )
        # the planner does not use the statistics of a partial index: ANALYZE skips them
        conn.execute(
            text(f"ALTER INDEX {qualified(schema, index.name)} ALTER COLUMN 1 SET STATISTICS 0")
        )


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
