"""Matching blocks of two sequences of token ids: the anchors of :mod:`~dedup_store.core.seqdiff`.

An ``n``-gram *matches* when it occurs as often in both sequences, at most ``repeats`` times;
its k-th occurrence in ``a`` is paired with its k-th occurrence in ``b``. A text made of a few
copies of the same passages has no word that occurs once, but its n-grams occur once per copy,
so they still pair up. Pairs on one diagonal that follow each other form a *block* (``n - 1 +
count`` equal tokens), and of all blocks the heaviest chain is kept: blocks in the same order on
both sides, without overlaps, of the largest total length.

Finding the pairs is a few sorts with numpy, ``O((n_a + n_b) log)``; chaining is ``O(k log k)``
in Python for ``k`` blocks (one per stretch between two edits of a lightly edited copy).
"""

from __future__ import annotations

import bisect
import heapq

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U32 = npt.NDArray[np.uint32]
#: A block: ``(a position, b position, length)``.
Block = tuple[int, int, int]

# odd 64-bit constant (the golden ratio) that mixes an n-gram's ids into one hash
_MIX = np.uint64(0x9E3779B97F4A7C15)


def matching_blocks(a: I64, b: I64, n: int, repeats: int) -> list[Block]:
    """The heaviest chain of blocks of matching ``n``-grams of ``a`` and ``b``.

    Blocks are verified token by token, so a collision of the 32-bit n-gram hashes (a few among
    a million n-grams) never makes a block of tokens that differ: at worst an anchor is lost.

    Args:
        a: token ids of the first sequence.
        b: token ids of the second sequence.
        n: tokens per n-gram.
        repeats: the most times an n-gram may occur to match.

    Returns:
        Blocks in order of their positions, which increase on both sides.
    """
    if min(len(a), len(b)) < n:
        return []
    i, j = _paired(ngram_hashes(a, n), ngram_hashes(b, n), repeats)
    if not len(i):
        return []
    blocks = heaviest_chain(_diagonal_runs(i, j, n))
    return [block for block in blocks if _same(a, b, block)]


def ngram_hashes(ids: I64, n: int) -> U32:
    """A 32-bit hash of each ``n``-gram of ``ids`` (they sort twice as fast as 64-bit ones)."""
    count = len(ids) - n + 1
    words = ids.astype(np.uint64)
    hashes = words[:count].copy()
    for k in range(1, n):
        hashes *= _MIX
        hashes += words[k : k + count]
    hashes ^= hashes >> np.uint64(32)
    return hashes.astype(np.uint32)


def _paired(hashes_a: U32, hashes_b: U32, repeats: int) -> tuple[I64, I64]:
    """Positions ``(i, j)`` of the paired occurrences, ``i`` increasing."""
    order_a = np.argsort(hashes_a, kind="stable")
    order_b = np.argsort(hashes_b, kind="stable")
    values_a, starts_a, counts_a = _groups(hashes_a[order_a])
    values_b, starts_b, counts_b = _groups(hashes_b[order_b])
    # the n-gram of a of each group of b (when there is one), and whether it matches
    in_a = np.minimum(np.searchsorted(values_a, values_b), len(values_a) - 1)
    same = (values_a[in_a] == values_b) & (counts_a[in_a] == counts_b) & (counts_b <= repeats)
    in_a, in_b = in_a[same], np.flatnonzero(same)
    # occurrences of the kept n-grams, by n-gram then position: the k-th in a and in b line up
    partner = np.full(len(hashes_a), -1, dtype=np.int64)
    partner[order_a[_expand(starts_a[in_a], counts_a[in_a])]] = order_b[
        _expand(starts_b[in_b], counts_b[in_b])
    ]
    i = np.flatnonzero(partner >= 0)
    return i, partner[i]


def _groups(ordered: U32) -> tuple[U32, I64, I64]:
    """Distinct values of a sorted array, where each starts, and how often each occurs."""
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(ordered)))
    return ordered[starts], starts, counts


def _expand(starts: I64, counts: I64) -> I64:
    """The indexes ``starts[g] + 0 .. counts[g] - 1`` of every group ``g``, in order."""
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(int(counts.sum()))


def _diagonal_runs(i: I64, j: I64, n: int) -> list[Block]:
    """Pairs that follow each other on one diagonal, joined into blocks of tokens."""
    step = np.ones(len(i), dtype=bool)
    step[1:] = (np.diff(i) != 1) | (np.diff(j) != 1)
    starts = np.flatnonzero(step)
    lengths = np.diff(np.append(starts, len(i))) + (n - 1)
    return list(zip(i[starts].tolist(), j[starts].tolist(), lengths.tolist(), strict=True))


def heaviest_chain(blocks: list[Block]) -> list[Block]:
    """The chain of ``blocks`` (sorted by ``a`` position) of the largest total length in which
    each block ends, on both sides, before the next one starts.

    A block becomes a possible predecessor once the sweep over ``a`` positions has passed its
    end; a Fenwick tree over the ``b`` ends gives the best chain ending before a ``b`` position.
    """
    ends = sorted({bj + size for _, bj, size in blocks})
    tree = _PrefixMax(len(ends))
    score = [0] * len(blocks)
    previous = [-1] * len(blocks)
    pending: list[tuple[int, int]] = []
    for k, (ai, bj, size) in enumerate(blocks):
        while pending and pending[0][0] <= ai:
            _, done = heapq.heappop(pending)
            _, dbj, dsize = blocks[done]
            tree.update(_rank(ends, dbj + dsize), score[done], done)
        best, before = tree.query(_rank(ends, bj))
        score[k], previous[k] = best + size, before
        heapq.heappush(pending, (ai + size, k))
    k = max(range(len(blocks)), key=score.__getitem__)
    chain = []
    while k >= 0:
        chain.append(blocks[k])
        k = previous[k]
    chain.reverse()
    return chain


def _rank(ends: list[int], position: int) -> int:
    """How many of the sorted ``ends`` are at most ``position``."""
    return bisect.bisect_right(ends, position)


class _PrefixMax:
    """A Fenwick tree of ``(score, item)``: the best score among ranks ``1..r``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.best = [0] * (size + 1)
        self.item = [-1] * (size + 1)

    def update(self, rank: int, score: int, item: int) -> None:
        while rank <= self.size:
            if score > self.best[rank]:
                self.best[rank], self.item[rank] = score, item
            rank += rank & -rank

    def query(self, rank: int) -> tuple[int, int]:
        best, item = 0, -1
        while rank > 0:
            if self.best[rank] > best:
                best, item = self.best[rank], self.item[rank]
            rank -= rank & -rank
        return best, item


def _same(a: I64, b: I64, block: Block) -> bool:
    ai, bj, size = block
    return bool(np.array_equal(a[ai : ai + size], b[bj : bj + size]))
