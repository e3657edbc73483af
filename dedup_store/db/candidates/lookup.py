"""Candidate pairs: documents that share a band, block or sample key.

A batch looks up every key in one statement before its rows are written, so it only meets older
documents (at most ``hot_limit`` + 1 of a key, oldest first), and pairs its new documents with
them and with each other in numpy. Hot keys are split by secondary keys (:mod:`.hot`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64, ranges, stable_order
from dedup_store.core.fingerprint import FingerprintBatch
from dedup_store.core.mixing import mix64
from dedup_store.core.params import FingerprintParams
from dedup_store.db.rows import key_rows
from dedup_store.db.schema import encoding
from dedup_store.db.schema.encoding import BAND, BLOCK, SAMPLE, array_literal, slot_salt
from dedup_store.db.schema.names import qualified
from dedup_store.db.server.array_params import Int4Array, Int8Array

Pairs: TypeAlias = tuple[I64, I64, npt.NDArray[np.int8]]
"""Pairs ``(a, b)`` of documents and the kind of the key that found each."""

Reach: TypeAlias = Connection | Callable[[], Connection]
"""A connection, or how to get it when a step needs SQL (a bulk load's
:class:`~dedup_store.db.candidates.lane.Lane` hands it over once the work before it has run)."""


def connection_of(reach: Reach) -> Connection:
    """The connection of ``reach``."""
    return reach if isinstance(reach, Connection) else reach()


def salts_sql(params: FingerprintParams) -> str:
    """SQL: the rows ``(kind, slot, salt)`` of every band and block slot of ``params``
    (:func:`~dedup_store.db.schema.encoding.slot_salt`), as literals."""
    arrays = salt_arrays(params.band_key_count, params.block_key_count)
    return f"SELECT * FROM unnest({arrays}) AS salts(kind, slot, salt)"


@functools.lru_cache(maxsize=32)
def salt_arrays(band_count: int, block_count: int) -> str:
    """SQL: three array literals, the kind, slot and salt of band slots ``1..band_count`` and
    block slots ``1..block_count``, in that order."""
    kinds = array_literal([BAND] * band_count + [BLOCK] * block_count)
    numbers = array_literal([*range(1, band_count + 1), *range(1, block_count + 1)])
    salts = array_literal(encoding.slot_salts(band_count, block_count).tolist())
    return f"'{kinds}'::smallint[], '{numbers}'::smallint[], '{salts}'::bigint[]"


def slot_probe(s: str, tagged: str, limit: int = 0) -> str:
    """SQL: the ``doc_id`` of at most ``limit`` (0: all) stored documents owning the tagged key
    ``tagged`` (SQL), oldest first, by one index scan per tier (for a ``CROSS JOIN LATERAL``)."""
    bound = f" LIMIT {int(limit)}" if limit else ""
    tiers = [
        f"(SELECT k.doc_id FROM {s}.{table} k WHERE k.key = {tagged} ORDER BY k.doc_id{bound})"
        for table in key_rows.TABLES
    ]
    return f"SELECT t.doc_id FROM ({' UNION ALL '.join(tiers)}) t{bound}"


def window(s: str, hot_limit: int, kind: str = "n.kind", slot: str = "n.slot") -> str:
    """SQL: ``hot_limit`` documents (``doc_id``) of the secondary key ``n.key`` of a slot
    (``kind`` and ``slot`` are SQL expressions): those from a pivot derived from the key,
    wrapping around, so that the secondary keys of one document lead to different parts of a
    large bucket."""
    where = f"FROM {s}.secondary_keys k WHERE k.kind = {kind} AND k.slot = {slot} AND k.key = n.key"
    pivot = (
        f"(hashint8(n.key)::bigint & 2147483647) % "
        f"(coalesce((SELECT max(d.id) FROM {s}.documents d), 0) + 1)"
    )
    limit = int(hot_limit)
    return (
        "SELECT w.doc_id FROM ("
        f"(SELECT 0 AS part, k.doc_id {where} AND k.doc_id >= {pivot} "
        f"ORDER BY k.doc_id LIMIT {limit}) UNION ALL "
        f"(SELECT 1 AS part, k.doc_id {where} AND k.doc_id < {pivot} "
        f"ORDER BY k.doc_id LIMIT {limit})"
        f") w ORDER BY w.part, w.doc_id LIMIT {limit}"
    )


@dataclasses.dataclass(frozen=True)
class KeyGroup:
    """The new documents' keys of one kind and slot (``slot`` 0 for sample keys)."""

    kind: int
    slot: int
    keys: I64
    docs: I64

    @functools.cached_property
    def order(self) -> I64:
        """Positions of the keys sorted by key, then by document."""
        if np.all(self.docs[1:] >= self.docs[:-1]):  # as a batch's groups are: one sort
            return stable_order(self.keys)
        return np.lexsort((self.docs, self.keys))

    @functools.cached_property
    def uniques(self) -> I64:
        """The distinct keys, sorted."""
        return self._runs[0]

    @functools.cached_property
    def counts(self) -> I64:
        """How many of the group's documents own each of :attr:`uniques`."""
        return self._runs[1]

    @functools.cached_property
    def _runs(self) -> tuple[I64, I64]:
        ordered = self.keys[self.order]
        if len(ordered) == 0:
            return ordered, np.empty(0, dtype=np.int64)
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        return ordered[starts], np.diff(np.append(starts, len(ordered)))


