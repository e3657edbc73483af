"""Hot band and block keys: their buckets split by secondary keys.

A key that more than ``hot_key_limit`` documents share becomes hot when a write meets it: it is
recorded in ``hot_keys``, and every document owning it has its secondary keys for that slot
(:mod:`dedup_store.core.rekey`) in ``secondary_keys``. A lookup adds, to the key's
``hot_key_limit`` oldest documents, ``hot_key_limit`` documents of each of its secondary keys
(:func:`~dedup_store.db.candidates.lookup.window`): a bounded cost however large the bucket.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core import rekey
from dedup_store.core.arrays import I64
from dedup_store.core.fingerprint import Fingerprint, FingerprintBatch
from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import hamming_many
from dedup_store.db.candidates import lookup
from dedup_store.db.candidates.lookup import Candidates, KeyGroup, Pairs, Reach
from dedup_store.db.candidates.stored import INDEXED, StoredKeys
from dedup_store.db.rows.key_rows import KeyRows
from dedup_store.db.schema.encoding import BAND, BLOCK, array_literal
from dedup_store.db.schema.names import qualified
from dedup_store.db.server import binary_copy

SECONDARY_COLUMNS = ("kind", "slot", "key", "doc_id")


def find_candidates(
    conn: Reach, schema: str, batch: FingerprintBatch, rows: I64, ids: I64, stored: StoredKeys
) -> tuple[Candidates, KeyRows, Promotion]:
    """Pairs of (older document, new document) sharing a key, the new ones not yet stored,
    with hot buckets split.

    ``rows`` and ``ids``: the batch rows and new ids of the first documents of their exact
    groups. Keys shared by more than ``hot_key_limit`` documents become hot (:func:`promote`).
    Returns the candidates, the ``secondary_keys`` rows to write with the batch, and (during a
    bulk load) the keys it made hot.
    """
    params = batch.params
    hot_limit = params.hot_key_limit
    groups = lookup.key_groups(batch, rows, ids)
    kinds = frozenset(kind for kind in (BAND, BLOCK) if rekey.rekeyed(params, kind))
    found = stored.find(conn, schema, lookup.KeyQuery(groups, hot_limit, kinds))
    parts = lookup.found_pairs(groups, found, hot_limit)
    if not kinds or len(ids) == 0:
        return _merged(batch, rows, ids, stored, parts), KeyRows.concat([]), Promotion.none()
    hot_of: dict[int, I64] = {}
    pending: list[tuple[I64, I64, I64]] = []  # kinds, slots, keys
    for number, group in enumerate(groups):
        if group.kind not in kinds:
            continue
        keys, hot = found.uniques[number], found.hot[number]
        older = lookup.stored_counts(keys, found.keys[number])
        new_hot = keys[(older + group.counts > hot_limit) & ~np.isin(keys, hot)]
        if n := len(new_hot):
            pending.append((np.full(n, group.kind), np.full(n, group.slot), new_hot))
        hot_of[number] = np.union1d(hot, new_hot)
    promotion = Promotion.none()
    if pending:
        new_kinds, new_slots, new_keys = (np.concatenate(c) for c in zip(*pending, strict=True))
        promotion = promote(conn, schema, params, new_kinds, new_slots, new_keys, stored)
    secondary, written = _secondary_groups(batch, rows, ids, groups, hot_of)
    parts += _secondary_pairs(conn, schema, secondary, hot_limit, stored)
    stored.add_secondary(written.kind, written.slot, written.key, written.doc)
    merged = _merged(batch, rows, ids, stored, parts)
    return merged, KeyRows.concat([promotion.rows, written]), promotion


def _merged(
    batch: FingerprintBatch, rows: I64, ids: I64, stored: StoredKeys, parts: list[Pairs]
) -> Candidates:
    """The candidates of the pairs found (:func:`~dedup_store.db.candidates.lookup.merge`), less
    the findings by a block key of pairs whose SimHashes are known here and differ in more than
    ``simhash_k`` bits: no SimHash match, and no candidate unless another key found it too (on
    SimHashes that agree in most bits, block keys find many such pairs)."""
    if not parts:
        return lookup.merge(parts)
    a, b, kind = (np.concatenate(c) for c in zip(*parts, strict=True))
    block = np.flatnonzero(kind == BLOCK)
    if len(block):
        far = _far_apart(batch, rows, ids, stored, a[block], b[block])
        keep = np.ones(len(a), dtype=bool)
        keep[block[far]] = False
        a, b, kind = a[keep], b[keep], kind[keep]
    return lookup.merge([(a, b, kind)])


def _far_apart(
    batch: FingerprintBatch, rows: I64, ids: I64, stored: StoredKeys, a: I64, b: I64
) -> npt.NDArray[np.bool_]:
    """Which pairs ``(a, b)`` (``b`` new, of ``ids``) are known, without a query, to differ in
    more than ``simhash_k`` bits of their SimHashes."""
    simhashes_b = batch.simhashes[rows[np.searchsorted(ids, b)]]
    at = np.minimum(np.searchsorted(ids, a), len(ids) - 1)
    new_a = ids[at] == a
    known, simhashes_a = stored.known_simhashes(a)
    simhashes_a[new_a] = batch.simhashes[rows[at[new_a]]]
    known |= new_a
    return known & (hamming_many(simhashes_a, simhashes_b) > batch.params.simhash_k)


def _secondary_groups(
    batch: FingerprintBatch, rows: I64, ids: I64, groups: list[KeyGroup], hot_of: dict[int, I64]
) -> tuple[list[KeyGroup], KeyRows]:
    """Per re-keyed group with hot keys, the secondary keys of the new documents owning one."""
    secondary, written = [], []
    for number, hot in hot_of.items():
        group = groups[number]
        owners = np.isin(group.keys, hot)
        if not owners.any():
            continue
        docs = group.docs[owners]
        at = rows[np.searchsorted(ids, docs)]  # ids ascend
        signatures, simhashes = batch.signatures[at], batch.simhashes[at]
        keys = rekey.secondary_keys(
            batch.params, group.kind, group.slot, group.keys[owners], signatures, simhashes
        )
        rows_of = KeyRows.of_slot(group.kind, group.slot, keys, docs)
        secondary.append(KeyGroup(group.kind, group.slot, rows_of.key, rows_of.doc))
        written.append(rows_of)
    return secondary, KeyRows.concat(written)


def _secondary_pairs(
    conn: Reach, schema: str, groups: list[KeyGroup], hot_limit: int, stored: StoredKeys
) -> list[Pairs]:
    """Pairs found by secondary keys: each key's window of ``hot_limit`` stored documents
    (:func:`~dedup_store.db.candidates.lookup.window`), and pairs inside the batch."""
    if not groups:
        return []
    hits = stored.windows(conn, schema, groups, hot_limit)
    return [
        pairs
        for group, (found_ids, found_keys) in zip(groups, hits, strict=True)
        for pairs in lookup.group_pairs(group, found_ids, found_keys, hot_limit, spread=True)
    ]


def write_secondary(conn: Connection, schema: str, rows: KeyRows) -> None:
    """COPY ``rows`` into ``secondary_keys``, in index order."""
    order = np.lexsort((rows.doc, rows.key, rows.slot, rows.kind))
    columns = [column[order] for column in (rows.kind, rows.slot, rows.key, rows.doc)]
    binary_copy.copy_fixed_rows(conn, schema, "secondary_keys", SECONDARY_COLUMNS, columns)


@dataclasses.dataclass(frozen=True)
class Promotion:
    """Keys a batch made hot during a bulk load, written with the batch: its ``hot_keys``
    rows, and the ``secondary_keys`` rows of their stored documents (already in memory)."""

    kinds: I64
    slots: I64
    keys: I64
    rows: KeyRows

    @classmethod
    def none(cls) -> Promotion:
        """Nothing to write."""
        empty = np.empty(0, dtype=np.int64)
        return cls(empty, empty, empty, KeyRows.concat([]))


def promote(
    conn: Reach,
    schema: str,
    params: FingerprintParams,
    kinds: I64,
    slots: I64,
    keys: I64,
    stored: StoredKeys = INDEXED,
) -> Promotion:
    """Make keys hot (those already hot are left as they are): record them and write the
    secondary keys of their stored documents, holding the store's lock (exclusive, or shared
    with the locks of ``keys``). A bulk load returns the rows, to be written with the batch."""
    if len(keys) == 0:
        return Promotion.none()
    if stored.bulk_load:  # its lookups knew every hot key: all of these are new
        added = list(zip(kinds.tolist(), slots.tolist(), keys.tolist(), strict=True))
    else:
        added = record_hot(lookup.connection_of(conn), schema, kinds, slots, keys)
    wanted: dict[tuple[int, int], list[int]] = {}
    for kind, slot, key in added:
        wanted.setdefault((int(kind), int(slot)), []).append(int(key))
    parts = []
    for (kind, slot), slot_keys in wanted.items():
        stored.promoted(kind, slot, slot_keys)
        ids, primary = stored.members(conn, schema, kind, slot, slot_keys)
        values = stored.member_values(conn, schema, kind, ids, params.num_perm)
        if len(ids):  # the kind's secondary keys read the signatures or the SimHashes
            keys_of = rekey.secondary_keys(params, kind, slot, primary, values, values)
            parts.append(KeyRows.of_slot(kind, slot, keys_of, ids))
    rows = KeyRows.concat(parts)
    if stored.bulk_load:
        stored.add_secondary(rows.kind, rows.slot, rows.key, rows.doc)
        return Promotion(kinds, slots, keys, rows)
    write_secondary(lookup.connection_of(conn), schema, rows)
    return Promotion.none()


def record_hot(
    conn: Connection, schema: str, kinds: I64, slots: I64, keys: I64
) -> list[tuple[int, int, int]]:
    """Insert ``hot_keys`` rows; returns those that were not there."""
    if len(keys) == 0:
        return []
    insert = (
        f"INSERT INTO {qualified(schema)}.hot_keys (kind, slot, key) "
        "SELECT * FROM unnest(CAST(:kinds AS smallint[]), CAST(:slots AS smallint[]), "
        "CAST(:keys AS bigint[])) ON CONFLICT DO NOTHING RETURNING kind, slot, key"
    )
    values = {"kinds": kinds.tolist(), "slots": slots.tolist(), "keys": keys.tolist()}
    added = conn.execute(text(insert), values).all()
    return [(int(kind), int(slot), int(key)) for kind, slot, key in added]


def secondary_counts(params: FingerprintParams) -> tuple[int, int]:
    """Secondary keys per slot of band and of block keys (0: that kind is not re-keyed)."""
    return tuple(  # type: ignore[return-value]
        rekey.secondary_count(params, kind) if rekey.rekeyed(params, kind) else 0
        for kind in (BAND, BLOCK)
    )


def hot_secondary(s: str) -> str:
    """SQL: ``(kind, slot, key)`` of the query's secondary keys of its hot slots (parameters
    of :func:`query_parameters`)."""
    return (
        "SELECT n.kind, n.slot, n.key FROM unnest(CAST(:sec_kind AS smallint[]), "
        "CAST(:sec_slot AS smallint[]), CAST(:sec_primary AS bigint[]), "
        "CAST(:sec_key AS bigint[])) AS n(kind, slot, primary_key, key) "
        f"JOIN {s}.hot_keys h ON h.kind = n.kind AND h.slot = n.slot AND h.key = n.primary_key"
    )


def secondary_lookup(s: str, hot_limit: int) -> str:
    """SQL: per hot slot of the query, ``hot_limit`` documents of each of its secondary keys
    (:func:`window`); rows ``(a, block, sample)``."""
    return (
        f"SELECT f.doc_id AS a, n.kind = {BLOCK} AS block, false AS sample "
        f"FROM ({hot_secondary(s)}) n CROSS JOIN LATERAL ({lookup.window(s, hot_limit)}) f"
    )


def pending_keys_sql(s: str, secondary: tuple[int, int], hot_limit: int) -> str:
    """SQL: ``(kind, slot, key)`` of the query's re-keyed keys that adding it makes hot: not hot
    yet, and ``hot_limit`` stored documents (the most a probe yields) in the rows ``found`` of
    :func:`~dedup_store.db.matches.scoring.found_sql`."""
    kinds = [str(kind) for kind in (BAND, BLOCK) if secondary[kind]]
    if not hot_limit or not kinds:
        return "SELECT 0::smallint AS kind, 0::smallint AS slot, 0::bigint AS key WHERE false"
    return (
        "SELECT f.kind, f.slot, f.pkey AS key FROM found f "
        f"WHERE f.kind IN ({', '.join(kinds)}) GROUP BY f.kind, f.slot, f.pkey "
        f"HAVING count(*) >= {int(hot_limit)} AND NOT EXISTS (SELECT 1 FROM {s}.hot_keys h "
        "WHERE h.kind = f.kind AND h.slot = f.slot AND h.key = f.pkey)"
    )


_NO_SECONDARY = {f"sec_{name}": array_literal([]) for name in ("kind", "slot", "primary", "key")}


def query_parameters(
    fp: Fingerprint, slots: Iterable[tuple[int, int]] | None = None
) -> dict[str, Any]:
    """The secondary keys of ``fp`` with their kind, slot and primary key (parameters
    ``sec_kind``, ``sec_slot``, ``sec_primary``, ``sec_key``): those of the re-keyed
    ``(kind, slot)`` pairs ``slots``, or with ``None`` of every re-keyed slot.

    Every slot's keys cost more than the rest of a ``check``: callers send those of the slots
    they know to be hot (:class:`MetHotKeys`), and all if others are reported (:func:`touched_sql`).
    """
    if slots is not None and not slots:  # the usual query: it knows no hot slot of its own
        return dict(_NO_SECONDARY)
    params = fp.params
    wanted = None if slots is None else set(slots)
    columns: dict[str, list[int]] = {f"sec_{n}": [] for n in ("kind", "slot", "primary", "key")}
    for kind, owned in ((BAND, fp.band_keys), (BLOCK, fp.block_keys)):
        chosen = [j for j in range(len(owned)) if wanted is None or (kind, j + 1) in wanted]
        if not rekey.rekeyed(params, kind) or not chosen:
            continue
        signature, simhash = fp.signature[None, :], np.array([fp.simhash], dtype=np.uint64)
        keys = rekey.all_secondary_keys(params, kind, owned[None, :], signature, simhash)[0]
        keys = keys[np.array(chosen, dtype=np.intp)]
        count = keys.shape[1]
        columns["sec_kind"] += [kind] * keys.size
        columns["sec_slot"] += np.repeat(np.array(chosen) + 1, count).tolist()
        columns["sec_primary"] += np.repeat(owned[chosen], count).tolist()
        columns["sec_key"] += keys.reshape(-1).tolist()
    return {name: array_literal(values) for name, values in columns.items()}


def sends_secondary(parameters: Mapping[str, Any]) -> bool:
    """Whether the :func:`query_parameters` among ``parameters`` hold any secondary key."""
    return bool(parameters["sec_key"] != array_literal([]))


def touched_sql(
    s: str, secondary: tuple[int, int], hot_limit: int, full_buckets: bool = False
) -> str:
    """SQL: ``(kind, slot, key)`` of the query's hot band and block keys of re-keyed slots
    whose secondary keys were not sent (:func:`query_parameters`), read from the rows ``found``
    of :func:`~dedup_store.db.matches.scoring.found_sql`: the statement must run again with them.

    With ``full_buckets`` (enough for a read), only the keys whose probe found ``hot_limit``
    documents: a hot key with fewer yielded all it has."""
    kinds = [str(kind) for kind in (BAND, BLOCK) if secondary[kind]]
    if not hot_limit or not kinds:
        return "SELECT 0::smallint AS kind, 0::smallint AS slot, 0::bigint AS key WHERE false"
    found = "found"
    if full_buckets:
        found = (
            f"(SELECT kind, slot, pkey FROM found WHERE kind IN ({', '.join(kinds)}) "
            f"GROUP BY kind, slot, pkey HAVING count(*) >= {int(hot_limit)})"
        )
    return (
        f"SELECT f.kind, f.slot, f.pkey AS key FROM {found} f JOIN {s}.hot_keys h "
        "ON h.kind = f.kind AND h.slot = f.slot AND h.key = f.pkey "
        f"WHERE f.kind IN ({', '.join(kinds)}) AND NOT EXISTS (SELECT 1 FROM "
        "unnest(CAST(:sec_kind AS smallint[]), CAST(:sec_slot AS smallint[])) AS n(kind, slot) "
        "WHERE n.kind = f.kind AND n.slot = f.slot)"
    )


class MetHotKeys:
    """The hot band and block keys ``(kind, slot, key)`` that one store object has met.

    ``check`` and ``add`` send the secondary keys of the slots whose key is listed here, so a
    query owning a hot key met before takes one statement instead of two; the answers do not
    depend on the list (:func:`touched_sql`). It starts over when it reaches ``limit``.
    """

    def __init__(self, limit: int = 1_000_000) -> None:
        self._keys: set[tuple[int, int, int]] = set()
        self._limit = limit
        #: Whether :meth:`seed` has run.
        self.seeded = False

    def seed(self, keys: Iterable[tuple[int, int, int]]) -> None:
        """List ``keys`` (``(kind, slot, key)``) as hot, up to the list's limit."""
        self.seeded = True
        room = self._limit - len(self._keys)
        self._keys.update(itertools.islice(keys, max(room, 0)))

    def slots(self, fp: Fingerprint) -> list[tuple[int, int]]:
        """The ``(kind, slot)`` pairs of ``fp`` whose key is listed."""
        known = self._keys
        if not known:
            return []
        return [
            (kind, slot)
            for kind, owned in ((BAND, fp.band_keys), (BLOCK, fp.block_keys))
            for slot, key in enumerate(owned.tolist(), start=1)
            if (kind, slot, key) in known
        ]

    def learn(self, fp: Fingerprint, slots: Iterable[tuple[int, int]]) -> None:
        """List the keys of ``fp`` in ``slots`` (``(kind, slot)`` pairs) as hot."""
        if len(self._keys) >= self._limit:
            self._keys.clear()
        for kind, slot in slots:
            owned = fp.band_keys if kind == BAND else fp.block_keys
            self._keys.add((kind, slot, int(owned[slot - 1])))


