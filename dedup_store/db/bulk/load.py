"""Bulk loads: a load large against the store, written without per-key index maintenance.

A bulk load is one transaction holding the store's lock exclusively. It drops the indexes that
only key lookups use (the band and block keys' index, the excerpt keys' index and the exact hash
index), answers those lookups from memory (:class:`LoadedKeys`, seeded with what the store
held before), writes its batches as the incremental path does (same batches, same candidates,
same verification in SQL, same clusters), then builds the dropped indexes in bulk and commits.

So a killed load leaves the store as it was before it (the dropped indexes come back with the
rollback), and running it again completes it. Until it commits, readers of the store wait on
its lock (they never see a store without its indexes).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I32, I64, U32, U64, distinct, grown, merged_segments, ranges
from dedup_store.core.keyindex import HashedKeys, LevelKeys, key_index
from dedup_store.core.mixing import hashint8
from dedup_store.core.params import FingerprintParams
from dedup_store.db.bulk import checkpoint
from dedup_store.db.candidates.lookup import Found, KeyGroup, KeyQuery, Reach, key_groups
from dedup_store.db.candidates.stored import INDEXED, StoredKeys
from dedup_store.db.rows import batch_rows, key_rows
from dedup_store.db.rows.batch_rows import NewRows
from dedup_store.db.schema import ddl
from dedup_store.db.schema.encoding import BAND, SAMPLE, int4_array, int8_array, slot_salt
from dedup_store.db.schema.names import qualified, quote
from dedup_store.db.write import batch as batch_write
from dedup_store.db.write import locks

#: Indexes of the store's tables that only key lookups use: dropped for a bulk load.
LOOKUP_INDEXES = (("sample_keys", "sample_keys_lookup"), ("documents", "documents_exact_hash"))
#: The index of the settled tier's band and block keys, dropped for a bulk load too; the recent
#: tier's table keeps its own, which the load leaves empty (:func:`build_key_index`).
SETTLED_INDEX = "slot_keys_lookup"


class LoadedKeys(StoredKeys):
    """The keys, exact hashes and hot keys of the documents stored before a batch, in memory
    (a :class:`~dedup_store.db.candidates.stored.StoredKeys` for a load without the lookup indexes).

    Attributes:
        external_ids: ``{external id: id}`` of the stored documents (before and during the
            load).
    """

    bulk_load = True

    def __init__(self, params: FingerprintParams) -> None:
        self.params = params
        # a lookup reads at most hot_key_limit + 1 documents of a key, the oldest ones
        self._index = key_index(params.hot_key_limit + 1 if params.hot_key_limit else 0)
        self._indexing: _Indexing | None = None
        self._exact: dict[bytes, int] = {}
        self._hot: dict[tuple[int, int], set[int]] = {}
        self._shingles = LoadedDocuments()
        self._secondary: dict[tuple[int, int, int], list[int]] = {}  # ids, ascending
        self._next_id = 1
        self._max_id = 0
        self.external_ids: dict[str, int] = {}
        #: The load emptied the tables it writes with COPY (a new store): it writes them frozen.
        self.frozen = False
        #: The batches' sample keys and key rows, held for larger COPYs.
        self.held: batch_rows.HeldRows = batch_rows.HeldRows()

    def find(self, conn: Reach, schema: str, query: KeyQuery) -> Found:
        self._indexed()
        found = Found([], [], [], [])
        for group in query.groups:
            keys = group.uniques
            ids, found_keys = self._index.find((group.kind, group.slot), keys)
            hot = self._hot.get((group.kind, group.slot), set())
            hot_keys = np.empty(0, dtype=np.int64)
            if group.kind in query.hot_kinds and hot:
                hot_keys = keys[np.isin(keys, np.fromiter(hot, np.int64, len(hot)))]
            found.ids.append(ids)
            found.keys.append(found_keys)
            found.uniques.append(keys)
            found.hot.append(hot_keys)
        return found

    def members(
        self, conn: Reach, schema: str, kind: int, slot: int, keys: list[int]
    ) -> tuple[I64, I64]:
        # a key that is not hot has at most hot_key_limit stored documents: all are found
        self._indexed()
        ids, found_keys = self._index.find((kind, slot), distinct(np.array(keys, np.int64)))
        order = np.argsort(ids)
        return ids[order], found_keys[order]

    def firsts(self, conn: Reach, schema: str, hashes: list[bytes]) -> dict[bytes, int]:
        return {h: self._exact[h] for h in hashes if h in self._exact}

    def summaries(self, conn: Reach, schema: str, ids: I64) -> tuple[I64, I64]:
        kept = self._shingles.kept(ids)
        counts, simhashes = self._shingles.summaries(ids[kept])
        if kept.all():
            return counts, simhashes
        earlier = INDEXED.summaries(conn, schema, ids[~kept])  # stored before the load
        both = np.empty(len(ids), dtype=np.int64), np.empty(len(ids), dtype=np.int64)
        for column, mine, theirs in zip(both, (counts, simhashes), earlier, strict=True):
            column[kept], column[~kept] = mine, theirs
        return both

    def known_simhashes(self, ids: I64) -> tuple[npt.NDArray[np.bool_], U64]:
        return self._shingles.known_simhashes(ids)

    def shingles(self, conn: Reach, schema: str, ids: I64) -> tuple[I64, I32]:
        kept = self._shingles.kept(ids)
        here = self._shingles.shingles(ids[kept])
        if kept.all():
            return here
        return merged_segments(kept, here, INDEXED.shingles(conn, schema, ids[~kept]))

    def allocate_ids(self, conn: Reach, schema: str, count: int, shared: bool) -> I64:
        """``count`` new document ids from memory (:meth:`allocate`)."""
        return self.allocate(count)

    def allocate(self, count: int) -> I64:
        """``count`` new document ids, as :func:`~dedup_store.db.write.batch.allocate_ids` would
        draw them; :func:`finish` moves the sequence past those written."""
        ids = np.arange(self._next_id, self._next_id + count, dtype=np.int64)
        self._next_id += count
        return ids

    def promoted(self, kind: int, slot: int, keys: list[int]) -> None:
        self._hot.setdefault((kind, slot), set()).update(keys)

    def member_values(
        self, conn: Reach, schema: str, kind: int, ids: I64, num_perm: int
    ) -> npt.NDArray[Any]:
        values = self._shingles.values(ids, "signatures" if kind == BAND else "simhashes")
        missing = ~self._shingles.kept(ids)
        if missing.any():  # stored before the load
            values[missing] = INDEXED.member_values(conn, schema, kind, ids[missing], num_perm)
        return values

    def windows(
        self, conn: Reach, schema: str, groups: list[KeyGroup], hot_limit: int
    ) -> list[tuple[I64, I64]]:
        # as lookup.window: from a pivot derived from the key and the largest stored id
        hits = []
        for group in groups:
            keys = group.uniques
            pivots = (hashint8(keys) % (self._max_id + 1)).tolist()
            ids: list[int] = []
            found: list[int] = []
            for key, pivot in zip(keys.tolist(), pivots, strict=True):
                members = self._secondary.get((group.kind, group.slot, key))
                if not members:
                    continue
                at = bisect.bisect_left(members, pivot)
                chosen = (members[at : at + hot_limit] + members[:at])[:hot_limit]
                ids += chosen
                found += [key] * len(chosen)
            hits.append((np.array(ids, dtype=np.int64), np.array(found, dtype=np.int64)))
        return hits

    def add_secondary(
        self, kinds: npt.NDArray[np.int16], slots: npt.NDArray[np.int16], keys: I64, docs: I64
    ) -> None:
        rows = zip(kinds.tolist(), slots.tolist(), keys.tolist(), docs.tolist(), strict=True)
        for kind, slot, key, doc in rows:
            members = self._secondary.setdefault((kind, slot, key), [])
            if members and members[-1] > doc:
                bisect.insort(members, doc)
            else:
                members.append(doc)

    def documents(self, conn: Reach, schema: str, external_ids: list[str]) -> dict[str, int]:
        known = self.external_ids
        return {e: known[e] for e in external_ids if e in known}

    def added(self, new: NewRows, external_ids: list[str]) -> None:
        self.external_ids.update(zip(external_ids, new.ids.tolist(), strict=True))
        if len(new.ids):
            self._max_id = max(self._max_id, int(new.ids[-1]))
        firsts = new.firsts
        rows, ids = new.rows[firsts], new.ids[firsts]
        self._indexed()
        self._indexing = _Indexing(self._index, key_groups(new.batch, rows, ids))
        hashes = new.batch.exact_hashes
        self._exact.update(zip((hashes[r] for r in rows.tolist()), ids.tolist(), strict=True))
        self._shingles.add(new, rows, ids)

    def load(self, conn: Connection, schema: str) -> None:
        """Read what the store holds: its first documents' keys and exact hashes, its excerpt
        keys, its hot keys, its external ids (one scan of each table), its next id and whether
        it holds verdicts."""
        s = qualified(schema)
        self._next_id = batch_rows.next_id(conn, schema)
        rows = conn.execute(
            text(f"SELECT id, exact_hash, exact_of IS NULL, external_id FROM {s}.documents")
        ).all()
        self.external_ids = {row[3]: int(row[0]) for row in rows}
        self._max_id = max(self.external_ids.values(), default=0)
        self._exact = {bytes(row[1]): int(row[0]) for row in rows if row[2]}
        self._load_slot_keys(conn, schema)
        samples = conn.execute(
            text(
                f"SELECT array_send(array_agg(key ORDER BY doc_id)), "
                f"array_agg(doc_id ORDER BY doc_id) FROM {s}.sample_keys"
            )
        ).one()
        if samples[1] is not None:
            keys = int4_array(samples[0]).astype(np.int64)
            self._index.add((SAMPLE, 0), keys, np.array(samples[1], dtype=np.int64))
        for kind, slot, key in conn.execute(text(f"SELECT kind, slot, key FROM {s}.hot_keys")):
            self._hot.setdefault((int(kind), int(slot)), set()).add(int(key))
        columns = conn.execute(
            text(
                "SELECT array_agg(kind ORDER BY doc_id), array_agg(slot ORDER BY doc_id), "
                f"array_agg(key ORDER BY doc_id), array_agg(doc_id ORDER BY doc_id) "
                f"FROM {s}.secondary_keys"
            )
        ).one()
        if columns[0] is not None:
            kinds, slots, keys, docs = (np.array(c, dtype=np.int64) for c in columns)
            self.add_secondary(kinds.astype(np.int16), slots.astype(np.int16), keys, docs)
        # verdicts are written holding the store's lock exclusively, as the load does
        self.reviewed = conn.execute(
            text(f"SELECT EXISTS (TABLE {s}.verdicts) OR EXISTS (TABLE {s}.cut_edges)")
        ).scalar_one()

    def _load_slot_keys(self, conn: Connection, schema: str) -> None:
        """Index the band and block keys of the stored first documents (the rows of both
        tiers' tables, in id order, read a slot at a time in binary)."""
        rows = conn.execute(
            text(
                "SELECT kind, slot, array_send(array_agg(key ORDER BY doc_id)), "
                "array_send(array_agg(doc_id ORDER BY doc_id)) "
                f"FROM {key_rows.both_tiers(schema)} k GROUP BY kind, slot"
            )
        )
        for kind, slot, keys, docs in rows:
            untagged = int8_array(keys) ^ np.int64(slot_salt(int(kind), int(slot)))
            self._index.add((int(kind), int(slot)), untagged, int8_array(docs))

    def _indexed(self) -> None:
        """Wait until the keys of the last batch added are in the index."""
        if self._indexing is not None:
            indexing, self._indexing = self._indexing, None
            indexing.join()


class _Indexing:
    """A batch's keys going into the in-memory index on threads of their own, while the caller
    stages the rest of the batch and reads the next one: the compiled inserts (and the growth
    of a table) hold no interpreter lock. The next lookup waits for them.

    The groups are shared between :data:`THREADS` threads by their numbers of keys. Every band
    and block group takes one key a document, so their tables double in the same batch: on
    two threads, that batch waits half as long.

    The threads are the process's, started once (:meth:`threads`): started for each batch, the
    caller waited for each of them to take the interpreter lock (0.98 s of a profiled 1M load's
    42.9 s).
    """

    THREADS = 2
    _pool: ClassVar[ThreadPoolExecutor | None] = None
    _pool_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, index: HashedKeys | LevelKeys, groups: list[KeyGroup]) -> None:
        shares: list[list[KeyGroup]] = [[] for _ in range(self.THREADS)]
        sizes = [0] * self.THREADS
        for group in sorted(groups, key=lambda g: -len(g.keys)):
            least = sizes.index(min(sizes))
            shares[least].append(group)
            sizes[least] += len(group.keys)
        threads = self.threads()
        self._adding = [threads.submit(_add_keys, index, share) for share in shares if share]

    @classmethod
    def threads(cls) -> ThreadPoolExecutor:
        """The process's :data:`THREADS` indexing threads (loads share them: each load's
        groups are its own)."""
        with cls._pool_lock:
            if cls._pool is None:
                cls._pool = ThreadPoolExecutor(cls.THREADS, thread_name_prefix="dedup-store-keys")
            return cls._pool

    def join(self) -> None:
        """Wait for the inserts; raise what stopped them."""
        wait(self._adding)
        for adding in self._adding:
            adding.result()


