"""The numpy array types of the core and the store, by element type."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
IntT = TypeVar("IntT", np.int64, np.uint64, np.int32)
T = TypeVar("T", bound=np.generic)


def ranges(starts: I64, ends: I64) -> I64:
    """``concatenate([arange(s, e) for s, e in zip(starts, ends)])``, vectorized."""
    lengths = ends - starts
    firsts = np.cumsum(lengths) - lengths
    positions: I64 = np.arange(int(lengths.sum()), dtype=np.int64)
    positions += np.repeat(starts - firsts, lengths)
    return positions


def stable_order(values: npt.NDArray[np.signedinteger[Any]]) -> I64:
    """``np.argsort(values, kind="stable")``, by one plain sort of ``(value, position)`` packed
    in 64 bits, many times faster than numpy's stable sort of 64-bit integers.

    Values that fit in 32 bits (such as excerpt keys) are packed whole. Wider ones (hashed band
    and block keys) are packed as their upper bits, which order them unless two different
    values share those bits; the sorted values then show a pair out of order, and numpy's
    stable sort orders them instead.
    """
    n = len(values)
    if n == 0 or n >= 2**31:
        return np.argsort(values, kind="stable")
    positions = np.arange(n, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if low >= -(2**31) and high < 2**31:
        packed = np.sort((values.astype(np.int64) << np.int64(32)) | positions)
        return packed & np.int64(0xFFFF_FFFF)
    bits = max(int(n - 1).bit_length(), 1)
    packed = np.sort(((values.astype(np.int64) >> np.int64(bits)) << np.int64(bits)) | positions)
    order: I64 = packed & np.int64((1 << bits) - 1)
    ordered = values[order]
    if np.all(ordered[1:] >= ordered[:-1]):
        return order
    return np.argsort(values, kind="stable")


def grown(values: npt.NDArray[T], size: int) -> npt.NDArray[T]:
    """``values`` followed by zeros, ``size`` rows in all (of the same shape as its rows)."""
    out = np.zeros((size, *values.shape[1:]), dtype=values.dtype)
    out[: len(values)] = values
    return out


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


def merged_segments(
    kept: npt.NDArray[np.bool_], here: tuple[I64, I32], there: tuple[I64, I32]
) -> tuple[I64, I32]:
    """Segments ``(offsets, values)`` of a list of documents, from ``here`` for those
    ``kept`` and ``there`` for the others (each in the list's order)."""
    counts = np.zeros(len(kept), dtype=np.int64)
    counts[kept] = np.diff(here[0])
    counts[~kept] = np.diff(there[0])
    starts = np.zeros(len(kept), dtype=np.int64)
    starts[kept] = here[0][:-1]
    starts[~kept] = there[0][:-1] + len(here[1])
    offsets = np.zeros(len(kept) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.concatenate([here[1], there[1]])[ranges(starts, starts + counts)]
    return offsets, values
