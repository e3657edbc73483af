"""The filter of the settled tier's keys (``settled_filter``): built with the tier, read by ingests.

A settle or a bulk load builds the settled tier's indexes and a
:class:`~dedup_store.core.keyfilter.KeyFilter` of every key of ``settled_keys``: a bulk load
from the keys it holds in memory; a settle by adding the recent tier's keys to the stored
filter while it has room for them (:func:`extended`), else with one binary ``COPY`` of the
table (:func:`build`). Each is made with :data:`HEADROOM` and stored (:func:`store`) as parts of
at most :data:`PART_BYTES`, with the ``settled_through`` it was built for, the keys it holds
and the id of the transaction that built it. A trigger
deletes it when any statement inserts or updates rows of ``settled_keys`` (migration 0011); a
filter is used only while the store's ``settled_through`` is the one it was built for.

An ingest looking up a batch's keys in the settled tier (:class:`SettledFilter`) then asks its
indexes only for the keys the filter may hold: nearly every key of a new document is absent
from the store, and a filter test costs a small part of an index probe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
from psycopg import sql
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64
from dedup_store.core.keyfilter import KeyFilter
from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates.lookup import KeyGroup
from dedup_store.db.schema import ddl
from dedup_store.db.schema.encoding import SAMPLE
from dedup_store.db.schema.names import qualified
from dedup_store.db.server.binary_copy import COPY_HEADER
from dedup_store.db.server.engine import driver_connection

#: The largest part of a filter stored in one row (``bytea``).
PART_BYTES = 16 << 20

#: A filter is made for this many times the keys it is made of: the settles after it add the
#: recent tier's keys to it (:func:`extended`) until it is full, rather than read the table.
HEADROOM = 1.25

#: Bytes of ``COPY`` output parsed at a time while a filter is built.
_READ_BYTES = 32 << 20


def sized(keys: int) -> KeyFilter:
    """An empty filter for ``keys`` keys and the :data:`HEADROOM` above them."""
    return KeyFilter.sized(int(keys * HEADROOM))


def build(conn: Connection, schema: str, params: FingerprintParams) -> KeyFilter:
    """The filter of every key of ``settled_keys``, read in the transaction of ``conn``."""
    slots = _slots(params)
    table = qualified(schema, ddl.TIER_TABLES[ddl.SETTLED])
    rows = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    found = sized(int(rows) * len(slots))
    _add_tier(conn, schema, params, ddl.SETTLED, found)
    return found


def extended(conn: Connection, schema: str, params: FingerprintParams) -> KeyFilter | None:
    """The stored filter with the keys of ``recent_keys`` added, if it is the filter of the
    settled tier as it is and has room for them (``None`` otherwise): what a settle stores
    (read before the recent tier's rows move, which deletes it)."""
    held = stored(conn, schema)
    if held is None or held.settled_through != ddl.settled_through(conn, schema):
        return None
    table = qualified(schema, ddl.TIER_TABLES[ddl.RECENT])
    rows = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    found = load(conn, schema, held)
    if found is None or found.room() < int(rows) * len(_slots(params)):
        return None
    _add_tier(conn, schema, params, ddl.RECENT, found)
    return found


def _slots(params: FingerprintParams) -> list[tuple[int, int]]:
    return [(kind, slot) for kind, _column, slot in ddl.key_slots(params)]


def _add_tier(
    conn: Connection, schema: str, params: FingerprintParams, tier: str, found: KeyFilter
) -> None:
    """Add every key of ``tier``'s table to ``found``."""
    for columns in _tier_keys(conn, schema, params, tier):
        for (kind, slot), keys in zip(_slots(params), columns, strict=True):
            found.add(kind, slot, keys)


def _tier_keys(
    conn: Connection, schema: str, params: FingerprintParams, tier: str
) -> Iterator[list[I64]]:
    """The key columns of ``tier``'s table in slot order, :data:`_READ_BYTES` of rows at a time
    (one binary ``COPY``)."""
    columns = [ddl.key_column(column, slot) for _kind, column, slot in ddl.key_slots(params)]
    fields = [("count", ">i2")]
    for number in range(len(columns)):
        fields += [(f"len{number}", ">i4"), (f"key{number}", ">i8")]
    row = np.dtype(fields)
    statement = sql.SQL("COPY (SELECT {} FROM {}.{}) TO STDOUT (FORMAT BINARY)").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.Identifier(schema),
        sql.Identifier(ddl.TIER_TABLES[tier]),
    )
    pending = bytearray()
    header = len(COPY_HEADER)  # the server's has no extension area either
    with driver_connection(conn).cursor() as cur, cur.copy(statement) as copy:
        for data in copy:
            pending += data
            if len(pending) >= header + _READ_BYTES:
                whole = (len(pending) - header) // row.itemsize * row.itemsize
                chunk = bytes(pending[header : header + whole])
                del pending[header : header + whole]
                yield _key_columns(chunk, row, len(columns))
    rest = bytes(pending[header:-2])  # the trailer is two bytes
    if rest:
        yield _key_columns(rest, row, len(columns))


