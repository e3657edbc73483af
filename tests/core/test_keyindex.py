"""The in-memory key index of bulk loads: both structures agree with a brute-force reference."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.core import kernels
from dedup_store.core.keyindex import HashedKeys, LevelKeys, key_index


def _structures(cap: int) -> list[HashedKeys | LevelKeys]:
    assert isinstance(kernels.backend, kernels.CompiledBackend), "tests need the compiled kernels"
    return [LevelKeys(cap), HashedKeys(cap, kernels.backend)]


def _oldest(entries: list[tuple[int, int]], keys: np.ndarray, cap: int) -> list[tuple[int, int]]:
    """``(key, id)`` of the ``cap`` oldest ids of each of ``keys``, by key then id."""
    wanted = set(keys.tolist())
    by_key: dict[int, list[int]] = {}
    for key, doc in entries:
        if key in wanted:
            by_key.setdefault(key, []).append(doc)
    return [(key, doc) for key in sorted(by_key) for doc in sorted(by_key[key])[: cap or None]]


@pytest.mark.parametrize("cap", [0, 1, 3])
def test_lookups_find_the_oldest_documents_of_each_key(cap: int) -> None:
    rng = np.random.default_rng(cap)
    pool = rng.integers(-(2**63), 2**63 - 1, size=40, dtype=np.int64)
    structures = _structures(cap)
    entries: dict[str, list[tuple[int, int]]] = {"a": [], "b": []}
    next_id = 1
    for batch in range(80):
        group = "ab"[batch % 2]
        size = int(rng.integers(0, 30))
        keys = rng.choice(pool, size=size)
        ids = np.arange(next_id, next_id + size, dtype=np.int64)
        next_id += size
        for index in structures:
            index.add(group, keys, ids)
        entries[group] += list(zip(keys.tolist(), ids.tolist(), strict=True))
        query = np.unique(np.concatenate([rng.choice(pool, size=15), [7]]))
        expected = _oldest(entries[group], query, cap)
        for index in structures:
            found_ids, found_keys = index.find(group, query)
            assert list(zip(found_keys.tolist(), found_ids.tolist(), strict=True)) == expected
    for index in structures:
        assert index.find("missing", pool[:3])[0].size == 0


def test_the_compiled_kernels_use_the_hash_tables() -> None:
    assert isinstance(key_index(3), HashedKeys)


def test_a_hash_table_grows_and_keeps_the_order_of_each_key() -> None:
    index = _structures(0)[1]
    keys = np.repeat(np.arange(5, dtype=np.int64), 1000)
    ids = np.arange(1, len(keys) + 1, dtype=np.int64)
    for start in range(0, len(keys), 97):
        index.add("g", keys[start : start + 97], ids[start : start + 97])
    found_ids, found_keys = index.find("g", np.arange(5, dtype=np.int64))
    assert found_ids.tolist() == ids.tolist() and found_keys.tolist() == keys.tolist()


def test_a_table_is_not_moved_into_one_too_small_for_it() -> None:
    backend = kernels.backend
    assert isinstance(backend, kernels.CompiledBackend)
    keys, ids = np.zeros(16, np.uint64), np.zeros(16, np.int64)
    backend.multimap_insert(keys, ids, np.arange(12, dtype=np.uint64), np.arange(1, 13), 0)
    small_keys, small_ids = np.empty(8, np.uint64), np.empty(8, np.int64)
    with pytest.raises(ValueError, match="too small"):
        backend.multimap_rehash(keys, ids, small_keys, small_ids)
    grown_keys, grown_ids = np.empty(32, np.uint64), np.empty(32, np.int64)
    backend.multimap_rehash(keys, ids, grown_keys, grown_ids)
    found_ids, found_keys = backend.multimap_find(
        grown_keys, grown_ids, np.arange(12, dtype=np.uint64)
    )
    assert found_keys.tolist() == list(range(12)) and found_ids.tolist() == list(range(1, 13))


def test_both_structures_give_the_keys_they_hold() -> None:
    """A group's keys, one per entry held (a key past ``cap`` entries is held ``cap`` times):
    what the settled tier's key filter is made from."""
    keys = np.array([5, 7, 5, 9, 5, 7, -3], dtype=np.int64)
    for index in _structures(2):
        index.add("a", keys[:4], np.arange(1, 5, dtype=np.int64))
        index.add("a", keys[4:], np.arange(5, 8, dtype=np.int64))
        assert sorted(index.keys("a").tolist()) == [-3, 5, 5, 7, 7, 9]
        assert index.entries("a") == 6
        assert index.keys("missing").size == index.entries("missing") == 0
