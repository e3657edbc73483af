"""The rows of the key tables come out in index order, ``(key, doc_id)``, whichever way they were
made: a bulk load writes them so, and builds the index over rows already in its order."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.db.rows.key_rows import KeyRows

RNG = np.random.default_rng(7)


def _keys(documents: int, width: int) -> np.ndarray:
    """Random keys, a few values shared by many documents (as near duplicates share keys)."""
    keys = RNG.integers(-(2**63), 2**63 - 1, size=(documents, width), dtype=np.int64)
    keys[RNG.random(keys.shape) < 0.2] = 42
    keys[RNG.random(keys.shape) < 0.1] = -(2**63)
    return keys


def _in_index_order(rows: KeyRows) -> bool:
    order = np.lexsort((rows.doc, rows.key))
    return bool(np.array_equal(order, np.arange(len(rows))))


def _listed(rows: KeyRows) -> list[tuple[int, int, int, int]]:
    fields = (rows.key, rows.doc, rows.kind, rows.slot)
    return sorted(zip(*(f.tolist() for f in fields), strict=True))


def _same_rows(a: KeyRows, b: KeyRows) -> bool:
    return _listed(a) == _listed(b)


@pytest.mark.parametrize("ascending", [True, False])
def test_the_rows_of_a_batch_are_in_index_order(ascending: bool) -> None:
    ids = np.arange(1000, 1600, dtype=np.int64)
    if not ascending:
        RNG.shuffle(ids)
    rows = KeyRows.of(ids, _keys(600, 12), _keys(600, 10))
    assert len(rows) == 600 * 22
    assert _in_index_order(rows)
    assert sorted(set(rows.doc.tolist())) == sorted(ids.tolist())


def test_batches_merged_are_in_index_order_with_every_row() -> None:
    starts = (1, 501, 1201, 1202, 2000)
    parts = [
        KeyRows.of(np.arange(s, e, dtype=np.int64), _keys(e - s, 12), _keys(e - s, 10))
        for s, e in zip(starts, (*starts[1:], 2400), strict=True)
    ]
    merged = KeyRows.merged(parts)
    assert _in_index_order(merged)
    assert _same_rows(merged, KeyRows.concat(parts))


def test_batches_whose_documents_interleave_are_still_merged_in_index_order() -> None:
    ids = np.arange(1, 801, dtype=np.int64)
    RNG.shuffle(ids)
    parts = [KeyRows.of(ids[k::2], _keys(400, 12), _keys(400, 10)) for k in (0, 1)]
    merged = KeyRows.merged([*parts, KeyRows.concat([])])
    assert _in_index_order(merged)
    assert _same_rows(merged, KeyRows.concat(parts))