def key_groups(batch: FingerprintBatch, rows: I64, ids: I64) -> list[KeyGroup]:
    """One group per band slot, per block slot, and one of all sample keys."""
    groups = []
    for kind, matrix in ((BAND, batch.band_keys[rows]), (BLOCK, batch.block_keys[rows])):
        groups += [KeyGroup(kind, j + 1, matrix[:, j], ids) for j in range(matrix.shape[1])]
    samples, sample_docs = encoding.sample_columns(batch, rows, ids)
    groups.append(KeyGroup(SAMPLE, 0, samples.astype(np.int64), sample_docs))
    return groups


@dataclasses.dataclass(frozen=True)
class Candidates:
    """Candidate pairs ``a < b`` (``b`` new): whether only SimHash blocks found them, and
    whether an excerpt key did."""

    a: I64
    b: I64
    block_only: npt.NDArray[np.bool_]
    sampled: npt.NDArray[np.bool_]

    def subset(self, keep: npt.NDArray[np.bool_]) -> Candidates:
        """The pairs where ``keep`` is true."""
        return Candidates(self.a[keep], self.b[keep], self.block_only[keep], self.sampled[keep])

    def parameters(self) -> dict[str, Any]:
        """The pairs as binary arrays for ``unnest(:cand_a, :cand_b, :cand_block_only,
        :cand_sampled)``."""
        return {
            "cand_a": Int8Array(self.a),
            "cand_b": Int8Array(self.b),
            "cand_block_only": Int4Array(self.block_only.astype(np.int32)),
            "cand_sampled": Int4Array(self.sampled.astype(np.int32)),
        }


@dataclasses.dataclass(frozen=True)
class Found:
    """What :func:`find_keys` found per group.

    Attributes:
        ids, keys: the stored documents found and the key each was found by (at most
            ``hot_limit + 1`` per band or block key, oldest first).
        uniques: the group's distinct keys.
        hot: those of its keys recorded in ``hot_keys`` (when asked for).
    """

    ids: list[I64]
    keys: list[I64]
    uniques: list[I64]
    hot: list[I64]


@dataclasses.dataclass(frozen=True)
class KeyQuery:
    """The keys a batch looks up: its key groups, the hot-key limit, and the kinds whose hot
    keys are wanted (those that are rekeyed)."""

    groups: list[KeyGroup]
    hot_limit: int
    hot_kinds: frozenset[int] = frozenset()


def find_keys(conn: Connection, schema: str, query: KeyQuery) -> Found:
    """Look up every key of every group of ``query`` in one statement (and which keys of the
    groups of its ``hot_kinds`` are hot)."""
    groups = query.groups
    statement, parameters, slotted = lookup_statement(schema, query)
    empty = np.empty(0, dtype=np.int64)
    ids, keys, hot = [empty] * len(groups), [empty] * len(groups), [empty] * len(groups)
    for number, found_ids, found_keys in conn.execute(text(statement), parameters):
        if number < 0:
            hot[-number - 1] = np.array(found_keys, dtype=np.int64)
        elif number < len(groups):
            ids[number] = np.array(found_ids, dtype=np.int64)
            keys[number] = np.array(found_keys, dtype=np.int64)
        elif slotted is not None:  # the band and block keys, found by their tagged keys
            for group, (group_ids, group_keys) in slotted.split(found_ids, found_keys).items():
                ids[group], keys[group] = group_ids, group_keys
    return Found(ids, keys, [group.uniques for group in groups], hot)