def _key_columns(chunk: bytes, row: np.dtype[Any], count: int) -> list[I64]:
    rows = np.frombuffer(chunk, dtype=row)
    return [rows[f"key{number}"].astype(np.int64) for number in range(count)]


def store(conn: Connection, schema: str, found: KeyFilter, through: int) -> None:
    """Replace the stored filter by ``found``, the filter of the settled tier of
    ``settled_through`` ``through``, in the transaction of ``conn``."""
    table = qualified(schema, "settled_filter")
    conn.execute(text(f"DELETE FROM {table}"))
    data = found.to_bytes()
    for part, start in enumerate(range(0, len(data), PART_BYTES)):
        conn.execute(
            text(
                f"INSERT INTO {table} (part, settled_through, build, keys, words) "
                "VALUES (:part, :through, txid_current(), :keys, :words)"
            ),
            {
                "part": part,
                "through": int(through),
                "keys": found.count,
                "words": data[start : start + PART_BYTES],
            },
        )


@dataclasses.dataclass(frozen=True)
class Stored:
    """What ``settled_filter`` holds: the ``settled_through`` of the filter, the transaction
    that built it, its size in bytes and the keys it was made of."""

    settled_through: int
    build: int
    size: int
    keys: int


def stored(conn: Connection, schema: str) -> Stored | None:
    """The filter ``settled_filter`` holds, without its words (``None``: none)."""
    row = conn.execute(
        text(
            "SELECT min(settled_through), min(build), max(build), sum(octet_length(words)), "
            f"min(keys) FROM {qualified(schema, 'settled_filter')}"
        )
    ).one()
    if row[0] is None or row[1] != row[2]:
        return None
    return Stored(int(row[0]), int(row[1]), int(row[3]), int(row[4]))


def load(conn: Connection, schema: str, held: Stored) -> KeyFilter | None:
    """The filter ``held`` describes, if ``settled_filter`` still holds it."""
    statement = sql.SQL("SELECT words FROM {}.settled_filter WHERE build = %s ORDER BY part")
    with driver_connection(conn).cursor(binary=True) as cur:  # raw bytes, not hex text
        cur.execute(statement.format(sql.Identifier(schema)), (held.build,))
        data = b"".join(row[0] for row in cur)
    return KeyFilter.from_bytes(data, held.keys) if len(data) == held.size else None


class SettledFilter:
    """The stored filter as one ingest uses it
    (:class:`~dedup_store.db.candidates.side.SideIndexedKeys`).

    Reading it costs about what probing the settled tier's indexes for one key costs per
    :data:`BYTES_PER_KEY` bytes of filter, so it is read once the keys asked of those indexes,
    the lookup's own with them, would pay for it (a short ingest never reads it, a long one
    spends at most that much more than it would have had it read the filter at once); and only
    while the store holds it for its ``settled_through``, checked for every batch.
    """

    #: Bytes of filter read in the time the settled tier's indexes take to answer one key: on
    #: a 1M-document store a 32.7 MB filter was read in 59-114 ms (290-550 MB/s), and a batch's
    #: 107,734 band and block keys took 1.33-1.64 µs a key on one connection (cold or not).
    BYTES_PER_KEY = 384

    def __init__(self) -> None:
        self._asked = 0
        self._filter: KeyFilter | None = None
        self._build: int | None = None

    def narrowed(
        self, conn: Connection, schema: str, settled: int, groups: list[KeyGroup]
    ) -> list[KeyGroup]:
        """``groups`` without the band and block keys that the settled tier of
        ``settled_through`` ``settled`` surely does not hold (the groups themselves while there
        is no filter to tell)."""
        held = stored(conn, schema)
        if held is None or held.settled_through != settled:
            return self._asking(groups)
        if held.build != self._build:
            asking = sum(len(g.uniques) for g in groups if g.kind != SAMPLE)
            if (self._asked + asking) * self.BYTES_PER_KEY < held.size:
                return self._asking(groups)
            self._filter, self._build = load(conn, schema, held), held.build
        if self._filter is None:
            return self._asking(groups)
        return [_narrowed(group, self._filter) for group in groups]

    def _asking(self, groups: list[KeyGroup]) -> list[KeyGroup]:
        self._asked += sum(len(g.uniques) for g in groups if g.kind != SAMPLE)
        return groups


def _narrowed(group: KeyGroup, found: KeyFilter) -> KeyGroup:
    """The group of the keys of ``group`` that ``found`` may hold (excerpt keys: all of them)."""
    if group.kind == SAMPLE:
        return group
    keys = group.uniques[found.has(group.kind, group.slot, group.uniques)]
    return KeyGroup(group.kind, group.slot, keys, np.zeros(len(keys), dtype=np.int64))
