"""What SimHash block keys meet (benchmarks.ingest_neighbours), against brute force."""

from __future__ import annotations

import numpy as np

from benchmarks.ingest_neighbours import earlier_sharing, hot_keys, neighbours, spread
from dedup_store.core import FingerprintParams
from dedup_store.core.simhash import block_keys

PARAMS = FingerprintParams()


def test_earlier_sharing_counts_the_positions_before_with_the_same_key() -> None:
    keys = np.array([5, 3, 5, 5, 3, 7], dtype=np.int64)
    assert earlier_sharing(keys).tolist() == [0, 0, 1, 2, 1, 0]


def test_earlier_sharing_matches_brute_force() -> None:
    keys = np.random.default_rng(4).integers(0, 40, 500)
    brute = [int((keys[:i] == keys[i]).sum()) for i in range(len(keys))]
    assert earlier_sharing(keys).tolist() == brute


def test_hot_keys_are_those_of_more_than_the_limit() -> None:
    keys = np.array([1] * 4 + [2] * 3 + [3], dtype=np.int64)
    assert hot_keys(keys, 3) == 1
    assert hot_keys(keys, 2) == 2


def test_independent_bits_are_32_apart_and_meet_nobody() -> None:
    simhashes = np.random.default_rng(5).integers(0, 2**63, 4000, dtype=np.uint64) * np.uint64(2)
    found = neighbours(np.arange(1, 4001), simhashes, 2000, PARAMS)
    assert 31.0 < found.spread < 33.0
    assert found.count == 2000
    assert found.start < 0.1 and found.appended < 0.2
    assert found.hot_start == found.hot_appended == 0


def test_leaning_bits_meet_more_documents_the_larger_the_store() -> None:
    # every bit set with probability 0.9: the SimHashes of long texts of one vocabulary
    rng = np.random.default_rng(6)
    bits = rng.random((6000, 64)) < 0.9
    simhashes = np.packbits(bits, axis=1, bitorder="little").view("<u8").ravel()
    found = neighbours(np.arange(1, 6001), simhashes, 5000, PARAMS)
    assert found.spread < 14.0
    assert found.appended > 3 * found.start
    keys = block_keys(simhashes, PARAMS.simhash_blocks, PARAMS.simhash_k)
    last = [
        sum(int((keys[:i, slot] == keys[i, slot]).sum()) for slot in range(keys.shape[1]))
        for i in range(5000, 6000)
    ]
    assert found.appended == np.mean(last)
    assert found.appended_read <= found.appended


def test_spread_of_one_document_is_zero() -> None:
    assert spread(np.array([7], dtype=np.uint64)) == 0.0
