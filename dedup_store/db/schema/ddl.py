"""The structure of a store: its tables as SQLAlchemy metadata and its parameters row.

The migrations in ``migrations/versions`` are self-contained DDL and do not import this module; the
test suite checks that a database migrated to head matches :func:`build_metadata` exactly. The band
and block keys of a document are not in its ``documents`` row (they are functions of its signature
and SimHash); they are rows of ``slot_keys`` (the settled tier) or ``recent_slot_keys`` (documents
added since the last bulk load or settle, ``key_tiers.settled_through``), one per key, each table
with one b-tree on ``(key, doc_id)`` (:mod:`dedup_store.db.rows.key_rows`), so every key of a
query is found by one probe of each.
"""

from __future__ import annotations

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
    ForeignKeyConstraint,
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


def _document_pair() -> list[Column[Any]]:
    """Columns ``a`` and ``b``, the primary key of a table of pairs of documents (a row goes
    with either document)."""
    return [
        Column(name, BigInteger, ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
        for name in ("a", "b")
    ]


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
        *_document_pair(),
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
    """The tables of keys: band and block keys (settled and recent) and the bound between them,
    excerpt keys, hot keys and their secondary keys."""
    _single_row(
        "key_tiers",
        md,
        Column("settled_through", BigInteger, nullable=False),
        _created_at("settled_at"),
    )
    for name in ("slot_keys", "recent_slot_keys"):
        Table(
            name,
            md,
            Column("key", BigInteger, nullable=False),
            Column("doc_id", BigInteger, nullable=False),
            Column("kind", SmallInteger, nullable=False),
            Column("slot", SmallInteger, nullable=False),
            Index(f"{name}_lookup", "key", "doc_id"),
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
        "cut_edges",
        md,
        *_document_pair(),
        Column("verdict_a", Text, nullable=False),
        Column("verdict_b", Text, nullable=False),
        ForeignKeyConstraint(
            ["verdict_a", "verdict_b"], ["verdicts.a", "verdicts.b"], ondelete="CASCADE"
        ),
        Index("cut_edges_b", "b"),
        Index("cut_edges_verdict", "verdict_a", "verdict_b"),
    )
    Table(
        "canonical_choices",
        md,
        Column("external_id", Text, primary_key=True),
        Column("reviewer", Text),
        _created_at("chosen_at"),
    )


def key_slots(params: FingerprintParams) -> list[tuple[int, str, int]]:
    """``(kind, its name, slot)`` of every band and block key slot of ``params``."""
    counts = {BAND: params.band_key_count, BLOCK: params.block_key_count}
    return [
        (kind, KEY_COLUMNS[kind], slot)
        for kind, count in counts.items()
        for slot in range(1, count + 1)
    ]


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


#: The tables a bulk load and settling rebuild the indexes (or files) of.
REBUILT_TABLES = ("documents", "edges", "sample_keys", "slot_keys", "recent_slot_keys")


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
