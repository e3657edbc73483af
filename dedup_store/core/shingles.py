"""Shingles for a whole batch of documents at once.

Each document's canonical tokens are cut into *segments*: all its word tokens form one segment
(shingled as ``shingle_size``-word n-grams), and its CJK tokens form segments of characters
(shingled as ``cjk_shingle_size``-character n-grams): all of them one segment, in order, with
``canonical_version`` 2, each one a segment of its own with version 1. A segment shorter than
``n`` gives a single shingle of all its tokens, so every non-empty document has at least one
shingle.

Tokens are hashed once with xxh3; a shingle's hash combines its tokens' hashes, position by
position, with :func:`~dedup_store.core.mixing.mix64` at the end. All of this runs in the
kernels (:mod:`dedup_store.core.kernels`) over the concatenated tokens of the batch.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U64, distinct
from dedup_store.core.scripts import has_cjk, is_cjk, starts_cjk

# sort groups as rows of a padded array while that is at most this many times their size
_PAD_LIMIT = 2
# no Han, Hiragana or Katakana character lies below this one (U+2E80, the first CJK radical)
_FIRST_CJK = "\u2e80"


def hash_tokens(tokens: list[str]) -> U64:
    """xxh3-64 of each token's UTF-8 bytes."""
    return kernels.backend.token_hashes(tokens)


@dataclasses.dataclass
class Segments:
    """Token hashes of a batch, cut into segments, each owned by one document.

    Attributes:
        hashes: token hashes, all segments concatenated.
        lengths: tokens per segment.
        owner: document index of each segment.
        text: the tokens themselves (kept for caller-supplied feature weights).
    """

    hashes: U64
    lengths: I64
    owner: I64
    text: list[str]

    @classmethod
    def build(cls, pieces: list[tuple[int, list[str]]]) -> Segments:
        """Segments from ``(document index, tokens)`` pairs, in order."""
        text = [token for _, tokens in pieces for token in tokens]
        hashes = hash_tokens(text)
        lengths = np.fromiter((len(t) for _, t in pieces), dtype=np.int64, count=len(pieces))
        owner = np.fromiter((d for d, _ in pieces), dtype=np.int64, count=len(pieces))
        return cls(hashes, lengths, owner, text)

    @classmethod
    def characters(cls, runs: list[str], owner: list[int]) -> Segments:
        """One segment of the characters of each run, owned by ``owner`` (no list per run: a
        batch of Chinese text has hundreds of runs per document)."""
        text = list("".join(runs))
        lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        return cls(hash_tokens(text), lengths, np.array(owner, dtype=np.int64), text)

    @classmethod
    def whole(cls, token_lists: Sequence[list[str]]) -> Segments:
        """One segment of all the tokens of each (non-empty) list, owned by its position."""
        n = len(token_lists)
        text = list(itertools.chain.from_iterable(token_lists))
        lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=n)
        return cls(hash_tokens(text), lengths, np.arange(n, dtype=np.int64), text)


def split_segments(
    token_lists: Sequence[list[str]], canonical_texts: Sequence[str], join_cjk: bool
) -> tuple[Segments, Segments]:
    """Word segments and CJK character segments of a batch of canonical token lists.

    With ``join_cjk`` (``canonical_version`` 2), the CJK tokens of a document make one segment,
    else one each (and tokens are told apart as version 1 did, :func:`is_cjk`).
    """
    cjk = starts_cjk if join_cjk else is_cjk
    if all(text.isascii() or not has_cjk(text) for text in canonical_texts):
        return Segments.whole(token_lists), Segments.build([])
    words: list[tuple[int, list[str]]] = []
    runs: list[str] = []
    run_owner: list[int] = []
    for doc, (tokens, text) in enumerate(zip(token_lists, canonical_texts, strict=True)):
        if text.isascii() or not has_cjk(text):
            words.append((doc, tokens))
            continue
        # every CJK token starts at or above U+2E80: a comparison rules out most words
        doc_runs = [t for t in tokens if t >= _FIRST_CJK and cjk(t)]
        doc_words = [t for t in tokens if not (t >= _FIRST_CJK and cjk(t))]
        if join_cjk and doc_runs:
            doc_runs = ["".join(doc_runs)]
        runs.extend(doc_runs)
        run_owner.extend([doc] * len(doc_runs))
        if doc_words:
            words.append((doc, doc_words))
    return Segments.build(words), Segments.characters(runs, run_owner)


