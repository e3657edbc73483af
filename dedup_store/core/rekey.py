"""Secondary keys that split a hot band or SimHash block bucket.

A band or block key shared by more than ``hot_key_limit`` stored documents is *hot*: looking it
up would cost its whole bucket. Its bucket is re-keyed with more bits of the same fingerprint,
each secondary key being the primary key hashed together with those further bits, so a lookup
of a hot slot costs a bounded probe per secondary key and still meets the near-duplicates.

* SimHash block slot ``i`` (bit mask ``block_masks(blocks, k)[i]``): the bits outside the mask
  are cut into ``k + 1`` contiguous parts, one secondary key per part. Two SimHashes within
  Hamming distance ``k`` that agree on the slot's bits differ in at most ``k`` of the other
  bits, so at least one part is equal (pigeonhole): re-keying loses no pair within ``k``
  while each secondary key leads to at most ``hot_key_limit`` documents. SimHashes equal on
  every bit (distinct texts of one template) share every secondary key too: a family of more
  than ``hot_key_limit`` of them is met ``hot_key_limit`` at a time.
* MinHash band slot ``i`` (``threshold`` scheme): the signature positions outside band ``i``
  are cut into groups of :data:`REKEY_ROWS` positions, one secondary key per group. A second
  LSH stage: a pair of Jaccard ``J`` sharing band ``i`` shares a secondary key with
  probability ``1 - (1 - J**4)**g`` (``g`` groups, 19 with the default 84 min-hashes): about
  0.99995 at ``J = 0.8`` and ``1 - 2e-9`` at ``J = 0.9``. Each secondary bucket is ``J**4``
  (0.41 at 0.8) of the primary one for documents at that similarity, and far smaller for
  unrelated documents that only share the band.
* ``broder`` mega-shingle keys (and band keys of signatures with fewer than ``REKEY_ROWS``
  positions outside a band) are not re-keyed: a hot one keeps yielding its
  ``hot_key_limit`` oldest documents.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dedup_store.core.arrays import I64, U32, U64
from dedup_store.core.hashing import as_int64, combine_groups
from dedup_store.core.mixing import mix64
from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import block_masks

#: Signature positions per secondary band key.
REKEY_ROWS = 4
BAND, BLOCK = 0, 1
_BAND_SALT = 1 << 24
_BLOCK_SALT = 0x3C6EF372FE94F82B


def rekeyed(params: FingerprintParams, kind: int) -> bool:
    """Whether hot keys of ``kind`` (``BAND`` or ``BLOCK``) are re-keyed under ``params``."""
    if params.hot_key_limit <= 0:
        return False
    if kind == BLOCK:
        return True
    return params.scheme == "threshold" and secondary_count(params, BAND) > 0


def secondary_count(params: FingerprintParams, kind: int) -> int:
    """How many secondary keys one document has per slot of ``kind``."""
    if kind == BLOCK:
        return params.simhash_k + 1
    _, rows = params.bands
    return (params.num_perm - rows) // REKEY_ROWS


def band_secondary_keys(signatures: U32, primary: I64, slot: int, params: FingerprintParams) -> I64:
    """Secondary keys of band slot ``slot`` (1-based), shape ``(n, secondary_count)``.

    Args:
        signatures: ``(n, num_perm)`` MinHash signatures.
        primary: the documents' key of that slot, shape ``(n,)``.
        slot: the band's number, from 1.
        params: the store's params (``threshold`` scheme).
    """
    positions = _band_positions(params.num_perm, params.bands[1], slot)
    n, groups = len(signatures), len(positions)
    values = np.empty((n, groups, REKEY_ROWS + 1), dtype=np.uint64)
    values[:, :, 0] = primary.view(np.uint64)[:, None]
    values[:, :, 1:] = signatures[:, positions]
    salts = _BAND_SALT + slot * 1024 + np.arange(groups, dtype=np.uint64)
    return as_int64(combine_groups(values, salts))


@lru_cache(maxsize=64)
def _band_positions(num_perm: int, rows: int, slot: int) -> npt.NDArray[np.intp]:
    """The signature positions of each secondary group of band ``slot``: ``(groups, rows)``."""
    start = (slot - 1) * rows
    outside = np.concatenate([np.arange(start), np.arange(start + rows, num_perm)])
    groups = len(outside) // REKEY_ROWS
    return outside[: groups * REKEY_ROWS].reshape(groups, REKEY_ROWS)


def block_secondary_keys(simhashes: U64, primary: I64, slot: int, blocks: int, k: int) -> I64:
    """Secondary keys of SimHash block slot ``slot`` (1-based), shape ``(n, k + 1)``."""
    masks, salts = _part_masks(blocks, k, slot)
    parts = mix64((simhashes[:, None] & masks[None, :]) ^ salts[None, :])
    return as_int64(mix64(primary.view(np.uint64)[:, None] ^ parts))


@lru_cache(maxsize=256)
def _part_masks(blocks: int, k: int, slot: int) -> tuple[U64, U64]:
    """The ``k + 1`` part masks of the bits outside slot ``slot``'s mask, and their salts."""
    mask = block_masks(blocks, k)[slot - 1]
    free = [bit for bit in range(64) if not mask >> bit & 1]
    cuts = np.array_split(np.array(free, dtype=np.int64), k + 1)
    parts = [sum(1 << int(bit) for bit in cut) for cut in cuts]
    salts = [(_BLOCK_SALT * (slot * 64 + j + 1)) & ((1 << 64) - 1) for j in range(k + 1)]
    return np.array(parts, dtype=np.uint64), np.array(salts, dtype=np.uint64)