def _forget_threads() -> None:
    """In a forked child: the parent's threads are not there, the child starts its own."""
    _Indexing._pool = None
    _Indexing._pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_threads)


def _add_keys(index: HashedKeys | LevelKeys, groups: list[KeyGroup]) -> None:
    """Add the keys of ``groups`` to ``index`` (each group's table is one thread's alone)."""
    for group in groups:
        index.add((group.kind, group.slot), group.keys, group.docs)


class LoadedDocuments:
    """The stored (32-bit, sorted) shingles, the SimHashes and the MinHash signatures of the
    documents a load wrote, so that verifying a candidate pair (or making a key hot) does not
    read them back from the table.

    A load's ids ascend without gaps between batches. Each document's shingle count, SimHash
    and where its shingles start are kept in arrays by id from the first one kept, and the
    shingles of all batches in one array, so that a lookup of shingles (every batch verifies
    its candidates with them) is one gather, however many batches the load has written; those
    arrays grow fourfold when full. The signatures, 336 bytes a document and two thirds of what
    is kept, are read only when band keys become hot: they stay in one array per batch, never
    copied.
    """

    GROWTH = 4

    def __init__(self) -> None:
        self._base = 0
        # per id: whether it is kept, where its shingles start in _values and how many there
        # are, its SimHash, and the batch and row of its signature in _signatures
        self._kept_at = np.zeros(0, dtype=bool)
        self._start_at = np.zeros(0, dtype=np.int64)
        self._count_at = np.zeros(0, dtype=np.int64)
        self._simhash_at = np.zeros(0, dtype=np.int64)
        self._batch_at = np.zeros(0, dtype=np.int32)
        self._row_at = np.zeros(0, dtype=np.int32)
        self._signatures: list[U32] = []
        self._values = np.zeros(0, dtype=np.int32)
        self._used = 0  # of _values

    def add(self, new: NewRows, rows: I64, ids: I64) -> None:
        """Keep the shingles of the batch rows ``rows`` of ``new``, written with ascending
        ``ids``."""
        if len(ids) == 0:
            return
        batch = new.batch
        offsets, values = new.shingles_of(rows)
        if not len(self._kept_at):
            self._base = int(ids[0])
        self._reserve(int(ids[-1]) - self._base + 1, self._used + len(values))
        at = ids - self._base
        self._kept_at[at] = True
        self._start_at[at] = self._used + offsets[:-1]
        self._count_at[at] = np.diff(offsets)
        self._simhash_at[at] = batch.simhashes[rows].view(np.int64)
        self._batch_at[at] = len(self._signatures)
        self._row_at[at] = np.arange(len(ids), dtype=np.int32)
        self._signatures.append(batch.signatures[rows])
        self._values[self._used : self._used + len(values)] = values
        self._used += len(values)

    def _reserve(self, ids: int, values: int) -> None:
        """Room for ``ids`` ids from the first one kept and ``values`` shingles."""
        if ids > len(self._kept_at):
            size = max(ids, self.GROWTH * len(self._kept_at))
            self._kept_at = grown(self._kept_at, size)
            self._start_at = grown(self._start_at, size)
            self._count_at = grown(self._count_at, size)
            self._simhash_at = grown(self._simhash_at, size)
            self._batch_at = grown(self._batch_at, size)
            self._row_at = grown(self._row_at, size)
        if values > len(self._values):
            self._values = grown(self._values, max(values, self.GROWTH * len(self._values)))

    def _positions(self, ids: I64) -> tuple[npt.NDArray[np.bool_], I64]:
        """Which of ``ids`` (any order) are kept here, and where (in the per-id arrays)."""
        at = ids - self._base
        inside = (at >= 0) & (at < len(self._kept_at))
        kept = np.zeros(len(ids), dtype=bool)
        kept[inside] = self._kept_at[at[inside]]
        return kept, at[kept]

    def kept(self, ids: I64) -> npt.NDArray[np.bool_]:
        """Which of ``ids`` are kept here."""
        return self._positions(ids)[0]

    def summaries(self, ids: I64) -> tuple[I64, I64]:
        """Shingle counts and SimHashes of ``ids``, all kept here."""
        at = ids - self._base
        return self._count_at[at], self._simhash_at[at]

    def known_simhashes(self, ids: I64) -> tuple[npt.NDArray[np.bool_], U64]:
        """Which of ``ids`` (any order) are kept here, and their SimHashes (0 for the others)."""
        kept, at = self._positions(ids)
        simhashes = np.zeros(len(ids), dtype=np.int64)
        simhashes[kept] = self._simhash_at[at]
        return kept, simhashes.view(np.uint64)

    def shingles(self, ids: I64) -> tuple[I64, I32]:
        """``(offsets, values)`` of the sorted shingles of ``ids``, all kept here."""
        at = ids - self._base
        starts, counts = self._start_at[at], self._count_at[at]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return offsets, self._values[ranges(starts, starts + counts)]

    def values(self, ids: I64, which: str) -> npt.NDArray[Any]:
        """The ``simhashes`` (uint64) or ``signatures`` (rows of uint32) of ``ids``, in that
        order (zero for those not kept here)."""
        kept, at = self._positions(ids)
        if which == "simhashes":
            simhashes = np.zeros(len(ids), dtype=np.uint64)
            simhashes[kept] = self._simhash_at[at].view(np.uint64)
            return simhashes
        width = self._signatures[0].shape[1] if self._signatures else 0
        signatures = np.zeros((len(ids), width), dtype=np.uint32)
        places, batches, rows = np.flatnonzero(kept), self._batch_at[at], self._row_at[at]
        for number in distinct(batches).tolist():
            mine = batches == number
            signatures[places[mine]] = self._signatures[number][rows[mine]]
        return signatures