def shingle(segments: Segments, n: int) -> tuple[U64, I64]:
    """Hash the n-gram shingles of every segment, in order.

    Returns:
        ``(hashes, owner)``: one hash per shingle and the document index it belongs to.
    """
    total = len(segments.hashes)
    if total == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    lengths = segments.lengths
    hashes = kernels.backend.shingle_hashes(segments.hashes, lengths, n)
    return hashes, np.repeat(segments.owner, np.maximum(lengths - n + 1, 1))


def group_by_document(values: U64, owner: I64, n_docs: int) -> tuple[U64, I64]:
    """Sort values by owner (stable), returning them with ``offsets`` of length ``n_docs + 1``.

    Values already grouped by owner are returned as they are (not copied).
    """
    counts = np.bincount(owner, minlength=n_docs)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if not np.any(owner[1:] < owner[:-1]):
        # already grouped (no CJK shingles appended after the word shingles)
        return values, offsets
    return values[np.argsort(owner, kind="stable")], offsets


def unique_per_document(values: U64, owner: I64, n_docs: int) -> tuple[U64, I64]:
    """Sorted distinct values of each document, concatenated, with offsets (``n_docs + 1``)."""
    if n_docs == 1:
        unique = distinct(values)
        return unique, np.array([0, len(unique)], dtype=np.int64)
    values, owner = _sort_by_owner_then_value(values, owner, n_docs)
    keep = np.ones(len(values), dtype=bool)
    keep[1:] = (values[1:] != values[:-1]) | (owner[1:] != owner[:-1])
    counts = np.bincount(owner[keep], minlength=n_docs)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return values[keep], offsets


def _sort_by_owner_then_value(values: U64, owner: I64, n_docs: int) -> tuple[U64, I64]:
    """Sort by ``(owner, value)``.

    Values already grouped by owner, in groups of similar sizes, are sorted as the rows of one
    padded array; otherwise one sort of packed keys, and lexsort only if their prefixes collide.
    """
    if len(values) and not np.any(owner[1:] < owner[:-1]):
        counts = np.bincount(owner, minlength=n_docs)
        if n_docs * int(counts.max()) <= _PAD_LIMIT * len(values):
            return _sort_rows(values, counts), owner
    owner_bits = max(1, int(n_docs).bit_length())
    if owner_bits <= 24 and len(values):
        shift = np.uint64(owner_bits)
        packed = (owner.astype(np.uint64) << np.uint64(64 - owner_bits)) | (values >> shift)
        order = np.argsort(packed)
        sorted_values, sorted_packed = values[order], packed[order]
        ties = sorted_packed[1:] == sorted_packed[:-1]
        if not np.any(ties & (sorted_values[1:] != sorted_values[:-1])):
            return sorted_values, owner[order]
    order = np.lexsort((values, owner))
    return values[order], owner[order]


def _sort_rows(values: U64, counts: I64) -> U64:
    """Sort each group of values (``counts[d]`` consecutive values for group ``d``).

    Every group becomes one row of an array padded with the largest ``uint64``; padding sorts
    last and is left out by position, so a real value equal to it stays in.
    """
    n_rows, width = len(counts), int(counts.max())
    first = np.cumsum(counts) - counts
    slot = np.arange(len(values)) + np.repeat(np.arange(n_rows) * width - first, counts)
    grid = np.full(n_rows * width, np.iinfo(np.uint64).max, dtype=np.uint64)
    grid[slot] = values
    rows = grid.reshape(n_rows, width)
    rows.sort(axis=1)
    sorted_values: U64 = rows[np.arange(width) < counts[:, None]]
    return sorted_values
