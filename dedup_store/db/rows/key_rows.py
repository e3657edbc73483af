"""The rows of the key tables: one per band and block key of each first document.

Rows ``(key, doc_id, kind, slot)`` under one b-tree on ``(key, doc_id)``, the key XORed with a
salt of its kind and slot (:func:`~dedup_store.db.schema.encoding.tagged_keys`), so every key of a
query is one probe of the index. ``slot_keys`` holds the documents up to
``key_tiers.settled_through`` (the last bulk load or ``settle``), ``recent_slot_keys`` those added
since, so incremental writes insert into a small index (a random leaf of a large one costs a
full-page image in the WAL after each checkpoint). Writers take the keys from the batch
(:meth:`KeyRows.of`), or compute them from the stored fingerprints (:func:`stored_rows`).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64, stable_order
from dedup_store.core.fingerprint import document_block_keys
from dedup_store.core.lsh import band_keys
from dedup_store.core.params import FingerprintParams
from dedup_store.db.schema.encoding import BAND, BLOCK, array_literal, tagged_keys
from dedup_store.db.schema.names import qualified
from dedup_store.db.server import binary_copy

#: The tables of band and block keys (settled, recent), and their columns.
SETTLED, RECENT = "slot_keys", "recent_slot_keys"
TABLES = (SETTLED, RECENT)
COLUMNS = ("key", "doc_id", "kind", "slot")
#: Pages of the recent table below which the planner's guess for a table never analyzed (ten
#: pages) holds: a plan made then probes it through its index.
RECENT_GUESSED_PAGES = 10
# Emptied by TRUNCATE, the recent table has no statistics, which the planner takes for ten pages
# and probes through its index. Not analyzed empty: a statement planned once for an empty table
# would scan it whole for every key as it grows. Past ten pages the planner would guess the rows
# of a key from the default selectivity (hundreds) and sort a bitmap scan for every key, so
# writers analyze it then (refresh_recent_statistics), as autovacuum does past its threshold
# (migration 0014), and again as it doubles.


def both_tiers(schema: str) -> str:
    """SQL: the rows of both tiers' tables, as one relation (for a ``FROM``)."""
    settled, recent = (qualified(schema, table) for table in TABLES)
    return f"(SELECT * FROM {settled} UNION ALL SELECT * FROM {recent})"


#: Documents read per statement when rows are computed from stored fingerprints.
CHUNK = 50_000

I16 = npt.NDArray[np.int16]