def stored_hot_keys(
    conn: Connection, schema: str, limit: int = 100_000
) -> list[tuple[int, int, int]]:
    """``(kind, slot, key)`` of up to ``limit`` of the store's hot band and block keys."""
    hot_keys = qualified(schema, "hot_keys")
    select = (
        f"SELECT kind, slot, key FROM {hot_keys} WHERE kind IN ({BAND}, {BLOCK}) LIMIT {int(limit)}"
    )
    rows = conn.execute(text(select))
    return [(int(kind), int(slot), int(key)) for kind, slot, key in rows]


def delete_secondary(conn: Connection, schema: str, doc_ids: Sequence[int]) -> None:
    """Delete the secondary keys of documents ``doc_ids``."""
    delete = f"DELETE FROM {qualified(schema, 'secondary_keys')} WHERE doc_id = ANY(:ids)"
    conn.execute(text(delete), {"ids": list(doc_ids)})


def hot_stats(conn: Connection, schema: str, params: FingerprintParams) -> dict[str, Any]:
    """Hot keys per kind, and the five largest hot buckets with their document counts."""
    s = qualified(schema)
    per_kind = text(f"SELECT kind, count(*) FROM {s}.hot_keys GROUP BY kind")
    counts: dict[int, int] = dict(conn.execute(per_kind).all())
    select = (
        "SELECT h.kind, h.slot, b.documents, d.external_id "
        f"FROM {s}.hot_keys h JOIN ({lookup.salts_sql(params)}) t "
        "ON t.kind = h.kind AND t.slot = h.slot "
        "CROSS JOIN LATERAL (SELECT count(*) AS documents, min(p.doc_id) AS oldest FROM "
        f"({lookup.slot_probe(s, 'h.key # t.salt')}) p) b "
        f"JOIN {s}.documents d ON d.id = b.oldest "
        "ORDER BY b.documents DESC, h.kind, h.slot, h.key LIMIT 5"
    )
    largest = conn.execute(text(select)).all()
    names = {BAND: "band", BLOCK: "block"}
    return {
        "hot_keys": {names[kind]: int(counts.get(kind, 0)) for kind in (BAND, BLOCK)},
        "hottest_keys": {
            f"#{rank} {names[int(kind)]} {int(slot)} in {oldest}": int(documents)
            for rank, (kind, slot, documents, oldest) in enumerate(largest, 1)
        },
    }