def secondary_keys(
    params: FingerprintParams,
    kind: int,
    slot: int,
    primary: I64,
    signatures: U32 | None = None,
    simhashes: U64 | None = None,
) -> I64:
    """Secondary keys of slot ``slot`` of ``kind`` for ``n`` documents, ``(n, count)``.

    ``signatures`` are needed for band slots, ``simhashes`` for block slots.
    """
    if kind == BAND:
        assert signatures is not None
        return band_secondary_keys(signatures, primary, slot, params)
    assert simhashes is not None
    return block_secondary_keys(simhashes, primary, slot, params.simhash_blocks, params.simhash_k)


def all_secondary_keys(
    params: FingerprintParams,
    kind: int,
    keys: I64,
    signatures: U32,
    simhashes: U64,
) -> I64:
    """Secondary keys of every slot of ``kind``: ``(n, slots, count)`` for primary ``keys``
    ``(n, slots)`` (all slots in one pass; slot ``j`` equals :func:`secondary_keys` of it)."""
    n, slots = keys.shape
    if kind == BAND:
        positions, salts = _all_band_constants(params.num_perm, params.bands[1], slots)
        groups = positions.shape[1]
        values = np.empty((n, slots, groups, REKEY_ROWS + 1), dtype=np.uint64)
        values[..., 0] = keys.view(np.uint64)[:, :, None]
        values[..., 1:] = signatures[:, positions]
        combined = combine_groups(values.reshape(n, slots * groups, REKEY_ROWS + 1), salts)
        return as_int64(combined).reshape(n, slots, groups)
    masks, part_salts = _all_part_masks(params.simhash_blocks, params.simhash_k)
    parts = mix64((simhashes[:, None, None] & masks[None]) ^ part_salts[None])
    return as_int64(mix64(keys.view(np.uint64)[:, :, None] ^ parts))


@lru_cache(maxsize=16)
def _all_band_constants(num_perm: int, rows: int, slots: int) -> tuple[npt.NDArray[np.intp], U64]:
    """The positions ``(slots, groups, REKEY_ROWS)`` and salts of every band slot."""
    positions = np.stack([_band_positions(num_perm, rows, slot) for slot in range(1, slots + 1)])
    groups = positions.shape[1]
    salts = [_BAND_SALT + slot * 1024 + g for slot in range(1, slots + 1) for g in range(groups)]
    return positions, np.array(salts, dtype=np.uint64)


@lru_cache(maxsize=16)
def _all_part_masks(blocks: int, k: int) -> tuple[U64, U64]:
    """The part masks and salts of every block slot, ``(slots, k + 1)`` each."""
    count = len(block_masks(blocks, k))
    tables = [_part_masks(blocks, k, slot) for slot in range(1, count + 1)]
    return np.stack([t[0] for t in tables]), np.stack([t[1] for t in tables])
