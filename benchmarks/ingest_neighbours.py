"""What the SimHash block keys of an appended document meet, against the same documents into an
empty store: the part of an append's cost that grows with the store.

Block keys find every pair of documents within ``simhash_k`` bits (the pigeonhole rule), and
with it every pair that agrees on the ``blocks - k`` blocks of one key. Where the bits of the
SimHashes are spread (about 32 of 64 differ between unrelated documents), few unrelated
documents share a key. Where most bits lean the same way for every document (long documents of
one vocabulary, their words weighed by their counts), a key is shared by unrelated documents,
more of them the larger the store: each is looked up, and dropped once its SimHash is known to
be too far (:func:`dedup_store.db.candidates.hot.find_candidates`).

This module measures that from the stored SimHashes alone, in numpy: per document, how many
documents stored before it share one of its block keys (summed over the slots, as the lookups
return them before any cap), for the appended documents and for the same number of documents at
the start of the store (an empty store's first ones); the keys that more than
``hot_key_limit`` documents share; and the mean Hamming distance between random documents.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import sqlalchemy as sa

from dedup_store.core import FingerprintParams
from dedup_store.core.arrays import I64, U64
from dedup_store.core.fingerprint import document_block_keys
from dedup_store.db.schema.names import qualified

#: Random pairs of documents whose Hamming distance is averaged.
SPREAD_PAIRS = 100_000


@dataclasses.dataclass
class Neighbours:
    """What block keys meet in a store of ``documents`` first documents (exact copies have no
    keys of their own).

    Attributes:
        documents: first documents in the store.
        spread: mean Hamming distance (bits) between random pairs of them.
        start, appended: per document, the earlier documents sharing one of its block keys,
            summed over the slots: for the first ``count`` documents, and for the last.
        start_read, appended_read: the same with at most ``hot_key_limit + 1`` documents a
            key, as the store's lookups read them.
        hot_start, hot_appended: block keys shared by more than ``hot_key_limit`` documents
            after the first ``count`` documents, and after all of them.
        count: documents in each of the two spans.
    """

    documents: int
    spread: float
    start: float
    appended: float
    start_read: float
    appended_read: float
    hot_start: int
    hot_appended: int
    count: int


def stored_simhashes(engine: sa.Engine, schema: str) -> tuple[I64, U64, I64]:
    """The ids, SimHashes and shingle counts of the store's first documents, in id order."""
    documents = qualified(schema, "documents")
    with engine.connect() as conn:
        ids, values, counts = conn.execute(
            sa.text(
                "SELECT coalesce(array_agg(id ORDER BY id), '{}'), "
                "coalesce(array_agg(simhash ORDER BY id), '{}'), "
                f"coalesce(array_agg(shingle_count ORDER BY id), '{{}}') FROM {documents} "
                "WHERE exact_of IS NULL"
            )
        ).one()
    simhashes = np.array(values, dtype=np.int64).view(np.uint64)
    return np.array(ids, dtype=np.int64), simhashes, np.array(counts, dtype=np.int64)


def neighbours(
    ids: I64,
    simhashes: U64,
    last_loaded: int,
    params: FingerprintParams,
    seed: int = 1,
    shingle_counts: I64 | None = None,
) -> Neighbours:
    """:class:`Neighbours` of the store whose first documents are ``ids`` (ascending) with
    ``simhashes`` (and ``shingle_counts``; ``None``: none too long for block keys), those after
    ``last_loaded`` appended."""
    appended = int(len(ids) - np.searchsorted(ids, last_loaded, side="right"))
    count = min(appended, len(ids) - appended)
    if shingle_counts is None:
        shingle_counts = np.zeros(len(ids), dtype=np.int64)
    keys = document_block_keys(simhashes, shingle_counts, params)
    limit = params.hot_key_limit
    start = np.zeros((2, count), dtype=np.int64)
    late = np.zeros((2, count), dtype=np.int64)
    hot_start = hot_appended = 0
    for slot in range(keys.shape[1]):
        for sums, before in (
            (start, earlier_sharing(keys[:count, slot])),
            (late, earlier_sharing(keys[:, slot])[len(keys) - count :]),
        ):
            sums[0] += before
            sums[1] += np.minimum(before, limit + 1)
        hot_start += hot_keys(keys[:count, slot], limit)
        hot_appended += hot_keys(keys[:, slot], limit)
    start_mean, start_read = start.mean(axis=1).tolist() if count else (0.0, 0.0)
    late_mean, late_read = late.mean(axis=1).tolist() if count else (0.0, 0.0)
    return Neighbours(
        documents=len(simhashes),
        spread=spread(simhashes, seed),
        start=start_mean,
        appended=late_mean,
        start_read=start_read,
        appended_read=late_read,
        hot_start=hot_start,
        hot_appended=hot_appended,
        count=count,
    )


def earlier_sharing(keys: I64) -> I64:
    """Per position, how many positions before it hold the same key."""
    order = np.argsort(keys, kind="stable")  # equal keys stay in position order
    ordered = keys[order]
    index = np.arange(len(keys), dtype=np.int64)
    first = np.concatenate([[True], ordered[1:] != ordered[:-1]]) if len(keys) else index == 0
    run_start = np.maximum.accumulate(np.where(first, index, 0))
    before = np.empty(len(keys), dtype=np.int64)
    before[order] = index - run_start
    return before


def hot_keys(keys: I64, limit: int) -> int:
    """How many distinct keys more than ``limit`` positions hold."""
    _, counts = np.unique(keys, return_counts=True)
    return int((counts > limit).sum())


def spread(simhashes: U64, seed: int = 1) -> float:
    """Mean Hamming distance between :data:`SPREAD_PAIRS` random pairs of ``simhashes``."""
    if len(simhashes) < 2:
        return 0.0
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(simhashes), SPREAD_PAIRS)
    b = rng.integers(0, len(simhashes), SPREAD_PAIRS)
    distinct = a != b
    xor = (simhashes[a[distinct]] ^ simhashes[b[distinct]]).view(np.uint8)
    return float(np.unpackbits(xor).sum() / distinct.sum())


def print_neighbours(found: Neighbours, params: FingerprintParams) -> None:
    """The figures of :func:`neighbours`, as the ingest benchmark prints them."""
    print(
        f"\n== what the SimHash block keys meet ({found.documents:,} first documents, "
        f"simhash_k {params.simhash_k} of {params.simhash_blocks} blocks) =="
    )
    print(
        f"mean Hamming distance of random pairs: {found.spread:.1f} bits of 64 (32 when the "
        "bits are independent)"
    )
    print(
        f"earlier documents sharing a block key, per document (summed over the slots): the "
        f"first {found.count:,} {found.start:.1f}, the last {found.count:,} {found.appended:.1f} "
        f"(at most {params.hot_key_limit + 1} a key, as the lookups read them: "
        f"{found.start_read:.1f} and {found.appended_read:.1f})"
    )
    print(
        f"keys of more than {params.hot_key_limit} documents: {found.hot_start:,} after the "
        f"first {found.count:,}, {found.hot_appended:,} after all"
    )