@dataclasses.dataclass(frozen=True)
class SlottedKeys:
    """The band and block keys of a batch's lookup, sorted by their tagged keys (as the index
    holds them): per tagged key, its group and its key."""

    tagged: I64
    groups: I64
    keys: I64

    @classmethod
    def of(cls, slotted: list[tuple[int, KeyGroup]]) -> SlottedKeys:
        """The keys of the groups ``(number, group)``, each group's distinct keys."""
        numbers = np.concatenate([np.full(len(g.uniques), n, dtype=np.int64) for n, g in slotted])
        keys = np.concatenate([g.uniques for _, g in slotted])
        salts = [np.full(len(g.uniques), slot_salt(g.kind, g.slot), np.int64) for _, g in slotted]
        tagged = np.bitwise_xor(keys, np.concatenate(salts)).astype(np.int64, copy=False)
        order = np.argsort(tagged, kind="stable")
        return cls(tagged[order], numbers[order], keys[order])

    def split(self, ids: list[int], tagged: list[int]) -> dict[int, tuple[I64, I64]]:
        """``{group: (ids, keys)}`` of documents ``ids`` found by ``tagged`` keys."""
        at = np.searchsorted(self.tagged, np.array(tagged, dtype=np.int64))
        groups, keys, found = self.groups[at], self.keys[at], np.array(ids, dtype=np.int64)
        return {int(g): (found[groups == g], keys[groups == g]) for g in np.unique(groups)}


def found_pairs(groups: list[KeyGroup], found: Found, hot_limit: int) -> list[Pairs]:
    """The pairs of every group's stored documents found and of its new documents (the
    ``hot_limit`` oldest stored documents of a band or block key), for :func:`merge`."""
    parts = []
    for number, group in enumerate(groups):
        found_ids, found_keys = found.ids[number], found.keys[number]
        if hot_limit:
            group, found_ids, found_keys = _without_hot(
                group, found.uniques[number], found_ids, found_keys, hot_limit
            )
        parts += group_pairs(group, found_ids, found_keys, hot_limit)
    return parts


def group_pairs(
    group: KeyGroup, found_ids: I64, found_keys: I64, hot_limit: int, spread: bool = False
) -> list[Pairs]:
    """The pairs of the stored documents found with the group's new documents
    (:func:`join_found`) and of its new documents (:func:`pairs_inside`)."""
    inside = pairs_inside(group, hot_limit, spread)
    return [
        (a, b, np.full(len(a), group.kind, dtype=np.int8))
        for a, b in (join_found(group, found_ids, found_keys), inside)
    ]


