"""Lookups of the settled tier of the key indexes on connections of their own.

While a batch holds the writers' lock and has written nothing yet in its transaction, the
settled tier (:mod:`dedup_store.db.ddl`) changes for nobody until the batch commits: another
connection reads it as the batch's would. :class:`SideIndexedKeys` then looks it up on
:class:`SideReader` connections, half of the slots each (and on one of them the excerpt keys,
which have one tier), while the writer's connection looks up the recent tier and the hot keys,
and merges the parts as one lookup of both tiers finds them
(:func:`~dedup_store.db.lookup.find_keys`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64
from dedup_store.db.ddl import RECENT, SETTLED, settled_through
from dedup_store.db.encoding import BAND, SAMPLE
from dedup_store.db.lookup import (
    Found,
    IndexedKeys,
    KeyGroup,
    Reach,
    connection_of,
    find_keys,
    found_in,
    lookup_statement,
)

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
        :meth:`~dedup_store.db.engine.Database.read`)."""
        return self._thread.submit(
            self._read, lambda conn: list(conn.execute(text(statement), parameters))
        )

    def __enter__(self) -> SideReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._thread.shutdown(wait=True)


class SideIndexedKeys(IndexedKeys):
    """:class:`~dedup_store.db.lookup.IndexedKeys` that looks up the settled tier on the
    connections of ``side``: for batches written under the writers' lock that delete nothing
    before their lookups."""

    def __init__(self, side: SideReader) -> None:
        self.side = side

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
        for part in range(lanes):
            chosen = [g if n % lanes == part else _NO_KEYS for n, g in enumerate(groups)]
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


def oldest(ids: I64, keys: I64, cap: int) -> tuple[I64, I64]:
    """``(ids, keys)`` ordered by key then id, at most the ``cap`` oldest of each key (``cap``
    0: all), as one lookup of both tiers finds them."""
    order = np.lexsort((ids, keys))
    ids, keys = ids[order], keys[order]
    if cap and len(keys):
        keep = np.arange(len(keys)) - np.searchsorted(keys, keys, side="left") < cap
        ids, keys = ids[keep], keys[keep]
    return ids, keys