def begin(
    conn: Connection, schema: str, params: FingerprintParams, own_transaction: bool = True
) -> LoadedKeys:
    """Start a bulk load in the transaction of ``conn``: lock out other writers, give the
    tables of an empty store new files, drop the lookup indexes and the foreign keys of
    ``edges``, and read what the store holds into memory.

    A load into an empty store in a transaction of its own (``own_transaction``) writes its
    rows frozen (:attr:`LoadedKeys.frozen`); in a caller's transaction it does not, as the
    caller may hold a cursor open, which rules a frozen COPY out.
    """
    locks.lock_store(conn, schema)
    s = qualified(schema)
    # every table the load changes the indexes or files of, taken together before anything
    # else: the load does not hold some of them through its work while it waits for another
    lock_tables(conn, schema, ("documents", "edges", "sample_keys", *key_rows.TABLES))
    empty = conn.execute(text(f"SELECT NOT EXISTS (SELECT 1 FROM {s}.documents)")).scalar_one()
    if empty:
        # new files for the tables: on a server with wal_level = minimal (the embedded one)
        # what this transaction writes into them skips the WAL, and its COPYs may freeze
        tables = (
            "documents",
            "edges",
            "cut_edges",
            "sample_keys",
            "secondary_keys",
            *key_rows.TABLES,
        )
        conn.execute(text(f"TRUNCATE {', '.join(f'{s}.{quote(t)}' for t in tables)}"))
    drop_lookup_indexes(conn, schema)
    ddl.drop_edge_links(conn, schema)
    loaded = LoadedKeys(params)
    loaded.load(conn, schema)
    loaded.frozen = bool(empty) and own_transaction
    return loaded


