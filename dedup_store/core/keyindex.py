"""An in-memory index of keys to documents, for loads that do without the database's indexes.

A bulk load (:mod:`dedup_store.db.bulk.load`) writes documents without their per-slot key indexes
and answers its key lookups from here instead. Each lookup only ever needs the ``cap`` oldest
documents of a key (the store's lookups read at most ``hot_key_limit + 1`` of them), so the index
keeps no more than that per key. Documents arrive in ascending id order, one batch at a time, and a
key's documents are found oldest first.

Two structures give the same answers. With the compiled kernels, :class:`HashedKeys`: per
group of keys (a key kind and slot), an open-addressing hash table of ``(key, id)`` entries, one
probe sequence per key (16 bytes an entry, at most 3/4 full). Otherwise :class:`LevelKeys`: per
group, a short list of levels, each a pair of arrays sorted by ``(key, id)``; a batch becomes a
new level and the newest levels are merged while the newest is at least half the size of the one
before it, so a group holds O(log n) levels and a lookup is one binary search per level.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U64, ranges


def key_index(cap: int) -> HashedKeys | LevelKeys:
    """The index for this installation: hashed with the compiled kernels, levels otherwise."""
    if isinstance(kernels.backend, kernels.CompiledBackend):
        return HashedKeys(cap, kernels.backend)
    return LevelKeys(cap)


class HashedKeys:
    """Keys of documents added in ascending id order, per group, in hash tables, with lookups
    of each key's ``cap`` oldest documents (``cap`` 0: all of them)."""

    def __init__(self, cap: int, backend: kernels.CompiledBackend) -> None:
        self.cap = cap
        self._backend = backend
        self._tables: dict[Hashable, tuple[U64, I64, int]] = {}  # keys, ids, entries

    def add(self, group: Hashable, keys: I64, ids: I64) -> None:
        """Add ``keys[i]`` of document ``ids[i]``; every id must exceed those added before."""
        if len(keys) == 0:
            return
        table_keys, table_ids, entries = self._room(group, len(keys))
        entries += self._backend.multimap_insert(
            table_keys, table_ids, keys.view(np.uint64), ids.astype(np.int64), self.cap
        )
        self._tables[group] = (table_keys, table_ids, entries)

    def find(self, group: Hashable, keys: I64) -> tuple[I64, I64]:
        """``(ids, keys)``: the ``cap`` oldest documents of each of the distinct, sorted
        ``keys``, ordered by key then id."""
        if group not in self._tables:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        table_keys, table_ids, _ = self._tables[group]
        ids, found = self._backend.multimap_find(table_keys, table_ids, keys.view(np.uint64))
        return ids, found.view(np.int64)

    def size(self) -> int:
        """Entries held (after capping), over all groups."""
        return sum(entries for _, _, entries in self._tables.values())

    def entries(self, group: Hashable) -> int:
        """Entries of the group held (after capping)."""
        return self._tables[group][2] if group in self._tables else 0

    def keys(self, group: Hashable) -> I64:
        """The keys of the group's entries (a key once per entry, in no order)."""
        if group not in self._tables:
            return np.empty(0, dtype=np.int64)
        table_keys, table_ids, _ = self._tables[group]
        keys: I64 = table_keys[table_ids != 0].view(np.int64)
        return keys

    def _room(self, group: Hashable, more: int) -> tuple[U64, I64, int]:
        """The group's table, grown (and filled again in id order) to take ``more`` entries."""
        table_keys, table_ids, entries = self._tables.get(
            group, (np.empty(0, np.uint64), np.empty(0, np.int64), 0)
        )
        if 4 * (entries + more) <= 3 * len(table_keys):
            return table_keys, table_ids, entries
        size = 1 << max(4, int(2 * (entries + more) - 1).bit_length())
        if not entries:
            return np.zeros(size, np.uint64), np.zeros(size, np.int64), 0
        grown_keys, grown_ids = np.empty(size, np.uint64), np.empty(size, np.int64)
        self._backend.multimap_rehash(table_keys, table_ids, grown_keys, grown_ids)
        return grown_keys, grown_ids, entries


class LevelKeys:
    """Keys of documents added in ascending id order, per group, in sorted levels, with lookups
    of each key's ``cap`` oldest documents (``cap`` 0: all of them)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._levels: dict[Hashable, list[tuple[I64, I64]]] = {}

    def add(self, group: Hashable, keys: I64, ids: I64) -> None:
        """Add ``keys[i]`` of document ``ids[i]``; every id must exceed those added before."""
        if len(keys) == 0:
            return
        levels = self._levels.setdefault(group, [])
        levels.append(self._sorted(keys.astype(np.int64), ids.astype(np.int64)))
        while len(levels) > 1 and 2 * len(levels[-1][0]) >= len(levels[-2][0]):
            newer = levels.pop()
            older = levels.pop()
            keys = np.concatenate([older[0], newer[0]])
            ids = np.concatenate([older[1], newer[1]])
            # the older level comes first, so a stable sort by key keeps ids ascending per key
            order = np.argsort(keys, kind="stable")
            levels.append(self._capped(keys[order], ids[order]))

    def find(self, group: Hashable, keys: I64) -> tuple[I64, I64]:
        """``(ids, keys)``: the ``cap`` oldest documents of each of the distinct, sorted
        ``keys``, ordered by key then id."""
        found_ids, found_keys = [], []
        for level_keys, level_ids in self._levels.get(group, []):
            lo = np.searchsorted(level_keys, keys, side="left")
            hi = np.searchsorted(level_keys, keys, side="right")
            hit = hi > lo
            if not hit.any():
                continue
            at = ranges(lo[hit], hi[hit])
            found_ids.append(level_ids[at])
            found_keys.append(level_keys[at])
        if not found_ids:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        ids, keys = np.concatenate(found_ids), np.concatenate(found_keys)
        if len(found_ids) > 1:
            order = np.lexsort((ids, keys))
            ids, keys = self._capped_pair(keys[order], ids[order])
        return ids, keys

    def size(self) -> int:
        """Entries held (after capping), over all groups."""
        return sum(len(keys) for levels in self._levels.values() for keys, _ in levels)

    def entries(self, group: Hashable) -> int:
        """Entries of the group held (after capping)."""
        return sum(len(keys) for keys, _ in self._levels.get(group, []))

    def keys(self, group: Hashable) -> I64:
        """The keys of the group's entries (a key once per entry, in no order)."""
        levels = self._levels.get(group, [])
        return np.concatenate([keys for keys, _ in levels]) if levels else np.empty(0, np.int64)

    def _sorted(self, keys: I64, ids: I64) -> tuple[I64, I64]:
        order = np.lexsort((ids, keys))
        return self._capped(keys[order], ids[order])

    def _capped(self, keys: I64, ids: I64) -> tuple[I64, I64]:
        """Sorted ``(keys, ids)`` without the entries past the ``cap`` first of each key."""
        if not self.cap or len(keys) == 0:
            return keys, ids
        rank = np.arange(len(keys)) - np.searchsorted(keys, keys, side="left")
        keep = rank < self.cap
        return keys[keep], ids[keep]

    def _capped_pair(self, keys: I64, ids: I64) -> tuple[I64, I64]:
        keys, ids = self._capped(keys, ids)
        return ids, keys
