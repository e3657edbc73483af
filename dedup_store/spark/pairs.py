"""Candidate pairs from groups of documents sharing a key, and their scores (pure Python/numpy,
run on the executors).

The rules are those of the store's batch writer (:mod:`dedup_store.db.candidates`,
:func:`dedup_store.db.matches.scoring.store_edges`), stated for a whole load at once: each document
carries the number of the local ingest batch it would belong to (``batch``; stored documents
have ``-1``), so a load gives the pairs a local ingest of the same input in the same batches
gives.

* A sample (excerpt) key shared by more than ``hot_limit`` documents up to and including the
  newer document's batch is ignored for that document.
* A band or block key pairs a document with the ``hot_limit`` oldest documents of earlier
  batches sharing it, and with the ``hot_limit`` documents just before it in its own batch.
* A hot band or block key also pairs its owners through their secondary keys
  (:mod:`dedup_store.spark.secondary`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from dedup_store.core.arrays import I64
from dedup_store.core.matchrule import METHODS, NO_MATCH, decide
from dedup_store.core.overlap import intersection_sizes
from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import hamming_many
from dedup_store.db.schema.encoding import BAND, BLOCK, SAMPLE
from dedup_store.spark import secondary

__all__ = ["BAND", "BLOCK", "SAMPLE", "group_pairs", "score_batch"]


def group_pairs(
    kind: int, ids: Sequence[int], batches: Sequence[int], hot_limit: int
) -> tuple[list[int], list[int]]:
    """The (older, newer) pairs one key yields; the newer one is never stored (batch >= 0).

    Args:
        kind: :data:`BAND`, :data:`BLOCK` or :data:`SAMPLE`.
        ids: the documents owning the key (a document may own a sample key more than once).
        batches: each one's batch number (-1: stored before the load).
        hot_limit: the store's ``hot_key_limit`` (0: no limit).
    """
    members = sorted(zip(ids, batches, strict=True))
    a: list[int] = []
    b: list[int] = []
    if kind == SAMPLE:
        count_through: dict[int, int] = {}
        for _, batch in members:
            count_through[batch] = count_through.get(batch, 0) + 1
        running = 0
        for batch in sorted(count_through):
            running += count_through[batch]
            count_through[batch] = running
        for i, (newer, batch) in enumerate(members):
            if batch < 0 or (hot_limit and count_through[batch] > hot_limit):
                continue
            for older, _ in members[:i]:
                if older != newer:
                    a.append(older)
                    b.append(newer)
        return a, b
    by_batch: dict[int, list[int]] = {}
    for doc, batch in members:
        by_batch.setdefault(batch, []).append(doc)
    oldest = members[:hot_limit] if hot_limit else members
    for batch, docs in by_batch.items():
        if batch < 0:
            continue
        earlier = [doc for doc, other in oldest if other < batch]
        for i, newer in enumerate(docs):
            inside = docs[max(0, i - hot_limit) : i] if hot_limit else docs[:i]
            for older in (*earlier, *inside):
                a.append(older)
                b.append(newer)
    return a, b


#: What :func:`pairs_of_sorted` yields: pairs ``(a, b, kind)`` with ``hot`` null, and owners
#: of hot band and block keys ``(a: id, b: batch, kind, slot, key, hot)``.
GROUP_OUTPUT = "a bigint, b bigint, kind tinyint, slot int, key bigint, hot bigint"


def pairs_of_sorted(
    batches: Iterable[pa.RecordBatch],
    hot_limit: int,
    rekeyed: frozenset[int] = frozenset(),
    was_hot: frozenset[tuple[int, int, int]] = frozenset(),
) -> Iterator[pa.RecordBatch]:
    """The pairs of every group of a partition of key rows ``(kind, slot, key, id, batch)``
    sorted by key (a group's rows are contiguous, maybe across batches), and the owners of
    its key when it is a hot key of a kind in ``rekeyed`` (:func:`group_rows`); ``was_hot``
    holds the keys hot before the load."""
    carry: list[I64] | None = None
    for batch in batches:
        columns = [
            np.asarray(batch.column(c).to_numpy(zero_copy_only=False), dtype=np.int64)
            for c in KEY_COLUMNS
        ]
        if carry is not None:
            columns = [np.concatenate([old, new]) for old, new in zip(carry, columns, strict=True)]
        if len(columns[0]) == 0:
            continue
        kind, slot, key = columns[:3]
        changed = (kind[1:] != kind[:-1]) | (slot[1:] != slot[:-1]) | (key[1:] != key[:-1])
        starts = np.concatenate([[0], np.flatnonzero(changed) + 1])
        carry = [c[starts[-1] :] for c in columns]  # the last group may go on in the next batch
        yield _groups_output(columns, starts, hot_limit, rekeyed, was_hot)
    if carry is not None and len(carry[0]):
        bounds = np.array([0, len(carry[0])])
        yield _groups_output(carry, bounds, hot_limit, rekeyed, was_hot)


#: The columns of a key row.
KEY_COLUMNS = ("kind", "slot", "key", "id", "batch")


def _groups_output(
    columns: list[I64],
    starts: I64,
    hot_limit: int,
    rekeyed: frozenset[int],
    was_hot: frozenset[tuple[int, int, int]],
) -> pa.RecordBatch:
    """:data:`GROUP_OUTPUT` rows of the groups ``starts[i]:starts[i + 1]`` of ``columns``."""
    kind, slot, key, ids, numbers = columns
    ends = starts[1:]
    starts = starts[:-1]
    out: dict[str, list[int | None]] = {c: [] for c in ("a", "b", "kind", "slot", "key", "hot")}
    if len(starts) == 0:
        return _output(out)
    newest = np.maximum.reduceat(numbers[: ends[-1]], starts)
    wanted = ((ends - starts > 1) | bool(was_hot)) & (newest >= 0)
    for start, end in zip(starts[wanted].tolist(), ends[wanted].tolist(), strict=True):
        group = (int(kind[start]), int(slot[start]), int(key[start]))
        if end - start == 1 and group not in was_hot:
            continue
        group_rows(
            out, group, ids[start:end].tolist(), numbers[start:end].tolist(),
            group in was_hot, hot_limit, rekeyed,
        )  # fmt: skip
    return _output(out)


def group_rows(
    out: dict[str, list[int | None]],
    group: tuple[int, int, int],
    ids: list[int],
    numbers: list[int],
    was_hot: bool,
    hot_limit: int,
    rekeyed: frozenset[int],
) -> None:
    """Append the pairs of one key ``(kind, slot, key)`` owned by documents ``ids`` of batches
    ``numbers`` to ``out``, and its owners if it is a hot key of a kind in ``rekeyed`` (those
    stored before the load only if the key becomes hot in it: the others have their secondary
    keys already)."""
    kind, slot, key = group
    older, newer = group_pairs(kind, ids, numbers, hot_limit)
    _extend(out, older, newer, kind, None, None, None)
    if kind not in rekeyed:
        return
    hot = secondary.hot_batch(list(zip(ids, numbers, strict=True)), hot_limit, was_hot)
    if hot is None:
        return
    owners = [(doc, b) for doc, b in zip(ids, numbers, strict=True) if b >= 0 or hot >= 0]
    _extend(out, [o[0] for o in owners], [o[1] for o in owners], kind, slot, key, hot)


def _output(out: dict[str, list[int | None]]) -> pa.RecordBatch:
    """The :data:`GROUP_OUTPUT` batch of ``out``."""
    types = (pa.int64(), pa.int64(), pa.int8(), pa.int32(), pa.int64(), pa.int64())
    return pa.RecordBatch.from_arrays(
        [pa.array(out[c], t) for c, t in zip(out, types, strict=True)], names=list(out)
    )


def _extend(
    out: dict[str, list[int | None]],
    a: list[int],
    b: list[int],
    kind: int,
    slot: int | None,
    key: int | None,
    hot: int | None,
) -> None:
    """Append rows ``(a, b)`` with the same ``kind, slot, key, hot``."""
    n = len(a)
    out["a"] += a
    out["b"] += b
    for name, value in (("kind", kind), ("slot", slot), ("key", key), ("hot", hot)):
        out[name] += [value] * n


EDGE_SCHEMA = (
    "a bigint, b bigint, method string, jaccard double, containment double, hamming smallint"
)


def score_batch(batch: pa.RecordBatch, params: FingerprintParams) -> pa.RecordBatch:
    """The edges among candidate pairs joined with both documents' columns.

    Input columns: ``a, b, block_only, sampled`` and, for ``x`` (document ``a``) and ``y`` (document
    ``b``), ``*_hash, *_simhash, *_count, *_shingles`` (and ``*_signature`` when ``params.verify``
    is ``estimate``). The scores are those of
    :func:`dedup_store.db.matches.scoring.scored_pairs_sql`, computed with the same float64
    operations, and the method that of the rule both apply
    (:func:`dedup_store.core.matchrule.decide`).
    """
    a = batch.column("a").to_numpy().astype(np.int64)
    b = batch.column("b").to_numpy().astype(np.int64)
    n = len(a)
    block_only = np.asarray(batch.column("block_only").to_pylist(), dtype=bool)
    sampled = np.asarray(batch.column("sampled").to_pylist(), dtype=bool)
    x_simhash = batch.column("x_simhash").to_numpy().astype(np.int64)
    y_simhash = batch.column("y_simhash").to_numpy().astype(np.int64)
    hamming = hamming_many(x_simhash.view(np.uint64), y_simhash.view(np.uint64))
    same = np.array(
        [
            p == q
            for p, q in zip(
                batch.column("x_hash").to_pylist(), batch.column("y_hash").to_pylist(), strict=True
            )
        ],
        dtype=bool,
    )
    nx = batch.column("x_count").to_numpy().astype(np.float64)
    ny = batch.column("y_count").to_numpy().astype(np.float64)
    keep = ~(block_only & (hamming > params.simhash_k))
    inter = np.full(n, np.nan)
    min_ratio = min(params.threshold, params.simhash_min_jaccard)
    if params.verify == "exact":
        small, large = np.minimum(nx, ny), np.maximum(nx, ny)
        # the writer intersects what its size test lets through, and scores what SQL lets in
        wanted = keep & ~same & (sampled | (small / np.maximum(large, 1) >= min_ratio))
        wanted &= sampled | (small >= min_ratio * large)
        rows = np.flatnonzero(wanted)
        if len(rows):
            inter[rows] = _intersections(batch, rows).astype(np.float64)
    else:
        est = _agreement(batch)
        inter = np.where(same, np.nan, est / (1 + est) * (nx + ny))
    with np.errstate(divide="ignore", invalid="ignore"):
        union = nx + ny - inter
        jaccard = np.where(union == 0, np.nan, inter / union)
        small = np.minimum(nx, ny)
        containment = np.where(small == 0, np.nan, inter / small)
    jaccard = np.where(same, 1.0, jaccard)
    containment = np.where(same, 1.0, containment)
    scores = {
        "same": same,
        "jaccard": jaccard,
        "containment": containment,
        "hamming": hamming,
        "sampled": sampled,
    }
    codes = np.where(keep, decide(params, scores), NO_MATCH)
    chosen = codes != NO_MATCH
    return pa.RecordBatch.from_arrays(
        [
            pa.array(a[chosen], pa.int64()),
            pa.array(b[chosen], pa.int64()),
            pa.array([METHODS[code].value for code in codes[chosen].tolist()], pa.string()),
            pa.array(jaccard[chosen], pa.float64()),
            pa.array(containment[chosen], pa.float64()),
            pa.array(hamming[chosen].astype(np.int16), pa.int16()),
        ],
        names=["a", "b", "method", "jaccard", "containment", "hamming"],
    )


def _intersections(batch: pa.RecordBatch, rows: Any) -> Any:
    """``|X ∩ Y|`` of the pairs ``rows``, over the sorted stored shingle values."""
    xs = batch.column("x_shingles").take(pa.array(rows)).to_pylist()
    ys = batch.column("y_shingles").take(pa.array(rows)).to_pylist()
    arrays = [np.sort(np.asarray(v, dtype=np.int32)) for v in (*xs, *ys)]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(v) for v in arrays], out=offsets[1:])
    values = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int32)
    left = np.arange(len(rows), dtype=np.int64)
    return intersection_sizes(values, offsets, left, left + len(rows))


def _agreement(batch: pa.RecordBatch) -> Any:
    """Share of equal MinHash signature positions of each pair (``estimate`` mode)."""
    xs = batch.column("x_signature").to_pylist()
    ys = batch.column("y_signature").to_pylist()
    return np.array(
        [
            np.count_nonzero(np.asarray(x) == np.asarray(y)) / len(x)
            for x, y in zip(xs, ys, strict=True)
        ],
        dtype=np.float64,
    )
