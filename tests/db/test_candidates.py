"""Candidate pairs of a batch, joined back to the new documents in numpy."""

from __future__ import annotations

import numpy as np

from dedup_store.db.candidates.lookup import KeyGroup, merge, pairs_inside
from dedup_store.db.schema.encoding import BAND, BLOCK, SAMPLE


def _ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_pairs_inside_a_batch_are_older_first_and_complete() -> None:
    group = KeyGroup(BAND, 1, keys=_ids(7, 3, 7, 7, 5), docs=_ids(14, 11, 12, 10, 13))
    a, b = pairs_inside(group)
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(10, 12), (10, 14), (12, 14)]


def test_a_pair_found_by_any_other_key_is_not_block_only() -> None:
    a = _ids(1, 1, 2, 3, 3)
    b = _ids(9, 9, 9, 9, 9)
    kinds = np.array([BLOCK, BAND, BLOCK, SAMPLE, SAMPLE], dtype=np.int8)
    merged = merge([(a, b, kinds)])
    assert merged.a.tolist() == [1, 2, 3]
    assert merged.b.tolist() == [9, 9, 9]
    assert merged.block_only.tolist() == [False, True, False]


def test_merge_of_nothing_is_empty() -> None:
    merged = merge([(_ids(), _ids(), np.array([], dtype=np.int8))])
    assert len(merged.a) == len(merged.b) == len(merged.block_only) == 0


def _pairs_by_definition(group: KeyGroup, hot_limit: int) -> list[tuple[int, int]]:
    """Each document with the (at most ``hot_limit``) documents just before it of its key."""
    pairs = []
    for key in sorted(set(group.keys.tolist())):
        members = sorted(group.docs[group.keys == key].tolist())
        for i, newer in enumerate(members):
            older = members[max(0, i - hot_limit) : i] if hot_limit else members[:i]
            pairs += [(o, newer) for o in older]
    return pairs


def test_pairs_inside_keep_the_hot_limit_documents_just_before_each_one() -> None:
    rng = np.random.default_rng(7)
    for hot_limit in (0, 1, 3, 50):
        keys = rng.integers(0, 40, 400)
        group = KeyGroup(BAND, 1, keys, rng.permutation(400).astype(np.int64) + 1)
        a, b = pairs_inside(group, hot_limit)
        assert list(zip(a.tolist(), b.tolist(), strict=True)) == _pairs_by_definition(
            group, hot_limit
        )


def test_a_groups_keys_are_ordered_by_key_then_document() -> None:
    rng = np.random.default_rng(3)
    for low, high in ((-(2**31), 2**31), (-(2**62), 2**62)):  # excerpt keys, band keys
        keys = rng.integers(low, high, size=2000)
        keys[::3] = keys[5]  # one key owned by many documents
        for docs in (np.sort(rng.integers(0, 10**6, size=2000)), rng.permutation(2000)):
            group = KeyGroup(SAMPLE, 0, keys=keys.astype(np.int64), docs=docs.astype(np.int64))
            assert group.order.tolist() == np.lexsort((docs, keys)).tolist()
