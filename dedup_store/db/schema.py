"""The tables of a store, as SQLAlchemy metadata.

The migrations in ``migrations/versions`` are self-contained DDL and do not import this module;
the test suite checks that a database migrated to head matches :func:`build_metadata` exactly.
All tables live in the store's own PostgreSQL schema (``dedup`` by default). The per-slot hash
indexes on ``documents.band_keys`` and ``documents.block_keys`` depend on the fingerprint
parameters; the store creates them when it opens (``repository.ensure_key_indexes``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
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

DEFAULT_SCHEMA = "dedup"
VERSION_TABLE = "alembic_version"
VIEWS = ("duplicate_pairs", "cluster_members", "cluster_sizes", "duplicates_per_day")
METHODS = ("exact", "minhash", "simhash", "containment")


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
        Index("documents_exact_hash", "exact_hash", postgresql_using="hash"),
        Index("documents_cluster_id", "cluster_id"),
        Index("documents_exact_of", "exact_of", postgresql_where=text("exact_of IS NOT NULL")),
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
        "edges",
        md,
        Column("a", BigInteger, ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True),
        Column("b", BigInteger, ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True),
        Column("method", Text, nullable=False),
        Column("jaccard", Float, nullable=False),
        Column("containment", Float, nullable=False),
        Column("hamming", SmallInteger, nullable=False),
        Column("found_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
        CheckConstraint("a < b", name="edges_ordered"),
        CheckConstraint(
            "method IN ('exact', 'minhash', 'simhash', 'containment')", name="edges_method"
        ),
        Index("edges_b", "b"),
    )
    return md
