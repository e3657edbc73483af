"""The numpy array types of the core and the store, by element type."""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
IntT = TypeVar("IntT", np.int64, np.uint64, np.int32)


def ranges(starts: I64, ends: I64) -> I64:
    """``concatenate([arange(s, e) for s, e in zip(starts, ends)])``, vectorized."""
    lengths = ends - starts
    firsts = np.cumsum(lengths) - lengths
    positions: I64 = np.arange(int(lengths.sum()), dtype=np.int64)
    positions += np.repeat(starts - firsts, lengths)
    return positions


def distinct(values: npt.NDArray[IntT]) -> npt.NDArray[IntT]:
    """The sorted distinct values of a 1-D integer array: ``np.unique`` by one sort (numpy 2's
    ``np.unique`` hashes first, which is many times slower for the key arrays of a batch)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
