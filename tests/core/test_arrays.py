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
