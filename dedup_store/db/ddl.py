"""The structure of a store: its tables as SQLAlchemy metadata, the per-slot key indexes its
parameters need, and its parameters row.

The migrations in ``migrations/versions`` are self-contained DDL and do not import this module;
the test suite checks that a database migrated to head matches :func:`build_metadata` exactly.
The per-slot indexes on ``documents.band_keys`` and ``documents.block_keys`` depend on the
fingerprint parameters; the store creates them when it opens (:func:`create_key_indexes`). Each
slot has two, one per tier. The *settled* tier is the table ``settled_keys``: a row of plain
``bigint`` columns, one per slot, for each first document with an id up to
``key_tiers.settled_through``, and an index per column. The *recent* tier is a partial index on
``documents`` per slot, over the documents added since. Incremental writes only insert into the
recent indexes, which stay small however large the store; a bulk load (or ``dedup-store db
settle``) moves every document into the settled tier, builds its indexes again and leaves the
recent ones empty. Building an index over the narrow ``settled_keys`` rows reads a fifth of the
bytes a scan of ``documents`` would. A lookup probes both tiers
(:func:`dedup_store.db.lookup.slot_lookup`). ``settled_keys`` has columns that depend on the
parameters: the store creates it when it opens (:func:`create_settled_keys`), as it does the
indexes.
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
        Index("documents_exact_hash", "exact_hash"),
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

#: The table of the settled tier: one row per settled first document, one column per key slot.
SETTLED_KEYS = "settled_keys"
#: The unique index on ``settled_keys.id`` (for deletes and promoted copies).
SETTLED_ID_INDEX = "settled_keys_id"


#: The tiers of a slot's key index: documents up to ``settled_through``, and those after.
SETTLED, RECENT = "settled", "recent"


@dataclasses.dataclass(frozen=True)
class KeyIndex:
    """One per-slot key index: its name, the array column and slot it indexes, and its tier."""

    name: str
    column: str
    slot: int
    tier: str

    @property
    def table(self) -> str:
        """The table the index is on: :data:`SETTLED_KEYS` or ``documents``."""
        return SETTLED_KEYS if self.tier == SETTLED else "documents"

    def key(self, alias: str = "") -> str:
        """The indexed expression, as SQL (``alias``: the table's, with its dot)."""
        return key_expression(alias, self.column, self.slot, self.tier)

    def definition(self, schema: str, settled_through: int) -> str:
        """SQL: ``CREATE INDEX`` of this index (``settled_through``: the recent tier's bound)."""
        table = qualified(schema, self.table)
        if self.tier == SETTLED:
            # the tier takes no rows but at a settle, which builds it again: full pages; with
            # the id, a lookup reads the index alone once the table's pages are all-visible
            return (
                f"CREATE INDEX {quote(self.name)} ON {table} ({self.key()}) INCLUDE (id) "
                "WITH (fillfactor = 100)"
            )
        bound = tier_condition("id", self.tier, settled_through)
        return f"CREATE INDEX {quote(self.name)} ON {table} (({self.key()})) WHERE {bound}"


def settled_column(column: str, slot: int) -> str:
    """The :data:`SETTLED_KEYS` column of ``slot`` of the ``documents`` array ``column``
    (``band_3`` for ``band_keys[3]``)."""
    return f"{column.removesuffix('_keys')}_{int(slot)}"


def key_expression(alias: str, column: str, slot: int, tier: str) -> str:
    """SQL: the key of ``slot`` of the array ``column`` as the index of ``tier`` holds it.

    The settled tier is a table of its own (:data:`SETTLED_KEYS`) with a column per slot,
    holding no exact copies. The recent tier indexes the ``documents`` rows: it holds exact
    copies with a ``NULL`` key instead, which no lookup matches; its condition then reads only
    the id, the first column, so building it (empty, at the end of a bulk load) reads no more
    of each row than that.
    """
    if tier == SETTLED:
        return f"{alias}{quote(settled_column(column, slot))}"
    key = f"{alias}{quote(column)}[{int(slot)}]"
    return f"(CASE WHEN {alias}exact_of IS NULL THEN {key} END)"


def tier_condition(column: str, tier: str, settled_through: int) -> str:
    """SQL: the ids in ``column`` of the documents of ``tier`` (``column`` is SQL too).

    Spelled ``(id + 0)``, in the recent indexes' predicates and in the lookups alike: the lookup
    of the recent tier then matches its partial index and nothing else, never the primary key's
    range of ``id`` (whose estimate, from statistics taken when the tier was empty, would have
    the planner walk the whole recent tier for every key).
    """
    return f"({column} + 0) {'<=' if tier == SETTLED else '>'} {int(settled_through)}"


def key_indexes(params: FingerprintParams) -> list[KeyIndex]:
    """Every per-slot key index a store with ``params`` needs, both tiers of each slot."""
    return [
        KeyIndex(
            (
                f"{SETTLED_KEYS}_{settled_column(column, slot)}"
                if tier == SETTLED
                else f"{_INDEX_PREFIX[kind]}{slot}_recent"
            ),
            column,
            slot,
            tier,
        )
        for kind, column, slot in key_slots(params)
        for tier in (SETTLED, RECENT)
    ]


def key_slots(params: FingerprintParams) -> list[tuple[int, str, int]]:
    """``(kind, documents column, slot)`` of every band and block key slot of ``params``."""
    counts = {BAND: params.band_key_count, BLOCK: params.block_key_count}
    return [
        (kind, KEY_COLUMNS[kind], slot)
        for kind, count in counts.items()
        for slot in range(1, count + 1)
    ]


def missing_key_indexes(conn: Connection, schema: str, params: FingerprintParams) -> list[KeyIndex]:
    """The per-slot key indexes a store with ``params`` needs and does not have (all of them
    while it has no :data:`SETTLED_KEYS` table)."""
    names = text(
        "SELECT indexname FROM pg_indexes WHERE schemaname = :s "
        "AND tablename IN ('documents', :settled)"
    )
    existing = set(conn.execute(names, {"s": schema, "settled": SETTLED_KEYS}).scalars())
    if SETTLED_ID_INDEX not in existing:
        return key_indexes(params)
    return [index for index in key_indexes(params) if index.name not in existing]


def create_key_indexes(
    conn: Connection, schema: str, indexes: list[KeyIndex], settled_through: int
) -> None:
    """Create the per-slot key indexes ``indexes`` (from :func:`missing_key_indexes`), the
    recent ones bounded by ``settled_through`` (:func:`settled_through`)."""
    for index in indexes:
        conn.execute(text(index.definition(schema, settled_through)))
        if index.tier == RECENT:
            # the planner does not use the statistics of a partial index: ANALYZE skips them
            conn.execute(
                text(f"ALTER INDEX {qualified(schema, index.name)} ALTER COLUMN 1 SET STATISTICS 0")
            )


def create_settled_keys(conn: Connection, schema: str, params: FingerprintParams) -> None:
    """Create the :data:`SETTLED_KEYS` table of ``params`` (empty) if the store has none.

    A store that had its settled tier as partial indexes on ``documents`` (at revisions 0007
    and 0008) loses them and gets the table, filled from ``documents``, with its id index.
    """
    s = qualified(schema)
    exists = conn.execute(
        text("SELECT to_regclass(:t) IS NOT NULL"), {"t": f"{s}.{quote(SETTLED_KEYS)}"}
    ).scalar_one()
    if exists:
        return
    for kind, _column, slot in key_slots(params):
        conn.execute(text(f"DROP INDEX IF EXISTS {s}.{quote(_INDEX_PREFIX[kind] + str(slot))}"))
    columns = ", ".join(
        f"{quote(settled_column(c, slot))} bigint NOT NULL" for _, c, slot in key_slots(params)
    )
    conn.execute(text(f"CREATE TABLE {s}.{quote(SETTLED_KEYS)} (id bigint NOT NULL, {columns})"))
    fill_settled_keys(conn, schema, params, 0, settled_through(conn, schema))
    create_settled_id_index(conn, schema)


def create_settled_id_index(conn: Connection, schema: str) -> None:
    """Create the unique index on ``settled_keys.id``."""
    conn.execute(
        text(
            f"CREATE UNIQUE INDEX {quote(SETTLED_ID_INDEX)} ON {qualified(schema, SETTLED_KEYS)} "
            "(id) WITH (fillfactor = 100)"
        )
    )


def fill_settled_keys(
    conn: Connection,
    schema: str,
    params: FingerprintParams,
    after: int,
    through: int,
    ids: list[int] | None = None,
) -> None:
    """Add to :data:`SETTLED_KEYS` the keys of the first documents (not exact copies) with
    ids in ``(after, through]`` (and, with ``ids``, among those)."""
    s = qualified(schema)
    names = ", ".join(quote(settled_column(c, slot)) for _, c, slot in key_slots(params))
    values = ", ".join(f"d.{quote(c)}[{slot}]" for _, c, slot in key_slots(params))
    only = " AND d.id = ANY(:ids)" if ids is not None else ""
    conn.execute(
        text(
            f"INSERT INTO {s}.{quote(SETTLED_KEYS)} (id, {names}) SELECT d.id, {values} "
            f"FROM {s}.documents d WHERE d.exact_of IS NULL AND d.id > :after "
            f"AND d.id <= :through{only}"
        ),
        {"after": int(after), "through": int(through), "ids": ids},
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
