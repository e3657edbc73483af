"""Secondary keys of hot band and block buckets (no database)."""

from __future__ import annotations

import numpy as np

from dedup_store.core import FingerprintParams
from dedup_store.core.arrays import U64
from dedup_store.core.lsh import band_keys
from dedup_store.core.minhash import U32
from dedup_store.core.rekey import (
    BAND,
    BLOCK,
    all_secondary_keys,
    block_secondary_keys,
    secondary_count,
    secondary_keys,
)
from dedup_store.core.simhash import block_keys, block_masks, hamming, hamming_many


def _planted_simhashes(rng: np.random.Generator, n: int, k: int) -> U64:
    """``n`` random SimHashes and, after them, ``n`` copies each with up to ``k`` bits flipped."""
    base = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    flips = np.zeros(n, dtype=np.uint64)
    for _ in range(k):
        bits = rng.integers(0, 64, size=n).astype(np.uint64)
        flips |= np.left_shift(np.uint64(1), bits)
    return np.concatenate([base, base ^ flips])


def test_block_rekeying_keeps_every_pair_within_k() -> None:
    params = FingerprintParams()
    k, blocks = params.simhash_k, params.simhash_blocks
    rng = np.random.default_rng(7)
    # one hot bucket per slot: everything agrees on the slot's bits with a common prefix
    hashes = _planted_simhashes(rng, 300, k)
    primary = block_keys(hashes, blocks, k)
    for slot in range(1, primary.shape[1] + 1):
        secondary = block_secondary_keys(hashes, primary[:, slot - 1], slot, blocks, k)
        assert secondary.shape == (len(hashes), k + 1)
        x = hashes[:, None] ^ hashes[None, :]
        distance = np.unpackbits(x.view(np.uint8).reshape(len(hashes), len(hashes), 8), axis=2)
        near = distance.sum(axis=2) <= k
        same_primary = primary[:, slot - 1][:, None] == primary[:, slot - 1][None, :]
        shared = (secondary[:, None, :, None] == secondary[None, :, None, :]).any(axis=(2, 3))
        wanted = near & same_primary
        assert wanted.sum() > len(hashes)  # planted pairs share slots
        assert not (wanted & ~shared).any()


def test_block_rekeying_splits_a_bucket() -> None:
    params = FingerprintParams()
    rng = np.random.default_rng(3)
    # 2000 SimHashes that all agree on slot 1's bits, otherwise random
    mask = np.uint64(block_masks(params.simhash_blocks, params.simhash_k)[0])
    hashes = (rng.integers(0, 2**64, size=2000, dtype=np.uint64) & ~mask) | (mask & np.uint64(5))
    primary = block_keys(hashes, params.simhash_blocks, params.simhash_k)[:, 0]
    assert len(set(primary.tolist())) == 1
    secondary = block_secondary_keys(hashes, primary, 1, params.simhash_blocks, params.simhash_k)
    _, counts = np.unique(secondary, return_counts=True)
    assert counts.max() < 20


def _similar_signatures(
    rng: np.random.Generator, n: int, jaccard: float, num_perm: int
) -> tuple[U32, U32]:
    """Pairs of signatures whose positions agree with probability ``jaccard``."""
    a = rng.integers(0, 2**32, size=(n, num_perm), dtype=np.uint32)
    b = a.copy()
    differ = rng.random((n, num_perm)) >= jaccard
    b[differ] = rng.integers(0, 2**32, size=int(differ.sum()), dtype=np.uint32)
    return a, b


def test_band_rekeying_recall_inside_a_hot_bucket() -> None:
    params = FingerprintParams()
    _, rows = params.bands
    groups = secondary_count(params, BAND)
    assert groups == (params.num_perm - rows) // 4
    rng = np.random.default_rng(11)
    for jaccard, floor in ((0.8, 0.999), (0.9, 0.9999)):
        a, b = _similar_signatures(rng, 20000, jaccard, params.num_perm)
        b[:, :rows] = a[:, :rows]  # every pair shares band 1
        keys_a, keys_b = band_keys(a, params), band_keys(b, params)
        assert (keys_a[:, 0] == keys_b[:, 0]).all()
        empty = np.zeros(len(a), dtype=np.uint64)
        sec_a = all_secondary_keys(params, BAND, keys_a, a, empty)[:, 0]
        sec_b = all_secondary_keys(params, BAND, keys_b, b, empty)[:, 0]
        recall = float((sec_a == sec_b).any(axis=1).mean())
        assert recall >= floor, (jaccard, recall)
    # unrelated signatures sharing the band share no secondary key
    a, b = _similar_signatures(rng, 2000, 0.0, params.num_perm)
    b[:, :rows] = a[:, :rows]
    empty = np.zeros(len(a), dtype=np.uint64)
    sec_a = all_secondary_keys(params, BAND, band_keys(a, params), a, empty)[:, 0]
    sec_b = all_secondary_keys(params, BAND, band_keys(b, params), b, empty)[:, 0]
    assert not (sec_a == sec_b).any()


def test_secondary_keys_of_slots_and_kinds_differ() -> None:
    params = FingerprintParams()
    rng = np.random.default_rng(5)
    signatures = rng.integers(0, 2**32, size=(50, params.num_perm), dtype=np.uint32)
    hashes = rng.integers(0, 2**64, size=50, dtype=np.uint64)
    bands = all_secondary_keys(params, BAND, band_keys(signatures, params), signatures, hashes)
    blocks_ = block_keys(hashes, params.simhash_blocks, params.simhash_k)
    block = all_secondary_keys(params, BLOCK, blocks_, signatures, hashes)
    assert block.shape == (50, params.block_key_count, params.simhash_k + 1)
    values = np.concatenate([bands.ravel(), block.ravel()])
    assert len(np.unique(values)) == len(values)


def test_all_slots_at_once_equal_each_slot() -> None:
    params = FingerprintParams()
    rng = np.random.default_rng(9)
    signatures = rng.integers(0, 2**32, size=(7, params.num_perm), dtype=np.uint32)
    hashes = rng.integers(0, 2**64, size=7, dtype=np.uint64)
    primary = {
        BAND: band_keys(signatures, params),
        BLOCK: block_keys(hashes, params.simhash_blocks, params.simhash_k),
    }
    for kind, keys in primary.items():
        together = all_secondary_keys(params, kind, keys, signatures, hashes)
        for j in range(keys.shape[1]):
            alone = secondary_keys(params, kind, j + 1, keys[:, j], signatures, hashes)
            assert (together[:, j, :] == alone).all()


def test_hamming_many_counts_the_differing_bits_of_each_pair() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**63, 500, dtype=np.int64).view(np.uint64) * np.uint64(2)
    b = a ^ rng.integers(0, 2**63, 500, dtype=np.int64).view(np.uint64)
    expected = [hamming(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    assert hamming_many(a, b).tolist() == expected
    assert hamming_many(a, a).tolist() == [0] * 500
