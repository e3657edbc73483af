"""Weighted 64-bit SimHash and pigeonhole block keys.

SimHash (Charikar): every feature votes on each of the 64 bits with its weight, ``+w`` when the
feature hash has the bit set and ``-w`` otherwise; the fingerprint bit is set when the total is
positive. Features are a document's word tokens and CJK character shingles, weighted by term
frequency times an optional caller-supplied weight (for example idf).

Block keys (Manku et al.): split the 64 bits into ``m`` blocks; if two fingerprints differ in at
most ``k`` bits, at least ``m - k`` blocks are identical. Every combination of ``m - k`` blocks
becomes one key (the masked bits hashed together with the combination's number), so two
fingerprints within distance ``k`` always share at least one key.

A document of more than ``simhash_key_max_shingles`` distinct shingles gets instead, in every
slot, a key of its whole SimHash (:func:`stored_block_keys`): through its block keys it meets
only documents of an equal SimHash.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U64
from dedup_store.core.hashing import as_int64
from dedup_store.core.mixing import MASK64, mix64

_FEATURES_PER_CHUNK = 1 << 17
_DOCS_PER_CHUNK = 1 << 12
# average features per document from which byte digits beat nibbles (fewer passes, more bins)
_BYTE_DIGITS_FROM = 224
_UNPACK_UP_TO = 512
_COMBO_SALT = 0xD6E8FEB86659FD93
_WHOLE_SALT = 0x8CB92BA72F3D8DD7
# bit 0 of each 16-bit lane of a uint64, and the most a lane can count
_LANE_BITS = np.uint64(0x0001_0001_0001_0001)
_LANE_MAX = 0xFFFF
# the same for the 8-bit lanes of a uint64
_BYTE_LANE_BITS = np.uint64(0x0101_0101_0101_0101)
_BYTE_LANE_MAX = 0xFF


def simhash_batch(
    features: U64, offsets: I64, weights: npt.NDArray[np.float32] | None = None
) -> U64:
    """SimHash of each document.

    Args:
        features: feature hashes of all documents, concatenated (repeats count as frequency).
        offsets: document ``d`` owns ``features[offsets[d]:offsets[d + 1]]`` (non-empty).
        weights: weight of each feature occurrence; ``None`` weighs every occurrence 1.

    Returns:
        One ``uint64`` per document.
    """
    if weights is None:
        return kernels.backend.simhash_majority(features, offsets)
    n_docs = len(offsets) - 1
    out = np.zeros(n_docs, dtype=np.uint64)
    first = 0
    while first < n_docs:
        last = _chunk_end(offsets, first)
        lo, hi = offsets[first], offsets[last]
        chunk_offsets = offsets[first : last + 1] - lo
        positive = _majority_bits(features[lo:hi], chunk_offsets, weights[lo:hi])
        out[first:last] = np.packbits(positive.ravel(), bitorder="little").view("<u8")
        first = last
    return out


def simhash_integer_weighted(features: U64, offsets: I64, weights: I64) -> U64:
    """SimHash of each document whose feature occurrences have integer ``weights`` (each at most
    ``2**40``): exact sums, so the same in any batch and under either kernel backend."""
    return kernels.backend.simhash_weighted(features, offsets, weights)


def _majority_bits(
    features: U64, offsets: I64, weights: npt.NDArray[np.float32]
) -> npt.NDArray[np.bool_]:
    """Per document and bit, whether the features that have it outweigh those that do not."""
    votes = bit_votes(features, offsets, weights)
    totals = np.add.reduceat(weights.astype(np.float64), offsets[:-1])
    majority: npt.NDArray[np.bool_] = votes * 2 > totals[:, None]
    return majority


def bit_votes(
    features: U64, offsets: I64, weights: npt.NDArray[np.float32] | None = None
) -> npt.NDArray[np.float64]:
    """Per document and bit, the total weight of the features that have that bit set.

    Unweighted features are counted four bits at a time in 16-bit lanes (:func:`lane_counts`).
    Weighted ones, rather than unpacking 64 bits per feature, are cut into digits (bytes for long
    documents, 4-bit nibbles for short ones, whichever makes fewer histogram bins and passes),
    each digit position is counted in a per-document histogram (one ``bincount``), and the
    histograms become bit totals through one product with the table of the bits of every digit.

    Returns:
        shape ``(n_docs, 64)``; column ``j`` is bit ``j`` (least significant first).
    """
    n_docs = len(offsets) - 1
    if len(features) <= _UNPACK_UP_TO:
        # a few features (one short document, a check): unpacking the bits is fewer passes
        bits = np.unpackbits(features.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        weighted = bits.astype(np.float64)
        if weights is not None:
            weighted *= weights[:, None]
        return np.add.reduceat(weighted, offsets[:-1], axis=0)
    if weights is None and int(np.max(np.diff(offsets))) <= _LANE_MAX:
        return lane_counts(features, offsets).astype(np.float64)
    width = 8 if len(features) > _BYTE_DIGITS_FROM * n_docs else 4
    bins = 1 << width
    owner_bins = np.repeat(np.arange(0, n_docs * bins, bins, dtype=np.int64), np.diff(offsets))
    votes = np.empty((n_docs, 64), dtype=np.float64)
    table = _digit_bits(width)
    as_bytes = features.view(np.uint8).reshape(-1, 8)
    for k in range(64 // width):
        if width == 8:
            digit = owner_bins + as_bytes[:, k]
        else:
            digit = owner_bins + ((as_bytes[:, k // 2] >> (4 * (k % 2))) & 15)
        histogram = np.bincount(digit, weights, minlength=n_docs * bins)
        np.matmul(histogram.reshape(n_docs, bins), table, out=votes[:, width * k : width * (k + 1)])
    return votes


def lane_counts(features: U64, offsets: I64) -> npt.NDArray[np.uint16]:
    """Per document and bit, how many features have that bit set (at most 65535 per document).

    Documents of at most 255 features are counted in 8-bit lanes (:func:`_byte_lane_counts`).
    Otherwise bit ``j`` of every byte of the even bytes, then of the odd bytes, is shifted to the
    bottom of the four 16-bit lanes of a ``uint64`` and masked; one ``add.reduceat`` per shift
    then counts four bits of every document at once, with no carry from one lane into the next.

    Returns:
        shape ``(n_docs, 64)``; column ``j`` is bit ``j`` (least significant first).
    """
    return _lane_counts(features, offsets).astype(np.uint16, copy=False)


def _lane_counts(features: U64, offsets: I64) -> npt.NDArray[np.unsignedinteger[Any]]:
    """:func:`lane_counts` as ``uint8`` for documents of at most 255 features, else ``uint16``."""
    n_docs = len(offsets) - 1
    if n_docs and int(np.max(np.diff(offsets))) <= _BYTE_LANE_MAX:
        return _byte_lane_counts(features, offsets)
    # [document, bit within the byte, byte parity, lane]; byte = 2 * lane + parity
    counts = np.empty((n_docs, 8, 2, 4), dtype=np.uint16)
    lanes = counts.view(np.uint64).reshape(n_docs, 8, 2)
    work = np.empty_like(features)
    for shift in range(16):
        np.right_shift(features, np.uint64(shift), out=work)
        work &= _LANE_BITS
        np.add.reduceat(work, offsets[:-1], out=lanes[:, shift % 8, shift // 8])
    return counts.transpose(0, 3, 2, 1).reshape(n_docs, 64)


def _byte_lane_counts(features: U64, offsets: I64) -> npt.NDArray[np.uint8]:
    """:func:`lane_counts` of documents of at most 255 features, in the eight 8-bit lanes of a
    ``uint64``: bit ``j`` of every byte per shift, eight passes in all."""
    n_docs = len(offsets) - 1
    # [document, bit within the byte, byte]
    counts = np.empty((n_docs, 8, 8), dtype=np.uint8)
    lanes = counts.view(np.uint64).reshape(n_docs, 8)
    work = np.empty_like(features)
    for shift in range(8):
        np.right_shift(features, np.uint64(shift), out=work)
        work &= _BYTE_LANE_BITS
        np.add.reduceat(work, offsets[:-1], out=lanes[:, shift])
    return counts.transpose(0, 2, 1).reshape(n_docs, 64)


@lru_cache(maxsize=2)
def _digit_bits(width: int) -> npt.NDArray[np.float64]:
    """``table[v, j]`` is bit ``j`` of the digit value ``v`` (shape ``(2**width, width)``)."""
    values = np.arange(1 << width, dtype=np.uint8)[:, None]
    return np.unpackbits(values, axis=1, bitorder="little")[:, :width].astype(np.float64)


def _chunk_end(offsets: I64, first: int) -> int:
    limit = offsets[first] + _FEATURES_PER_CHUNK
    last = int(np.searchsorted(offsets, limit, side="right")) - 1
    return min(max(last, first + 1), first + _DOCS_PER_CHUNK)


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints."""
    return ((a ^ b) & 0xFFFF_FFFF_FFFF_FFFF).bit_count()


