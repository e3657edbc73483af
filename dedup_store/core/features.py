"""The SimHash features of weighted fingerprints (``simhash_weights`` other than ``count``):
each document's distinct features, how often it has each, and their lengths in UTF-8 bytes."""

from __future__ import annotations

import numpy as np

from dedup_store.core.arrays import I64, U64
from dedup_store.core.params import FingerprintParams
from dedup_store.core.shingles import Segments

#: The features of a fingerprint that is not weighted: none.
NO_FEATURES: tuple[U64, I64, I64, I64] = (
    np.empty(0, dtype=np.uint64),
    np.zeros(1, dtype=np.int64),
    np.empty(0, dtype=np.int64),
    np.empty(0, dtype=np.int64),
)


def weighted_features(
    words: Segments,
    chars: Segments,
    char_shingles: U64,
    char_owner: I64,
    params: FingerprintParams,
    canonical: list[str],
) -> tuple[U64, I64, I64, I64]:
    """The distinct SimHash features of each document (sorted), their offsets, how often the
    document has each, and each one's length in UTF-8 bytes."""
    word_owner = np.repeat(words.owner, words.lengths)
    features = np.concatenate([words.hashes, char_shingles])
    owner = np.concatenate([word_owner, char_owner])
    char_lengths = _char_byte_lengths(chars, params.cjk_shingle_size)
    lengths = np.concatenate([_word_byte_lengths(words, canonical), char_lengths])
    order = _owner_value_order(features, owner)
    features, owner, lengths = features[order], owner[order], lengths[order]
    first = np.ones(len(features), dtype=bool)
    first[1:] = (features[1:] != features[:-1]) | (owner[1:] != owner[:-1])
    starts = np.flatnonzero(first)
    offsets = np.zeros(len(canonical) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner[starts], minlength=len(canonical)), out=offsets[1:])
    counts = np.diff(np.append(starts, len(features)))
    return features[starts], offsets, counts, lengths[starts]


def _owner_value_order(features: U64, owner: I64) -> I64:
    """The order that sorts by ``(owner, feature)``: one sort of the owner and the top bits of
    the feature packed together, or a lexsort where that leaves two features unordered."""
    bits = max(1, int(owner.max()).bit_length()) if len(owner) else 1
    packed = (owner.astype(np.uint64) << np.uint64(64 - bits)) | (features >> np.uint64(bits))
    order = np.argsort(packed)
    tied = packed[order][1:] == packed[order][:-1]
    if np.any(tied & (features[order][1:] != features[order][:-1])):
        return np.lexsort((features, owner))
    ordered: I64 = order.astype(np.int64)
    return ordered


def _word_byte_lengths(words: Segments, canonical: list[str]) -> I64:
    """The UTF-8 length of each word token: from the tokens, or when they were hashed without a
    string each, from the canonical texts, which are the documents' words joined by spaces."""
    if words.text or not len(words.hashes):
        return _utf8_lengths(words.text)
    lengths = _utf8_lengths(canonical, " ")
    if len(lengths) != len(words.hashes):
        raise AssertionError("canonical texts and word hashes disagree")
    return lengths


def _utf8_lengths(texts: list[str], inner: str | None = None) -> I64:
    """The UTF-8 length of each of ``texts`` (NUL-free), or with ``inner``, of each of their
    pieces between ``inner`` characters: one encoding of them all joined."""
    if not texts:
        return np.empty(0, dtype=np.int64)
    joined = np.frombuffer("\x00".join(texts).encode("utf-8"), dtype=np.uint8)
    cuts = joined == 0 if inner is None else (joined == 0) | (joined == ord(inner))
    bounds = np.concatenate([[-1], np.flatnonzero(cuts), [len(joined)]])
    lengths: I64 = np.diff(bounds) - 1
    return lengths


def _char_byte_lengths(chars: Segments, n: int) -> I64:
    """The UTF-8 length of each CJK character shingle, in the order :func:`shingle` makes them:
    the sum of its characters' lengths (a run shorter than ``n`` is one shingle)."""
    if not len(chars.lengths):
        return np.empty(0, dtype=np.int64)
    summed = np.concatenate([[0], np.cumsum(_utf8_lengths(chars.text))])
    starts = np.concatenate([[0], np.cumsum(chars.lengths)[:-1]])
    counts = np.maximum(chars.lengths - n + 1, 1)
    first = np.repeat(starts, counts) + _ranks(counts)
    last = np.minimum(first + n, np.repeat(starts + chars.lengths, counts))
    lengths: I64 = summed[last] - summed[first]
    return lengths


def _ranks(counts: I64) -> I64:
    """``0, 1, ..., counts[i] - 1`` for each ``i``, concatenated."""
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - counts, counts)