def drop_lookup_indexes(conn: Connection, schema: str) -> None:
    """Drop the indexes only key lookups use (:data:`LOOKUP_INDEXES`) for the rest of the
    transaction; :func:`finish` builds them again."""
    for name in (*(name for _, name in LOOKUP_INDEXES), SETTLED_INDEX):
        conn.execute(text(f"DROP INDEX IF EXISTS {qualified(schema, name)}"))


def lock_tables(conn: Connection, schema: str, tables: tuple[str, ...]) -> None:
    """Take ``tables`` for the rest of the transaction (``ACCESS EXCLUSIVE``: readers wait)."""
    names = ", ".join(qualified(schema, table) for table in tables)
    conn.execute(text(f"LOCK TABLE {names} IN ACCESS EXCLUSIVE MODE"))


def build_key_index(conn: Connection, schema: str) -> int:
    """Settle every stored document: move the rows of the recent tier's table into the settled
    one's (a bulk load wrote its own there already), build the settled table's index (dropped
    by the caller) and record the bound; returns the largest settled id.

    Run in the transaction of ``conn``, holding the store's lock exclusively; until it commits,
    readers of the store wait for it.
    """
    last_id = batch_rows.next_id(conn, schema) - 1
    key_rows.settle_recent(conn, schema)
    key_rows.set_settled_through(conn, schema, last_id)
    index = next(
        i
        for i in ddl.build_metadata(schema).tables[f"{schema}.{key_rows.SETTLED}"].indexes
        if i.name == SETTLED_INDEX
    )
    index.create(conn)
    return last_id


