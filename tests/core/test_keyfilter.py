"""The key filter: it passes every key added to it, few others, and is the same array on both
kernel backends (a filter built by one is read by the other)."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.core import kernels
from dedup_store.core.keyfilter import KeyFilter
from dedup_store.db.schema.encoding import BAND, BLOCK


def _keys(seed: int, count: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-(2**63), 2**63 - 1, count, dtype=np.int64)


def test_every_key_added_passes_and_about_one_absent_key_in_a_hundred() -> None:
    added = {slot: _keys(slot, 20_000) for slot in range(1, 6)}
    found = KeyFilter.sized(5 * 20_000)
    for slot, keys in added.items():
        found.add(BAND, slot, keys)
    for slot, keys in added.items():
        assert found.has(BAND, slot, keys).all()
    absent = _keys(99, 200_000)
    rate = found.has(BAND, 3, absent).mean()
    assert 0.003 < rate < 0.02
    # a key passes for its own kind and slot, not for the others
    assert found.has(BAND, 6, added[1]).mean() < 0.02
    assert found.has(BLOCK, 1, added[1]).mean() < 0.02


def test_both_backends_build_the_same_filter_and_answer_alike() -> None:
    assert kernels.COMPILED is not None, "tests need the compiled kernels"
    keys, queries = _keys(1, 5_000), np.concatenate([_keys(1, 50), _keys(2, 5_000)])
    words, answers = [], []
    for backend in (kernels.COMPILED, kernels.REFERENCE):
        with kernels.use(backend):
            found = KeyFilter.sized(len(keys), bits_per_key=4)  # many false positives to compare
            found.add(BLOCK, 2, keys)
            words.append(found.words.copy())
            answers.append(found.has(BLOCK, 2, queries))
    assert np.array_equal(words[0], words[1])
    assert np.array_equal(answers[0], answers[1])
    assert answers[0][:50].all() and 0 < answers[0][50:].sum() < 5_000


def test_a_filter_reads_back_from_its_bytes() -> None:
    found = KeyFilter.sized(1_000)
    found.add(BAND, 1, _keys(3, 1_000))
    assert found.count == 1_000 and found.room() == found.nbytes * 8 // 10 - 1_000
    again = KeyFilter.from_bytes(found.to_bytes(), found.count)
    assert np.array_equal(again.words, found.words) and again.count == 1_000
    assert again.has(BAND, 1, _keys(3, 1_000)).all()


def test_a_filter_is_whole_blocks() -> None:
    with pytest.raises(ValueError, match="blocks of eight"):
        KeyFilter(np.zeros(12, dtype=np.uint32))
    with pytest.raises(ValueError, match="blocks of eight"):
        kernels.REFERENCE.filter_has(np.zeros(12, dtype=np.uint32), np.zeros(1, np.uint64), 0)
    assert kernels.COMPILED is not None
    with pytest.raises(ValueError, match="blocks of eight"):
        kernels.COMPILED.filter_has(np.zeros(12, dtype=np.uint32), np.zeros(1, np.uint64), 0)
    assert KeyFilter.sized(0).nbytes == 32  # one block at least
