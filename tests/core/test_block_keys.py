"""Block keys of long documents (more than ``simhash_key_max_shingles`` distinct shingles): a
key of the whole SimHash in every slot, so that a long document meets, through its block keys,
only documents of an equal SimHash; short documents, stores of older formats and stores without
the excerpt index keep the pigeonhole keys."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from dedup_store.core import FingerprintParams, fingerprint, fingerprint_batch
from dedup_store.core.fingerprint import document_block_keys
from dedup_store.core.params import PARAMS_FORMAT
from dedup_store.core.simhash import block_keys, stored_block_keys, whole_keys

SHORT = "The valley flooded overnight and the engineers opened the spillway at dawn."
LONG = " ".join(
    f"paragraph {i} describes the reservoir gauge number {i * 7} and the spillway crew"
    for i in range(40)
)
PARAMS = FingerprintParams(simhash_key_max_shingles=50)


def test_long_documents_get_whole_simhash_keys_short_ones_pigeonhole_keys() -> None:
    batch = fingerprint_batch([SHORT, LONG], PARAMS)
    short_shingles, long_shingles = batch.shingle_counts.tolist()
    assert short_shingles <= 50 < long_shingles
    pigeonhole = block_keys(batch.simhashes, PARAMS.simhash_blocks, PARAMS.simhash_k)
    assert np.array_equal(batch.block_keys[0], pigeonhole[0])
    whole = whole_keys(batch.simhashes[1:], PARAMS.block_key_count)[0]
    assert np.array_equal(batch.block_keys[1], whole)
    assert len(set(whole.tolist())) == PARAMS.block_key_count  # one key a slot, all distinct
    assert not set(whole.tolist()) & set(pigeonhole[1].tolist())
    # one document alone gets the keys it gets in a batch
    assert np.array_equal(fingerprint(LONG, PARAMS).block_keys, whole)


def test_whole_keys_are_shared_by_equal_simhashes_only() -> None:
    simhashes = np.array([0x0123_4567_89AB_CDEF, 0x0123_4567_89AB_CDEF, 0x0123_4567_89AB_CDEE])
    keys = stored_block_keys(simhashes.astype(np.uint64), np.full(3, 1000), 5, 3, 50)
    assert np.array_equal(keys[0], keys[1])  # equal SimHashes: every slot
    assert not np.any(keys[0] == keys[2])  # one bit apart: no slot, though within simhash_k
    # a short document of the same SimHash keeps its pigeonhole keys, which the long ones lack
    short = stored_block_keys(simhashes[:1].astype(np.uint64), np.array([10]), 5, 3, 50)
    assert not np.any(short[0] == keys[0])


def test_no_limit_and_no_excerpt_index_keep_pigeonhole_keys_for_every_document() -> None:
    for params in (
        FingerprintParams(simhash_key_max_shingles=0),
        dataclasses.replace(PARAMS, containment=0.0),  # nothing else finds long near-duplicates
    ):
        batch = fingerprint_batch([SHORT, LONG], params)
        expected = block_keys(batch.simhashes, params.simhash_blocks, params.simhash_k)
        assert np.array_equal(batch.block_keys, expected)


def test_weighted_simhashes_follow_the_same_rule() -> None:
    params = dataclasses.replace(PARAMS, simhash_weights="tfidf")
    batch = fingerprint_batch([SHORT, LONG], params)
    assert np.array_equal(
        batch.block_keys, document_block_keys(batch.simhashes, batch.shingle_counts, params)
    )
    assert np.array_equal(batch.block_keys[1], whole_keys(batch.simhashes[1:], 10)[0])


def test_stores_of_older_formats_keep_block_keys_for_long_documents() -> None:
    recorded = FingerprintParams().to_dict()
    del recorded["simhash_key_max_shingles"]
    for recorded_format in range(1, PARAMS_FORMAT):
        old = FingerprintParams.from_stored({"format": recorded_format, **recorded})
        assert old.simhash_key_max_shingles == 0
        batch = fingerprint_batch([LONG], old)
        expected = block_keys(batch.simhashes, old.simhash_blocks, old.simhash_k)
        assert np.array_equal(batch.block_keys, expected)
    current = json.loads(PARAMS.to_json())
    assert current["format"] == PARAMS_FORMAT == 5 and current["simhash_key_max_shingles"] == 50
    assert FingerprintParams.from_json(PARAMS.to_json()) == PARAMS