@dataclasses.dataclass(frozen=True)
class KeyRows:
    """Rows of a key table: the key, the document, the kind and the slot (in ``slot_keys``
    the tagged band or block key, in ``secondary_keys`` a secondary key of a hot slot)."""

    key: I64
    doc: I64
    kind: I16
    slot: I16

    @classmethod
    def of(cls, ids: I64, bands: I64, blocks: I64) -> KeyRows:
        """The rows of documents ``ids`` whose band and block keys are the rows of ``bands`` and
        ``blocks``, in index order (by key, then document)."""
        matrix = tagged_keys(bands, blocks)
        widths = (bands.shape[1], blocks.shape[1])
        kinds = np.repeat(np.array([BAND, BLOCK], dtype=np.int16), widths)
        slots = np.concatenate([np.arange(1, width + 1, dtype=np.int16) for width in widths])
        docs = np.repeat(ids.astype(np.int64), matrix.shape[1])
        rows = cls(matrix.reshape(-1), docs, np.tile(kinds, len(ids)), np.tile(slots, len(ids)))
        # made document by document: with ascending ids, a stable sort by key orders them
        return rows.sorted(by_key_only=bool(np.all(ids[1:] >= ids[:-1])))

    @classmethod
    def of_slot(cls, kind: int, slot: int, keys: I64, docs: I64) -> KeyRows:
        """The rows of ``keys`` ``(n, count)`` of documents ``docs`` ``(n,)`` in one slot."""
        return cls(
            keys.reshape(-1),
            np.repeat(docs, keys.shape[1] if keys.ndim == 2 else 1),
            np.full(keys.size, kind, dtype=np.int16),
            np.full(keys.size, slot, dtype=np.int16),
        )

    @classmethod
    def concat(cls, parts: Sequence[KeyRows]) -> KeyRows:
        """All rows of ``parts``."""
        if not parts:
            empty = np.empty(0, dtype=np.int64)
            return cls(empty, empty, empty.astype(np.int16), empty.astype(np.int16))
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))

    @classmethod
    def merged(cls, parts: Sequence[KeyRows]) -> KeyRows:
        """All rows of ``parts``, in index order; each part in index order, and the documents of
        each after those of the one before (a load's batches): one stable sort by key."""
        ordered = all(
            a.doc.max() < b.doc.min() for a, b in itertools.pairwise(p for p in parts if len(p))
        )
        return cls.concat(parts).sorted(by_key_only=ordered)

    def subset(self, keep: npt.NDArray[np.bool_]) -> KeyRows:
        """The rows where ``keep`` is true."""
        return KeyRows(*(getattr(self, f)[keep] for f in _FIELDS))

    def sorted(self, by_key_only: bool = False) -> KeyRows:
        """The rows in index order, by key then document: a b-tree built or extended in order is
        walked in order.

        Args:
            by_key_only: the rows of each key are in document order already (made document by
                document): one stable sort by key orders them.
        """
        order = stable_order(self.key)
        if not by_key_only:  # by document first, then stably by key
            by_doc = stable_order(self.doc)
            order = by_doc[stable_order(self.key[by_doc])]
        return KeyRows(*(getattr(self, f)[order] for f in _FIELDS))

    @property
    def nbytes(self) -> int:
        """The bytes the rows hold in memory."""
        return sum(getattr(self, f).nbytes for f in _FIELDS)

    def __len__(self) -> int:
        return len(self.key)


_FIELDS = ("key", "doc", "kind", "slot")


def copy_rows(
    conn: Connection, schema: str, rows: KeyRows, table: str = RECENT, freeze: bool = False
) -> None:
    """COPY ``rows`` into ``table`` (``freeze``: as
    :func:`~dedup_store.db.server.binary_copy.copy_payload`)."""
    columns: list[npt.NDArray[Any]] = [rows.key, rows.doc, rows.kind, rows.slot]
    binary_copy.copy_fixed_rows(conn, schema, table, COLUMNS, columns, freeze)


def settled_through(conn: Connection, schema: str) -> int:
    """The largest id of the settled tier."""
    select = f"SELECT settled_through FROM {qualified(schema, 'key_tiers')} WHERE id = 1"
    return int(conn.execute(text(select)).scalar_one())


def set_settled_through(conn: Connection, schema: str, last_id: int) -> None:
    """Record ``last_id`` as the largest id of the settled tier (its rows are moved there by
    the caller, in the same transaction)."""
    tiers = qualified(schema, "key_tiers")
    update = f"UPDATE {tiers} SET settled_through = :last, settled_at = now() WHERE id = 1"
    conn.execute(text(update), {"last": int(last_id)})


def stored_keys(params: FingerprintParams, rows: Sequence[Any]) -> tuple[I64, I64, I64]:
    """The ids, band keys and block keys of the ``documents`` rows ``(id, signature, simhash,
    shingle_count)``."""
    columns = (np.array(column, dtype=np.int64) for column in zip(*rows, strict=True))
    ids, signatures, simhashes, counts = columns
    blocks = document_block_keys(simhashes.view(np.uint64), counts, params)
    return ids, band_keys(signatures.astype(np.int32).view(np.uint32), params), blocks


def stored_rows(
    conn: Connection, schema: str, params: FingerprintParams, ids: Sequence[int] | None = None
) -> Iterator[KeyRows]:
    """The rows of the first documents ``ids`` (``None``: all of them), computed from their
    stored fingerprints, :data:`CHUNK` documents at a time in id order."""
    conditions = ["exact_of IS NULL", "id > :after"]
    conditions += [] if ids is None else ["id = ANY(CAST(:ids AS bigint[]))"]
    select = text(
        f"SELECT id, signature, simhash, shingle_count FROM {qualified(schema, 'documents')} "
        f"WHERE {' AND '.join(conditions)} ORDER BY id LIMIT {CHUNK}"
    )
    bound = {"ids": None if ids is None else array_literal(ids)}
    after = 0
    while rows := conn.execute(select, {"after": after, **bound}).all():
        doc_ids, bands, blocks = stored_keys(params, rows)
        yield KeyRows.of(doc_ids, bands, blocks)
        after = int(doc_ids[-1])


