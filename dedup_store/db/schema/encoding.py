"""How fingerprints are stored: key kinds and columns, the 32-bit form of shingles and excerpt
keys, which excerpt keys a document keeps, and PostgreSQL array literals and binary arrays."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.arrays import I32, I64, U64, ranges
from dedup_store.core.fingerprint import FingerprintBatch

#: Kinds of lookup key: LSH band keys, SimHash block keys, excerpt (sample) keys.
BAND, BLOCK, SAMPLE = 0, 1, 2
#: The name of each slotted kind of key (as the fingerprint calls its matrix of keys).
KEY_COLUMNS = {BAND: "band_keys", BLOCK: "block_keys"}

_MASK64 = (1 << 64) - 1


def slot_salt(kind: int, slot: int) -> int:
    """The signed 64-bit number that a key of ``slot`` of ``kind`` is XORed with in ``slot_keys``
    (:func:`tagged_keys`): the splitmix64 finalizer of ``(kind + 1) << 16 | slot``.

    Equal keys of different slots never meet in the one index of ``slot_keys``: each slot's keys
    are moved by a salt of their own (migration 0014 repeats this function).
    """
    z = ((((kind + 1) << 16) | slot) + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    z ^= z >> 31
    return z - (1 << 64) if z >= 1 << 63 else z


def slot_salts(band_count: int, block_count: int) -> I64:
    """The salts of band slots ``1..band_count``, then of block slots ``1..block_count``."""
    slots = [(BAND, slot) for slot in range(1, band_count + 1)]
    slots += [(BLOCK, slot) for slot in range(1, block_count + 1)]
    return np.array([slot_salt(kind, slot) for kind, slot in slots], dtype=np.int64)


def tagged_keys(bands: I64, blocks: I64) -> I64:
    """The keys of ``slot_keys`` of documents whose band and block keys are the rows of ``bands``
    and ``blocks``: one row per document, band slots then block slots, each XORed with its
    :func:`slot_salt`."""
    keys = np.concatenate([bands.astype(np.int64), blocks.astype(np.int64)], axis=1)
    return keys ^ slot_salts(bands.shape[1], blocks.shape[1])[None, :]


def sample_columns(batch: FingerprintBatch, rows: I64, ids: I64) -> tuple[I32, I64]:
    """The sample keys (top 32 bits, as stored) of the selected rows, with their document ids."""
    starts, ends = batch.sample_offsets[rows], batch.sample_offsets[rows + 1]
    keys = top32(batch.sample_keys[ranges(starts, ends)])
    counts = ends - starts
    docs = np.repeat(ids, counts)
    strides = np.repeat(excerpt_strides(counts, batch.params.max_excerpt_keys), counts)
    keep = (keys.view(np.uint32) & (strides - 1).astype(np.uint32)) == 0
    return keys[keep], docs[keep]


def excerpt_strides(counts: I64, budget: int) -> I64:
    """Per document with ``counts`` excerpt keys, the power of two ``s`` such that keeping the
    keys whose value is a multiple of ``s`` leaves about ``budget`` of them (1: keep all).

    The rule is symmetric: two documents meet on the shared keys that are multiples of the
    larger one's stride, whichever of them is stored first.
    """
    if budget <= 0:
        return np.ones(len(counts), dtype=np.int64)
    ratio = np.maximum(counts, 1) / budget
    powers = np.ceil(np.log2(np.maximum(ratio, 1.0))).astype(np.int64)
    return np.left_shift(np.int64(1), powers)


def excerpt_stride(count: int, budget: int) -> int:
    """:func:`excerpt_strides` of one document with ``count`` excerpt keys, in integers: the
    least power of two ``s`` with ``s * budget >= count`` (1 with no budget)."""
    if budget <= 0 or count <= budget:
        return 1
    return 1 << ((count - 1) // budget).bit_length()


def sparse_excerpt_keys(keys: I32, budget: int) -> I32:
    """One document's excerpt keys (top 32 bits) thinned as :func:`sample_columns` does."""
    stride = excerpt_stride(len(keys), budget)
    if stride == 1:
        return keys
    kept: I32 = keys[(keys.view(np.uint32) & np.uint32(stride - 1)) == 0]
    return kept


def top32(values: U64) -> I32:
    """The high 32 bits of 64-bit hashes, as PostgreSQL ``integer``."""
    return (values >> np.uint64(32)).astype(np.uint32).view(np.int32)


#: Shingles as stored, per document: ``(offsets, values)``, document ``i``'s being
#: ``values[offsets[i]:offsets[i + 1]]``, each sorted (see :func:`sorted_top32`).
StoredShingles = tuple[I64, I32]


def sorted_top32(batch: FingerprintBatch, rows: I64) -> StoredShingles:
    """The shingles of ``rows`` as stored (:func:`top32`), each row's sorted:
    ``(offsets, values)``, row ``i`` being ``values[offsets[i]:offsets[i + 1]]``.

    A batch's rows are sorted as unsigned 64-bit numbers, so their high halves are sorted as
    unsigned 32-bit ones: as ``integer`` each row is a run of non-negative values followed by
    a run of negative ones, and the kernel moves the second run to the front (no sort needed).
    """
    starts, ends = batch.shingle_offsets[rows], batch.shingle_offsets[rows + 1]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    if len(rows) == len(batch) and np.array_equal(rows, np.arange(len(rows))):
        shingles, within = batch.shingles, batch.shingle_offsets  # every row: no copy
    else:
        shingles, within = batch.shingles[ranges(starts, ends)], offsets
    return offsets, kernels.backend.high_halves(shingles, within)


def array_literal(values: Iterable[int]) -> str:
    """Integers as a PostgreSQL array literal, for ``CAST(:param AS bigint[])``.

    Sending one string is much cheaper than a list of Python ints, each adapted on its own.
    """
    return "{" + ",".join(map(str, values)) + "}"


def bytea_array_literal(values: Iterable[bytes]) -> str:
    """Byte strings as a PostgreSQL array literal, for ``CAST(:param AS bytea[])``: each element
    quoted in bytea's hex form (as :func:`array_literal`, one string instead of a list)."""
    return "{" + ",".join(f'"\\\\x{value.hex()}"' for value in values) + "}"


def int4_array(data: bytes) -> I32:
    """The elements of a one-dimensional ``integer[]`` in binary form (no NULLs)."""
    if len(data) <= 12:  # an empty array: dimensions 0, no bounds
        return np.empty(0, dtype=np.int32)
    pairs = np.frombuffer(data, dtype=">i4", offset=20).reshape(-1, 2)  # (length 4, value)
    return pairs[:, 1].astype(np.int32)


def int8_array(data: bytes) -> I64:
    """The elements of a one-dimensional ``bigint[]`` in binary form (no NULLs)."""
    if len(data) <= 12:  # an empty array: dimensions 0, no bounds
        return np.empty(0, dtype=np.int64)
    rows = np.frombuffer(data, dtype=np.dtype([("length", ">i4"), ("value", ">i8")]), offset=20)
    return rows["value"].astype(np.int64)
