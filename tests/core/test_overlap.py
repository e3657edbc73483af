"""Intersection sizes of sorted shingle arrays, compiled and reference alike."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.core.kernels import Backend
from dedup_store.core.overlap import intersection_sizes

RNG = np.random.default_rng(5)


def _groups() -> tuple[np.ndarray, np.ndarray]:
    # lengths from empty to far longer than the others (the galloping search), small value
    # ranges so that groups overlap, and repeated values (two hashes with the same top bits)
    lengths = [0, 1, 2, 5, 17, 40, 300, 3000, 25_000]
    groups = [np.sort(RNG.integers(-500, 500, size=n)).astype(np.int32) for n in lengths]
    groups.append(np.array([-(2**31), -1, 0, 2**31 - 1], dtype=np.int32))
    offsets = np.concatenate([[0], np.cumsum([len(g) for g in groups])]).astype(np.int64)
    return np.concatenate(groups), offsets


def _naive(values: np.ndarray, offsets: np.ndarray, a: int, b: int) -> int:
    x, y = values[offsets[a] : offsets[a + 1]], values[offsets[b] : offsets[b + 1]]
    short, long = (x, y) if len(x) <= len(y) else (y, x)
    present = set(long.tolist())
    return sum(v in present for v in short.tolist())


def test_every_pair_of_groups_counts_the_shorter_groups_values_found_in_the_other(
    backend: Backend,
) -> None:
    values, offsets = _groups()
    n = len(offsets) - 1
    left, right = (grid.ravel().astype(np.int64) for grid in np.meshgrid(range(n), range(n)))
    expected = [_naive(values, offsets, a, b) for a, b in zip(left, right, strict=True)]
    assert intersection_sizes(values, offsets, left, right).tolist() == expected


def test_the_kernels_refuse_pairs_outside_the_groups(backend: Backend) -> None:
    values, offsets = _groups()
    with pytest.raises(ValueError, match="groups"):
        intersection_sizes(values, offsets, np.array([0]), np.array([99]))
    backwards = offsets[::-1].copy()
    with pytest.raises(ValueError, match="groups"):
        intersection_sizes(values, backwards, np.array([0]), np.array([0]))
