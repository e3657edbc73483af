"""Array helpers of the core: the stable order of a batch's keys."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.core.arrays import stable_order


@pytest.mark.parametrize(
    ("dtype", "low", "high"),
    [(np.int32, -(2**31), 2**31), (np.int64, -(2**31), 2**31), (np.int64, -(2**62), 2**62)],
)
@pytest.mark.parametrize("size", [0, 1, 7, 50_000])
def test_stable_order_is_numpys_stable_argsort(
    dtype: type[np.signedinteger], low: int, high: int, size: int
) -> None:
    values = np.random.default_rng(size).integers(low, high, size=size).astype(dtype)
    values[::4] = values[1] if size > 3 else values[::4]  # ties keep their positions' order
    expected = np.argsort(values, kind="stable")
    assert stable_order(values).tolist() == expected.tolist()


@pytest.mark.parametrize("size", [2, 1_000, 50_000])
def test_stable_order_of_64_bit_keys_with_extremes_and_ties(size: int) -> None:
    rng = np.random.default_rng(size)
    values = rng.integers(-(2**63), 2**63 - 1, size=size, dtype=np.int64)
    values[::3] = values[size // 2]  # one key many times, ties in position order
    values[0], values[-1] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    assert stable_order(values).tolist() == np.argsort(values, kind="stable").tolist()


def test_stable_order_of_keys_that_differ_only_below_the_packed_bits() -> None:
    # equal upper bits, different lower ones: the packed sort cannot order them alone
    values = (np.arange(5_000, dtype=np.int64) % 7) << 40
    values += np.random.default_rng(3).integers(0, 1 << 20, size=len(values))
    values[::5] = values[1]
    assert stable_order(values).tolist() == np.argsort(values, kind="stable").tolist()