def settle(conn: Connection, schema: str) -> dict[str, float]:
    """Move the recent tier of the key tables into the settled one (:func:`build_key_index`
    with the index build settings of a bulk load), in the transaction of ``conn``.

    Returns:
        ``settled_through`` (the largest settled id), ``moved`` (documents that were in the
        recent tier), ``seconds`` (the index build).
    """
    locks.lock_store(conn, schema)
    lock_tables(conn, schema, key_rows.TABLES)
    before = key_rows.settled_through(conn, schema)
    moved = conn.execute(
        text(f"SELECT count(*) FROM {qualified(schema, 'documents')} WHERE id > :b"), {"b": before}
    ).scalar_one()
    for name, value in BUILD_SETTINGS.items():
        conn.execute(text("SELECT set_config(:name, :value, true)"), {"name": name, "value": value})
    started = time.perf_counter()
    conn.execute(text(f"DROP INDEX {qualified(schema, SETTLED_INDEX)}"))
    last_id = build_key_index(conn, schema)
    seconds = time.perf_counter() - started
    # not the recent tier's table, emptied (see dedup_store.db.rows.key_rows)
    conn.execute(text(f"ANALYZE {qualified(schema, key_rows.SETTLED)}"))
    return {"settled_through": last_id, "moved": int(moved), "seconds": seconds}