def add_stored_keys(
    conn: Connection, schema: str, params: FingerprintParams, ids: Sequence[int] | None = None
) -> int:
    """Add the :func:`stored_rows` of the first documents ``ids`` (``None``: every one) to the
    table of the tier of their ids; returns how many rows."""
    bound = settled_through(conn, schema)
    added = 0
    for rows in stored_rows(conn, schema, params, ids):
        settled = rows.doc <= bound
        for table, chosen in ((SETTLED, settled), (RECENT, ~settled)):
            if chosen.any():
                copy_rows(conn, schema, rows.subset(chosen), table)
        added += len(rows)
    return added


def delete_keys(
    conn: Connection, schema: str, params: FingerprintParams, ids: Sequence[int]
) -> None:
    """Delete the rows of documents ``ids`` (exact copies have none), found through the lookup
    index by their keys, computed from the stored fingerprints."""
    deletes = [
        text(
            f"DELETE FROM {qualified(schema, table)} t "
            "USING unnest(CAST(:keys AS bigint[]), CAST(:docs AS bigint[])) AS g(key, doc_id) "
            "WHERE t.key = g.key AND t.doc_id = g.doc_id"
        )
        for table in TABLES
    ]
    for rows in stored_rows(conn, schema, params, ids):
        keys, docs = array_literal(rows.key.tolist()), array_literal(rows.doc.tolist())
        for delete in deletes:
            conn.execute(delete, {"keys": keys, "docs": docs})


def missing(conn: Connection, schema: str) -> bool:
    """Whether the key tables hold no row while the store has first documents: a store upgraded
    from a version that kept its keys elsewhere, which the migration could not read."""
    s = qualified(schema)
    select = (
        f"SELECT NOT EXISTS (SELECT 1 FROM {s}.{SETTLED}) "
        f"AND NOT EXISTS (SELECT 1 FROM {s}.{RECENT}) "
        f"AND EXISTS (SELECT 1 FROM {s}.documents WHERE exact_of IS NULL)"
    )
    return bool(conn.execute(text(select)).scalar_one())


def settle_recent(conn: Connection, schema: str) -> int:
    """Move every row of the recent table into the settled one, leaving it empty (``TRUNCATE``:
    its index is emptied without being read); returns how many rows moved."""
    settled, recent = (qualified(schema, table) for table in TABLES)
    names = ", ".join(COLUMNS)
    moved = conn.execute(text(f"INSERT INTO {settled} ({names}) SELECT {names} FROM {recent}"))
    conn.execute(text(f"TRUNCATE {recent}"))
    return int(moved.rowcount)


def refresh_recent_statistics(conn: Connection, schema: str, growth: int = 2) -> bool:
    """ANALYZE the recent table once it has outgrown :data:`RECENT_GUESSED_PAGES`, and again
    each time its pages grow ``growth`` times since the planner last looked; returns whether it
    did.

    The analysis replaces the plans of statements that probe it, prepared on every connection,
    whose row counts it multiplies by ``growth`` at most in between.
    """
    select = (
        "SELECT pg_relation_size(c.oid) / current_setting('block_size')::integer, c.relpages "
        "FROM pg_class c WHERE c.oid = CAST(:t AS regclass)"
    )
    table = qualified(schema, RECENT)
    pages, known = conn.execute(text(select), {"t": table}).one()
    if pages < RECENT_GUESSED_PAGES or (known > 0 and pages <= growth * known):
        return False
    conn.execute(text(f"ANALYZE {table}"))
    return True


def fill_missing(conn: Connection, schema: str, params: FingerprintParams) -> int:
    """Compute the rows of every first document when they are :func:`missing`; returns how many
    rows were added."""
    return add_stored_keys(conn, schema, params) if missing(conn, schema) else 0
