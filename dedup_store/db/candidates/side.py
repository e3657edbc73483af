"""Lookups of the settled tier of the key indexes on connections of their own.

While a batch holds the store's lock (:mod:`dedup_store.db.write.locks`: settling and bulk loads,
which rewrite the settled tier, hold it exclusively) and has written nothing yet in its
transaction, the settled tier (:mod:`dedup_store.db.schema.ddl`) changes for nobody until the batch
commits: another
connection reads it as the batch's would. :class:`SideIndexedKeys` then looks it up on
:class:`SideReader` connections, half of the slots and half of the excerpt keys (which have one
tier) each, while the writer's connection looks up the recent tier and the hot keys,
and merges the parts as one lookup of both tiers finds them
(:func:`~dedup_store.db.candidates.lookup.find_keys`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64, U64, grown
from dedup_store.db.candidates.lookup import (
    Found,
    KeyGroup,
    Reach,
    connection_of,
    find_keys,
    found_in,
    lookup_statement,
)
from dedup_store.db.candidates.settled_filter import SettledFilter
from dedup_store.db.candidates.stored import IndexedKeys
from dedup_store.db.schema.ddl import RECENT, SETTLED, settled_through
from dedup_store.db.schema.encoding import BAND, SAMPLE

#: A group with no keys: the statement leaves it out (a slot another part looks up).
_NO_KEYS = KeyGroup(BAND, 1, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


class SideReader:
    """Runs read statements on connections of their own, ``lanes`` at a time, each in a
    thread (use it as a context manager)."""

    def __init__(self, read: Callable[[Callable[[Connection], Any]], Any], lanes: int = 2) -> None:
        self._read = read
        self.lanes = lanes
        self._thread = ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="dedup-store-side")

    def submit(self, statement: str, parameters: dict[str, str]) -> Future[list[Any]]:
        """The rows of ``statement``, read by ``read`` (such as
        :meth:`~dedup_store.db.server.engine.Database.read`)."""
        return self._thread.submit(
            self._read, lambda conn: list(conn.execute(text(statement), parameters))
        )

    def __enter__(self) -> SideReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.shutdown(wait=True)


class SideIndexedKeys(IndexedKeys):
    """:class:`~dedup_store.db.candidates.stored.IndexedKeys` that looks up the settled tier on the
    connections of ``side``: for batches written under the store's lock that delete nothing
    before their lookups. It asks the settled tier only for the keys its filter may hold
    (:class:`~dedup_store.db.candidates.settled_filter.SettledFilter`).

    It also remembers the shingle counts and SimHashes of the stored documents it has read
    (:class:`MetSummaries`): batches of one ingest meet many of the same documents, and
    :meth:`known_simhashes` lets pairs found by block keys that are far apart leave before
    their summaries are read (:func:`~dedup_store.db.candidates.hot.find_candidates`).
    """

    def __init__(self, side: SideReader) -> None:
        self.side = side
        self._met = MetSummaries()
        self._filter = SettledFilter()

    def summaries(self, conn: Reach, schema: str, ids: I64) -> tuple[I64, I64]:
        known, counts, simhashes = self._met.get(ids)
        if not known.all():
            unknown = ids[~known]
            counts[~known], simhashes[~known] = super().summaries(conn, schema, unknown)
            self._met.add(unknown, counts[~known], simhashes[~known])
        return counts, simhashes

    def known_simhashes(self, ids: I64) -> tuple[npt.NDArray[np.bool_], U64]:
        known, _, simhashes = self._met.get(ids)
        return known, simhashes.view(np.uint64)

    def find(
        self,
        conn: Reach,
        schema: str,
        groups: list[KeyGroup],
        hot_limit: int,
        hot_kinds: frozenset[int],
    ) -> Found:
        connection = connection_of(conn)
        settled = settled_through(connection, schema)
        if settled == 0:  # nothing is settled: one statement
            return find_keys(connection, schema, groups, hot_limit, hot_kinds)
        lanes = self.side.lanes
        elsewhere = []
        narrowed = self._filter.narrowed(connection, schema, settled, groups)
        for part in range(lanes):
            chosen = [_share(g, n, part, lanes) for n, g in enumerate(narrowed)]
            if all(len(g.uniques) == 0 for g in chosen):
                continue  # the filter left this part nothing to look up
            statement, parameters, _ = lookup_statement(schema, chosen, hot_limit, (SETTLED,))
            elsewhere.append(self.side.submit(statement, parameters))
        statement, parameters, uniques = lookup_statement(
            schema, groups, hot_limit, (RECENT,), hot_kinds, samples=False
        )
        recent = found_in(connection.execute(text(statement), parameters), uniques, len(groups))
        older = found_in([row for f in elsewhere for row in f.result()], uniques, len(groups))
        cap = hot_limit + 1 if hot_limit else 0
        for number, group in enumerate(groups):
            if group.kind == SAMPLE:  # excerpt keys: one tier, looked up on a side connection
                recent.ids[number], recent.keys[number] = older.ids[number], older.keys[number]
                continue
            recent.ids[number], recent.keys[number] = oldest(
                np.concatenate([older.ids[number], recent.ids[number]]),
                np.concatenate([older.keys[number], recent.keys[number]]),
                cap,
            )
        return recent


def _share(group: KeyGroup, number: int, part: int, parts: int) -> KeyGroup:
    """What part ``part`` of ``parts`` looks up of the group ``number``: every ``parts``-th
    band or block group whole, and a ``parts``-th of the excerpt keys (thousands of probes of
    their own, the largest share of a lookup of long documents)."""
    if group.kind != SAMPLE:
        return group if number % parts == part else _NO_KEYS
    keys = np.array_split(group.uniques, parts)[part]
    return KeyGroup(SAMPLE, 0, keys, np.zeros(len(keys), dtype=np.int64))


class MetSummaries:
    """Shingle counts and SimHashes of stored documents, by id (neither ever changes for an
    id, and ids are not used again), for ids below :attr:`LIMIT` (17 bytes an id at most)."""

    LIMIT = 1 << 22

    def __init__(self) -> None:
        self._present = np.zeros(0, dtype=bool)
        self._counts = np.zeros(0, dtype=np.int64)
        self._simhashes = np.zeros(0, dtype=np.int64)

    def get(self, ids: I64) -> tuple[npt.NDArray[np.bool_], I64, I64]:
        """Which of ``ids`` are known, and their shingle counts and SimHashes (0 if not)."""
        inside = ids < len(self._present)
        known = np.zeros(len(ids), dtype=bool)
        known[inside] = self._present[ids[inside]]
        counts = np.zeros(len(ids), dtype=np.int64)
        simhashes = np.zeros(len(ids), dtype=np.int64)
        counts[known], simhashes[known] = self._counts[ids[known]], self._simhashes[ids[known]]
        return known, counts, simhashes

    def add(self, ids: I64, counts: I64, simhashes: I64) -> None:
        """Remember the shingle counts and SimHashes of the stored documents ``ids``."""
        keep = ids < self.LIMIT
        ids, counts, simhashes = ids[keep], counts[keep], simhashes[keep]
        if not len(ids):
            return
        size = int(ids.max()) + 1
        if size > len(self._present):
            size = min(max(size, 2 * len(self._present)), self.LIMIT)
            self._present = grown(self._present, size)
            self._counts = grown(self._counts, size)
            self._simhashes = grown(self._simhashes, size)
        self._present[ids] = True
        self._counts[ids], self._simhashes[ids] = counts, simhashes


def oldest(ids: I64, keys: I64, cap: int) -> tuple[I64, I64]:
    """``(ids, keys)`` ordered by key then id, at most the ``cap`` oldest of each key (``cap``
    0: all), as one lookup of both tiers finds them."""
    order = np.lexsort((ids, keys))
    ids, keys = ids[order], keys[order]
    if cap and len(keys):
        keep = np.arange(len(keys)) - np.searchsorted(keys, keys, side="left") < cap
        ids, keys = ids[keep], keys[keep]
    return ids, keys
