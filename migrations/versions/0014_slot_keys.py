"""Band and block keys in narrow tables, one index each: ``slot_keys`` and ``recent_slot_keys``.

Until 0013 a first document's keys were a row of ``settled_keys`` or ``recent_keys`` (one
``bigint`` column per slot, one index per column and table: 44 at the default parameters), so a
lookup of one document probed 44 indexes. Each tier's keys are now rows ``(key, doc_id, kind,
slot)`` of a table with one b-tree on ``(key, doc_id)``: the key is the slot's key XORed with a
salt of its kind and slot (``dedup_store.db.schema.encoding.slot_salt``, repeated here), so equal
keys of different slots never meet, and every key of a query is one probe of each tier's index.
``slot_keys`` takes the rows of ``settled_keys``, ``recent_slot_keys`` (with the storage
parameters ``recent_keys`` had) those of ``recent_keys``; ``key_tiers`` keeps the bound.

The tier tables are dropped with ``settled_filter`` and its trigger. A store whose tier tables do
not exist (one upgraded from 0007 or before that was never opened since) gets its rows from its
stored signatures and SimHashes when it opens. Downgrading makes the tier tables again from the
new ones.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

BAND, BLOCK = 0, 1
_NAMES = {"band": BAND, "block": BLOCK}
_MASK64 = (1 << 64) - 1

CREATE = """
CREATE TABLE {s}.slot_keys (
    key bigint NOT NULL,
    doc_id bigint NOT NULL,
    kind smallint NOT NULL,
    slot smallint NOT NULL
);
CREATE TABLE {s}.recent_slot_keys (
    key bigint NOT NULL,
    doc_id bigint NOT NULL,
    kind smallint NOT NULL,
    slot smallint NOT NULL
) WITH (autovacuum_analyze_threshold = 10000);
"""

INDEX = """
CREATE INDEX slot_keys_lookup ON {s}.slot_keys (key, doc_id);
CREATE INDEX recent_slot_keys_lookup ON {s}.recent_slot_keys (key, doc_id);
"""

DROP_TIERS = """
DROP TRIGGER IF EXISTS settled_keys_changed ON {s}.settled_keys;
DROP FUNCTION {s}.settled_keys_changed();
DROP TABLE {s}.settled_filter;
DROP TABLE IF EXISTS {s}.settled_keys;
DROP TABLE IF EXISTS {s}.recent_keys;
"""

#: each tier table's rows go to the table of the same tier
TIERS = {"settled_keys": "slot_keys", "recent_keys": "recent_slot_keys"}

# the table and function of 0011, as that revision made them
RESTORE = """
CREATE TABLE {s}.settled_filter (
    part integer PRIMARY KEY,
    settled_through bigint NOT NULL,
    build bigint NOT NULL,
    keys bigint NOT NULL,
    words bytea NOT NULL
);
ALTER TABLE {s}.settled_filter ALTER COLUMN words SET STORAGE EXTERNAL;
CREATE FUNCTION {s}.settled_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DELETE FROM %I.settled_filter', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
"""


def slot_salt(kind: int, slot: int) -> int:
    """The salt of a slot's keys: the splitmix64 finalizer of ``(kind + 1) << 16 | slot``."""
    z = ((((kind + 1) << 16) | slot) + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    z ^= z >> 31
    return z - (1 << 64) if z >= 1 << 63 else z


def _quoted(name: str) -> str:
    return str(op.get_bind().dialect.identifier_preparer.quote_identifier(name))


def _exists(s: str, table: str) -> bool:
    found = op.get_bind().exec_driver_sql(
        "SELECT to_regclass(%(t)s) IS NOT NULL", {"t": f"{s}.{table}"}
    )
    return bool(found.scalar_one())


def _slot_columns(schema: str) -> list[tuple[str, int, int]]:
    """``(column, kind, slot)`` of the key columns of ``settled_keys``."""
    rows = op.get_bind().exec_driver_sql(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = %(s)s AND table_name = 'settled_keys' AND column_name <> 'id'",
        {"s": schema},
    )
    columns = []
    for (name,) in rows:
        prefix, _, number = str(name).partition("_")
        columns.append((str(name), _NAMES[prefix], int(number)))
    return sorted(columns, key=lambda c: (c[1], c[2]))


def upgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(CREATE.format(s=s))
    columns = _slot_columns(schema)
    if columns and _exists(s, "settled_keys") and _exists(s, "recent_keys"):
        values = ", ".join(
            f"({_quoted(name)} # ({slot_salt(kind, slot)})::bigint, {kind}, {slot})"
            for name, kind, slot in columns
        )
        for table, target in TIERS.items():
            op.execute(
                f"INSERT INTO {s}.{target} (key, doc_id, kind, slot) "
                f"SELECT v.key, t.id, v.kind, v.slot FROM {s}.{table} t "
                f"CROSS JOIN LATERAL (VALUES {values}) AS v(key, kind, slot)"
            )
    op.execute(INDEX.format(s=s))
    op.execute(DROP_TIERS.format(s=s))


def downgrade(schema: str = "dedup") -> None:
    s = _quoted(schema)
    op.execute(RESTORE.format(s=s))
    slots = (
        op.get_bind()
        .exec_driver_sql(
            f"SELECT DISTINCT kind, slot FROM (SELECT kind, slot FROM {s}.slot_keys "
            f"UNION ALL SELECT kind, slot FROM {s}.recent_slot_keys) k ORDER BY kind, slot"
        )
        .all()
    )
    if slots:  # else the store makes its tier tables when it opens
        _restore_tiers(s, [(int(kind), int(slot)) for kind, slot in slots])
    op.execute(f"DROP TABLE {s}.slot_keys, {s}.recent_slot_keys")


def _restore_tiers(s: str, slots: list[tuple[int, int]]) -> None:
    """``settled_keys`` and ``recent_keys`` (0010's storage) with the rows of each first
    document (the keys untagged) of ``slot_keys`` and ``recent_slot_keys``, their indexes, and
    the trigger of ``settled_keys``."""
    names = {BAND: "band", BLOCK: "block"}
    columns = [(_quoted(f"{names[kind]}_{slot}"), kind, slot) for kind, slot in slots]
    pivot = ", ".join(
        f"max(k.key # ({slot_salt(kind, slot)})::bigint) "
        f"FILTER (WHERE k.kind = {kind} AND k.slot = {slot}) AS {name}"
        for name, kind, slot in columns
    )
    definitions = ", ".join(f"{name} bigint NOT NULL" for name, _, _ in columns)
    op.execute(f"CREATE TABLE {s}.settled_keys (id bigint NOT NULL, {definitions})")
    op.execute(
        f"CREATE TABLE {s}.recent_keys (id bigint NOT NULL, {definitions}) "
        "WITH (autovacuum_analyze_threshold = 10000)"
    )
    for table, source in TIERS.items():
        op.execute(
            f"INSERT INTO {s}.{table} SELECT k.doc_id, {pivot} "
            f"FROM {s}.{source} k GROUP BY k.doc_id ORDER BY k.doc_id"
        )
    for table in ("settled_keys", "recent_keys"):
        fill = " WITH (fillfactor = 100)" if table == "settled_keys" else ""
        op.execute(f"CREATE UNIQUE INDEX {table}_id ON {s}.{table} (id){fill}")
        for name, kind, slot in columns:
            index = _quoted(f"{table}_{names[kind]}_{slot}")
            op.execute(f"CREATE INDEX {index} ON {s}.{table} ({name}) INCLUDE (id){fill}")
    op.execute(
        f"CREATE TRIGGER settled_keys_changed AFTER INSERT OR UPDATE ON {s}.settled_keys "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.settled_keys_changed()"
    )