def merge(parts: list[Pairs]) -> Candidates:
    """One candidate per distinct pair ``(a, b)`` of ``parts`` (``a != b``): ``block_only``
    when every finding of it was a block key, ``sampled`` when one was an excerpt key."""
    empty = np.empty(0, dtype=np.int64)
    a, b, kind = (np.concatenate(c) for c in zip(*parts, strict=True)) if parts else (empty,) * 3
    keep = a != b
    a, b, kind = a[keep], b[keep], kind[keep]
    if len(a) == 0:
        return Candidates(a, b, np.empty(0, dtype=bool), np.empty(0, dtype=bool))
    order = np.lexsort((b, a))
    a, b, kind = a[order], b[order], kind[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    starts = np.flatnonzero(first)
    return Candidates(
        a[starts],
        b[starts],
        np.logical_and.reduceat(kind == BLOCK, starts),
        np.logical_or.reduceat(kind == SAMPLE, starts),
    )


def stored_counts(keys: I64, found_keys: I64) -> I64:
    """How many stored documents were found per key of the sorted ``keys``."""
    return np.bincount(np.searchsorted(keys, found_keys), minlength=len(keys)).astype(np.int64)


def lookup_statement(
    schema: str, query: KeyQuery
) -> tuple[str, dict[str, Any], SlottedKeys | None]:
    """One statement looking up every key of every group of ``query``, and which keys of the
    groups of its ``hot_kinds`` are hot, with its parameters and its band and block keys. Rows
    ``(group, ids, keys)``: a group's hot keys as group ``-group - 1``, the band and block keys
    found as group ``len(groups)`` (:meth:`SlottedKeys.split`)."""
    s, groups, hot_limit = qualified(schema), query.groups, query.hot_limit
    branches: list[str] = []
    parameters: dict[str, Any] = {}
    slotted: list[tuple[int, KeyGroup]] = []
    for number, group in enumerate(groups):
        if len(group.uniques) == 0:
            continue  # nothing to find
        if group.kind != SAMPLE:
            slotted.append((number, group))
            continue
        name = f"g{number}"
        parameters[name] = Int4Array(group.uniques.astype(np.int32))  # 32-bit keys
        # one bounded probe per key: a hot excerpt key must not cost its whole posting list
        probe = f"SELECT k.doc_id AS id FROM {s}.sample_keys k WHERE k.key = n.key"
        limit = f"LIMIT {int(hot_limit) + 1}" if hot_limit else ""
        branches.append(
            f"SELECT {number} AS grp, f.id, n.key::bigint AS key "
            f"FROM unnest(CAST(:{name} AS integer[])) AS n(key) "
            f"CROSS JOIN LATERAL (SELECT p.id FROM ({probe}) p {limit}) f"
        )
    keys = SlottedKeys.of(slotted) if slotted else None
    if keys is not None:
        branches.append(_slotted_branch(s, keys, len(groups), hot_limit, parameters))
        hot = [(n, g) for n, g in slotted if g.kind in query.hot_kinds]
        branches += [_hot_branch(s, hot, parameters)] if hot else []
    if not branches:  # no keys at all
        branches.append("SELECT 0 AS grp, 0::bigint AS id, 0::bigint AS key WHERE false")
    statement = (
        ("WITH st AS MATERIALIZED (SELECT CAST(:slot_tagged AS bigint[]) AS keys) " if keys else "")
        + "SELECT grp, array_agg(id), array_agg(key) "
        f"FROM ({' UNION ALL '.join(branches)}) found GROUP BY grp"
    )
    return statement, parameters, keys


def _slotted_branch(
    s: str, keys: SlottedKeys, number: int, hot_limit: int, parameters: dict[str, Any]
) -> str:
    """The branch of :func:`lookup_statement` (as group ``number``) for its band and block keys:
    one ``= ANY`` scan of each tier's index, each key yielding its ``hot_limit + 1`` oldest
    documents (one more, to tell a key that has more); its parameter goes into ``parameters``.
    The keys reach the planner through the CTE ``st``, without statistics (as constants,
    thousands of keys were taken for a third of the table).
    """
    parameters["slot_tagged"] = Int8Array(keys.tagged)
    tiers = " UNION ALL ".join(
        f"SELECT k.doc_id, k.key FROM {s}.{table} k "
        "WHERE k.key = ANY(CAST((SELECT keys FROM st) AS bigint[]))"
        for table in key_rows.TABLES
    )
    found = f"SELECT p.doc_id AS id, p.key FROM ({tiers}) p"
    if hot_limit:
        found = (
            "SELECT id, key FROM (SELECT p.doc_id AS id, p.key, "
            "row_number() OVER (PARTITION BY p.key ORDER BY p.doc_id) AS rank "
            f"FROM ({tiers}) p) r WHERE r.rank <= {int(hot_limit) + 1}"
        )
    return f"SELECT {int(number)} AS grp, f.id, f.key FROM ({found}) f"


def _hot_branch(s: str, hot: list[tuple[int, KeyGroup]], parameters: dict[str, Any]) -> str:
    """The branch of :func:`lookup_statement` of the keys of the groups ``hot`` found in
    ``hot_keys``; its parameters (binary arrays, a batch's keys being hundreds of thousands)
    are added to ``parameters``."""
    counts = [len(g.uniques) for _, g in hot]
    for name, values in (
        ("hot_group", [n for n, _ in hot]),
        ("hot_kind", [g.kind for _, g in hot]),
        ("hot_slot", [g.slot for _, g in hot]),
    ):
        parameters[name] = Int4Array(np.repeat(np.array(values, dtype=np.int32), counts))
    parameters["hot_key"] = Int8Array(np.concatenate([g.uniques for _, g in hot]))
    return (
        "SELECT -n.grp - 1 AS grp, 0::bigint AS id, h.key "
        "FROM unnest(CAST(:hot_group AS integer[]), CAST(:hot_kind AS smallint[]), "
        "CAST(:hot_slot AS smallint[]), CAST(:hot_key AS bigint[])) AS n(grp, kind, slot, key) "
        f"JOIN {s}.hot_keys h ON h.kind = n.kind AND h.slot = n.slot AND h.key = n.key"
    )


def _without_hot(
    group: KeyGroup, keys: I64, found_ids: I64, found_keys: I64, hot_limit: int
) -> tuple[KeyGroup, I64, I64]:
    """Drop hot excerpt keys; keep the ``hot_limit`` oldest documents of a band or block key."""
    hot = keys[stored_counts(keys, found_keys) + group.counts > hot_limit]
    if group.kind == SAMPLE:
        if len(hot) == 0:
            return group, found_ids, found_keys
        cold_found = ~np.isin(found_keys, hot)
        cold_owned = ~np.isin(group.keys, hot)
        group = dataclasses.replace(group, keys=group.keys[cold_owned], docs=group.docs[cold_owned])
        return group, found_ids[cold_found], found_keys[cold_found]
    # a band or block key keeps its hot_limit oldest documents (the lookup read one more)
    before, after = found_keys[:-1], found_keys[1:]
    if not np.all((after > before) | ((after == before) & (found_ids[1:] > found_ids[:-1]))):
        order = np.lexsort((found_ids, found_keys))
        found_ids, found_keys = found_ids[order], found_keys[order]
    starts = np.searchsorted(found_keys, found_keys, side="left")
    keep = np.arange(len(found_keys)) - starts < hot_limit
    return group, found_ids[keep], found_keys[keep]


def join_found(group: KeyGroup, found_ids: I64, found_keys: I64) -> tuple[I64, I64]:
    """Pair each stored document found with every new document owning the key it was found by."""
    order = group.order
    keys = group.keys[order]
    lo = np.searchsorted(keys, found_keys, side="left")
    hi = np.searchsorted(keys, found_keys, side="right")
    return np.repeat(found_ids, hi - lo), group.docs[order][ranges(lo, hi)]


def pairs_inside(group: KeyGroup, hot_limit: int = 0, spread: bool = False) -> tuple[I64, I64]:
    """Pairs of new documents with an equal key (older first).

    With ``hot_limit``, each document is paired with at most ``hot_limit`` of those before it:
    the ones just before it, or with ``spread`` (as :func:`window`) those from a pivot derived
    from the key, wrapping around.
    """
    order = group.order
    keys, docs = group.keys[order], group.docs[order]
    same = keys[1:] == keys[:-1]
    if not same.any():
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    position = np.arange(len(keys), dtype=np.int64)
    run_start = np.maximum.accumulate(np.where(np.concatenate([[False], same]), 0, position))
    if not spread:  # the run of each document's key up to it, the last hot_limit
        first = np.maximum(run_start, position - hot_limit) if hot_limit else run_start
        return docs[ranges(first, position)], np.repeat(docs, position - first)
    before = position - run_start
    count = np.minimum(before, hot_limit) if hot_limit else before
    pivot = np.where(count < before, key_pivots(keys) % np.maximum(before, 1), 0)
    newer = np.repeat(position, count)
    step = ranges(np.zeros_like(count), count)
    older = run_start[newer] + (pivot[newer] + step) % before[newer]
    return docs[older], docs[newer]


def key_pivots(keys: I64) -> I64:
    """A non-negative pseudo-random number per key (to pick a window of its documents)."""
    return (mix64(keys.view(np.uint64)) >> np.uint64(33)).astype(np.int64)


def key_lookups(s: str, band_count: int, block_count: int, hot_limit: int) -> list[str]:
    """The probe of every band and block key of the query (parameter ``slot_keys``: its band
    keys, then its block keys) by :func:`slot_probe`, each yielding its ``hot_limit`` oldest
    documents (as a batch keeps); rows ``(a, block, sample, kind, slot, pkey)``."""
    return [
        f"SELECT f.doc_id AS a, n.kind = {BLOCK} AS block, false AS sample, n.kind, n.slot, "
        "n.key AS pkey "
        f"FROM unnest({salt_arrays(band_count, block_count)}, CAST(:slot_keys AS bigint[])) "
        "AS n(kind, slot, salt, key) "
        f"CROSS JOIN LATERAL ({slot_probe(s, 'n.key # n.salt', hot_limit)}) f"
    ]


def sample_lookup(s: str, hot_limit: int) -> str:
    """The excerpt-key probes of the query (parameter ``sk``); hot keys are ignored."""
    if not hot_limit:
        return f"""SELECT o.doc_id AS a, false AS block, true AS sample
                   FROM unnest(CAST(:sk AS integer[])) AS n(key)
                   CROSS JOIN LATERAL (SELECT k.doc_id FROM {s}.sample_keys k
                                       WHERE k.key = n.key OFFSET 0) o"""
    # one count over the rows of every key (a count per key costs a node per key)
    return f"""SELECT o.a, false AS block, true AS sample FROM (
                   SELECT l.doc_id AS a, count(*) OVER (PARTITION BY n.key) AS found
                   FROM (SELECT DISTINCT key FROM unnest(CAST(:sk AS integer[])) AS u(key)) n
                   CROSS JOIN LATERAL (SELECT k.doc_id FROM {s}.sample_keys k
                                       WHERE k.key = n.key LIMIT {int(hot_limit) + 1}) l
               ) o
               WHERE o.found < {int(hot_limit)}"""