#: Server settings for the index builds that end a bulk load (for its transaction only). The
#: parallel workers are the server's own setting (``max_parallel_maintenance_workers``), which
#: only it can size for its cores (:mod:`~dedup_store.db.server.tuning`).
BUILD_SETTINGS = {"maintenance_work_mem": "1GB"}


def finish(
    conn: Connection,
    schema: str,
    params: FingerprintParams,
    settings: Mapping[str, str],
    loaded: LoadedKeys | None = None,
) -> dict[str, float]:
    """Build the indexes :func:`begin` dropped, add back the foreign keys of ``edges`` (checking
    every edge) and refresh the planner's statistics.

    Args:
        settings: server settings for the rest of the transaction (``SET LOCAL``), such as
            ``maintenance_work_mem``.
        loaded: the load's keys, whose held rows are written first. A load into a new store
            (:attr:`LoadedKeys.frozen`) has the server checkpoint meanwhile
            (:func:`~dedup_store.db.bulk.checkpoint.meanwhile`).

    Returns:
        Seconds spent building the indexes (``indexes``) and analyzing (``analyze``).
    """
    for name, value in settings.items():
        conn.execute(text("SELECT set_config(:name, :value, true)"), {"name": name, "value": value})
    if loaded is not None:
        loaded.held.flush(conn, schema)
    batch_rows.catch_up_ids(conn, schema)
    started = time.perf_counter()
    metadata = ddl.build_metadata(schema)
    new_files = loaded is not None and loaded.frozen
    with checkpoint.meanwhile(conn, new_files):
        for table, name in LOOKUP_INDEXES:
            index = next(i for i in metadata.tables[f"{schema}.{table}"].indexes if i.name == name)
            index.create(conn)
        build_key_index(conn, schema)
    ddl.add_edge_links(conn, schema)
    built = time.perf_counter()
    s = qualified(schema)
    # not the recent tier's table, emptied (see dedup_store.db.rows.key_rows)
    for table in (*batch_write.TABLES, key_rows.SETTLED):
        conn.execute(text(f"ANALYZE {s}.{quote(table)}"))
    return {"indexes": built - started, "analyze": time.perf_counter() - built}