def hamming_many(a: U64, b: U64) -> I64:
    """Differing bits of each pair ``(a[i], b[i])`` of 64-bit fingerprints."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        return np.bitwise_count(np.bitwise_xor(a, b)).astype(np.int64)
    differing = np.bitwise_xor(a, b).view(np.uint8).reshape(-1, 8)
    counts: I64 = np.unpackbits(differing, axis=1).sum(axis=1, dtype=np.int64)
    return counts


def block_sizes(blocks: int) -> list[int]:
    """Bit widths of the ``blocks`` contiguous blocks of a 64-bit value (wider ones first)."""
    base, extra = divmod(64, blocks)
    return [base + 1 if i < extra else base for i in range(blocks)]


@lru_cache(maxsize=16)
def block_masks(blocks: int, k: int) -> tuple[int, ...]:
    """One bit mask per combination of ``blocks - k`` blocks, in ``itertools`` order."""
    block_mask = []
    shift = 0
    for size in block_sizes(blocks):
        block_mask.append(((1 << size) - 1) << shift)
        shift += size
    combos = itertools.combinations(range(blocks), blocks - k)
    return tuple(sum(block_mask[i] for i in combo) for combo in combos)


def block_keys(simhashes: U64, blocks: int, k: int) -> I64:
    """Block keys of each SimHash, shape ``(n_docs, C(blocks, blocks - k))``."""
    masks, salts = block_key_constants(blocks, k)
    return as_int64(kernels.backend.masked_keys(simhashes, masks, salts))


@lru_cache(maxsize=16)
def block_key_constants(blocks: int, k: int) -> tuple[U64, U64]:
    """The masks of :func:`block_masks` and the salt of each combination, as ``uint64``
    (:func:`block_keys` masks a SimHash with each, salts it and mixes it)."""
    masks = np.array(block_masks(blocks, k), dtype=np.uint64)
    salts = [((combo + 1) * _COMBO_SALT) & MASK64 for combo in range(len(masks))]
    return masks, np.array(salts, dtype=np.uint64)


def stored_block_keys(
    simhashes: U64, shingle_counts: I64, blocks: int, k: int, max_shingles: int
) -> I64:
    """The block keys a store keeps of each SimHash, shape ``(n_docs, C(blocks, blocks - k))``:
    :func:`block_keys` for documents of at most ``max_shingles`` distinct shingles (``0``:
    all), and for longer ones a key of the whole SimHash in every slot (:func:`whole_keys`)."""
    keys = block_keys(simhashes, blocks, k)
    if max_shingles:
        long = shingle_counts > max_shingles
        if long.any():
            keys[long] = whole_keys(simhashes[long], keys.shape[1])
    return keys


def whole_keys(simhashes: U64, slots: int) -> I64:
    """A key of each whole SimHash per slot, shape ``(n_docs, slots)``: two documents share one
    when their SimHashes are equal (a :func:`block_keys` key, hashed otherwise, equals one by
    a 64-bit accident only)."""
    salts = (np.arange(1, slots + 1, dtype=np.uint64) * np.uint64(_WHOLE_SALT))[None, :]
    return as_int64(mix64(mix64(simhashes[:, None] ^ salts) ^ np.uint64(_WHOLE_SALT)))
