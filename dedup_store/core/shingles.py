"""Shingles for a whole batch of documents at once.

Each document's canonical tokens are cut into *segments*: all its word tokens form one segment
(shingled as ``shingle_size``-word n-grams), and its CJK tokens form segments of characters
(shingled as ``cjk_shingle_size``-character n-grams): all of them one segment, in order, with
``canonical_version`` 2, each one a segment of its own with version 1. A segment shorter than
``n`` gives a single shingle of all its tokens, so every non-empty document has at least one
shingle.

Tokens are hashed once with xxh3; a shingle's hash combines its tokens' hashes, position by
position, with :func:`~dedup_store.core.hashing.mix64` at the end. All of this runs in numpy
over the concatenated tokens of the batch.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import xxhash

from dedup_store.core import kernels
from dedup_store.core.hashing import COMBINE, U64, mix64
from dedup_store.core.scripts import has_cjk, is_cjk, starts_cjk

I64 = npt.NDArray[np.int64]

_VOCABULARY_LIMIT = 1 << 20
# sort groups as rows of a padded array while that is at most this many times their size
_PAD_LIMIT = 2


class _Vocabulary(dict[str, int]):
    """Token -> small integer id, with the xxh3-64 hash of every id in :attr:`table`.

    Looking up a small integer and then gathering hashes in numpy is much cheaper than turning
    millions of large Python integers into ``uint64`` one by one.
    """

    def __init__(self) -> None:
        super().__init__()
        self.table: U64 = np.empty(0, dtype=np.uint64)
        self._pending: list[int] = []

    def __missing__(self, token: str) -> int:
        token_id = len(self)
        self[token] = token_id
        self._pending.append(xxhash.xxh3_64_intdigest(token.encode("utf-8")))
        return token_id

    def hashes(self, tokens: list[str]) -> U64:
        """xxh3-64 of each token."""
        ids = np.fromiter(map(self.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        if self._pending:
            added = np.array(self._pending, dtype=np.uint64)
            self.table = np.concatenate([self.table, added])
            self._pending.clear()
        return self.table[ids]


_VOCABULARY = _Vocabulary()
_VOCABULARY_LOCK = threading.Lock()


def hash_tokens(tokens: list[str]) -> U64:
    """xxh3-64 of each token's UTF-8 bytes.

    With the compiled kernels, the tokens joined by spaces go through the word kernel: its words
    are the tokens exactly when it gives back the same text and as many words (an empty token
    leaves a space at an end or two together, a space inside one makes more words); otherwise,
    and without the kernels, through a bounded cache of the vocabulary seen.
    """
    if kernels.compiled is not None and tokens:
        body = " ".join(tokens).encode("utf-8")
        size = np.array([len(body)], dtype=np.int64)
        text, _, hashes = kernels.compiled.canonical_words(
            body, size, None, xxhash.xxh3_64_intdigest
        )
        if text == body and len(hashes) == 8 * len(tokens):
            return np.frombuffer(hashes, dtype=np.uint64)
    global _VOCABULARY
    with _VOCABULARY_LOCK:
        if len(_VOCABULARY) > _VOCABULARY_LIMIT:
            _VOCABULARY = _Vocabulary()
        return _VOCABULARY.hashes(tokens)


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
        doc_words: list[str] = []
        doc_runs: list[str] = []
        for token in tokens:
            (doc_runs if cjk(token) else doc_words).append(token)
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
    if kernels.compiled is not None:
        hashes = kernels.compiled.shingle_hashes(
            np.ascontiguousarray(segments.hashes, dtype=np.uint64),
            np.ascontiguousarray(lengths, dtype=np.int64),
            n,
            COMBINE,
        )
        return np.frombuffer(hashes, dtype=np.uint64), np.repeat(
            segments.owner, np.maximum(lengths - n + 1, 1)
        )
    # tokens from each position to the end of its segment (at least 1)
    remaining = np.repeat(np.cumsum(lengths), lengths) - np.arange(total)
    starts = np.flatnonzero(remaining >= n)
    short = lengths < n
    if np.any(short):
        # a segment shorter than n gives one shingle of all its tokens, at its first position
        firsts = (np.cumsum(lengths) - lengths)[short]
        starts = np.sort(np.concatenate([starts, firsts]))
    acc = _combined(segments.hashes, remaining if np.any(short) else None, n)[starts]
    owner = np.repeat(segments.owner, lengths)[starts]
    return mix64(acc), owner


def _combined(hashes: U64, remaining: I64 | None, n: int) -> U64:
    """At every position, the combination of the next ``n`` token hashes.

    With ``remaining`` given, tokens past the end of the position's segment count as zero.
    """
    total = len(hashes)
    padded = np.zeros(total + n - 1, dtype=np.uint64)
    padded[:total] = hashes
    acc: U64 = hashes * COMBINE[0]
    term = np.empty_like(acc)
    for j in range(1, n):
        np.multiply(padded[j : j + total], COMBINE[j], out=term)
        if remaining is not None:
            term[remaining <= j] = 0
        acc += term
    return acc


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
        distinct = np.unique(values)
        return distinct, np.array([0, len(distinct)], dtype=np.int64)
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
