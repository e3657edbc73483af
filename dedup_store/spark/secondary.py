"""Hot band and block keys of a Spark load, re-keyed as the local ingest re-keys them (pure
Python/numpy, run on the executors).

The batch writer (:func:`dedup_store.db.candidates.hot.find_candidates`) makes a band or block key
hot in the first batch whose documents and the stored ones owning the key are more than
``hot_key_limit``; from then on every owner of the key has secondary keys for its slot
(:mod:`dedup_store.core.rekey`), the stored owners' written when the key became hot. A new
owner's lookup of a secondary key yields ``hot_key_limit`` documents of it stored before its
batch, from a pivot derived from the key and the largest stored id
(:func:`dedup_store.db.candidates.hot.window`), and pairs it with ``hot_key_limit`` owners of the
key before it in its batch (:func:`dedup_store.db.candidates.lookup.pairs_inside` with ``spread``).

Here every owner carries its ``batch`` (-1: stored before the load), the batch its key became
hot in (``hot``, -1: before the load) and, for a new document, the largest id stored before its
batch (``top``), so one group of a secondary key's owners gives the pairs every batch found.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from dedup_store.core import rekey
from dedup_store.core.mixing import hashint8
from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates.lookup import key_pivots

__all__ = ["hashint8", "hot_batch", "owner_keys", "pairs_of_secondary", "window_pairs"]

#: Columns of an owner of a hot key, with the fingerprint values its secondary keys need.
OWNER_SCHEMA = "kind tinyint, slot int, key bigint, id bigint, batch bigint, hot bigint, top bigint"
#: Rows of ``secondary_keys`` with what a lookup of them needs.
SECONDARY_SCHEMA = (
    "kind tinyint, slot int, skey bigint, id bigint, batch bigint, hot bigint, top bigint"
)


def hot_batch(members: list[tuple[int, int]], hot_limit: int, was_hot: bool) -> int | None:
    """The batch in which a band or block key owned by ``(id, batch)`` members became hot
    (-1: before the load), or ``None`` if it stays cold."""
    if was_hot:
        return -1
    counts: dict[int, int] = {}
    for _, batch in members:
        counts[batch] = counts.get(batch, 0) + 1
    total = counts.pop(-1, 0)
    for batch in sorted(counts):
        total += counts[batch]
        if total > hot_limit:
            return batch
    return None


def owner_keys(
    batches: Iterable[pa.RecordBatch], settings: dict[str, object]
) -> Iterator[pa.RecordBatch]:
    """The secondary keys of owners of hot keys (:data:`OWNER_SCHEMA` columns with
    ``signature array<int>`` and ``simhash bigint``): one row of :data:`SECONDARY_SCHEMA` per
    owner and secondary key."""
    params = FingerprintParams.from_dict(settings)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        kinds = np.asarray(batch.column("kind").to_numpy(), dtype=np.int64)
        slots = np.asarray(batch.column("slot").to_numpy(), dtype=np.int64)
        for kind, slot in sorted(set(zip(kinds.tolist(), slots.tolist(), strict=True))):
            chosen = batch.filter(pa.array((kinds == kind) & (slots == slot)))
            yield _slot_keys(chosen, kind, slot, params)


def _slot_keys(
    batch: pa.RecordBatch, kind: int, slot: int, params: FingerprintParams
) -> pa.RecordBatch:
    """The secondary keys of one slot's owners in ``batch``."""
    n = batch.num_rows
    primary = np.asarray(batch.column("key").to_numpy(), dtype=np.int64)
    signatures = simhashes = None
    if kind == rekey.BAND:
        flat = batch.column("signature").flatten().to_numpy(zero_copy_only=False)
        signatures = np.asarray(flat, dtype=np.int32).reshape(n, -1).view(np.uint32)
    else:
        simhashes = np.asarray(batch.column("simhash").to_numpy(), dtype=np.int64).view(np.uint64)
    keys = rekey.secondary_keys(params, kind, slot, primary, signatures, simhashes)
    count = keys.shape[1]

    def repeated(name: str, dtype: pa.DataType) -> pa.Array:
        values = np.asarray(batch.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)
        return pa.array(np.repeat(values, count), dtype)

    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n * count, kind), pa.int8()),
            pa.array(np.full(n * count, slot), pa.int32()),
            pa.array(keys.reshape(-1), pa.int64()),
            repeated("id", pa.int64()),
            repeated("batch", pa.int64()),
            repeated("hot", pa.int64()),
            repeated("top", pa.int64()),
        ],
        names=["kind", "slot", "skey", "id", "batch", "hot", "top"],
    )


def window_pairs(
    skey: int, owners: list[tuple[int, int, int, int]], hot_limit: int
) -> tuple[list[int], list[int]]:
    """The (older, newer) pairs one secondary key yields over a load.

    Args:
        skey: the secondary key.
        owners: ``(id, batch, hot, top)`` of the documents owning it (ids ascend with
            batches).
        hot_limit: the store's ``hot_key_limit``.
    """
    table = np.array(sorted(owners), dtype=np.int64).reshape(-1, 4)
    ids, batches, hots, tops = table.T
    hot_so_far = np.maximum.accumulate(hots) if len(hots) else hots
    key = np.array([skey], dtype=np.int64)
    in_store, inside = int(hashint8(key)[0]), int(key_pivots(key)[0])
    looking = np.flatnonzero((batches >= 0) & (hots <= batches))
    a: list[int] = []
    b: list[int] = []
    for batch in np.unique(batches[looking]).tolist():
        docs = ids[looking[batches[looking] == batch]].tolist()
        end = int(np.searchsorted(batches, batch))  # documents of earlier batches
        stored = ids[:end]
        if end and hot_so_far[end - 1] > batch:  # some had no secondary keys yet
            stored = stored[hots[:end] <= batch]
        pivot = in_store % (int(tops[looking[batches[looking] == batch][0]]) + 1)
        at = int(np.searchsorted(stored, pivot))
        found = np.concatenate([stored[at : at + hot_limit], stored[:at]])[:hot_limit].tolist()
        for i, newer in enumerate(docs):
            if i <= hot_limit:
                older = docs[:i]
            else:
                first = inside % i
                older = (docs[first:i] + docs[:first])[:hot_limit]
            a += found + older
            b += [newer] * (len(found) + len(older))
    return a, b


def pairs_of_secondary(
    batches: Iterable[pa.RecordBatch], hot_limit: int
) -> Iterator[pa.RecordBatch]:
    """``(a, b, kind)`` of every secondary group row ``(kind, skey, ids, batches, hots,
    tops)``."""
    for batch in batches:
        a: list[int] = []
        b: list[int] = []
        kinds: list[int] = []
        columns = [batch.column(c).to_pylist() for c in ("kind", "skey", "ids", "batches")]
        extra = [batch.column(c).to_pylist() for c in ("hots", "tops")]
        for (kind, skey, ids, numbers), (hots, tops) in zip(
            zip(*columns, strict=True), zip(*extra, strict=True), strict=True
        ):
            owners = list(zip(ids, numbers, hots, tops, strict=True))
            older, newer = window_pairs(skey, owners, hot_limit)
            a += older
            b += newer
            kinds += [kind] * len(older)
        yield pa.RecordBatch.from_arrays(
            [pa.array(a, pa.int64()), pa.array(b, pa.int64()), pa.array(kinds, pa.int8())],
            names=["a", "b", "kind"],
        )
