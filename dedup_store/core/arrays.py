"""The numpy array types of the core and the store, by element type."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]


def ranges(starts: I64, ends: I64) -> I64:
    """``concatenate([arange(s, e) for s, e in zip(starts, ends)])``, vectorized."""
    lengths = ends - starts
    firsts = np.cumsum(lengths) - lengths
    positions: I64 = np.arange(int(lengths.sum()), dtype=np.int64)
    positions += np.repeat(starts - firsts, lengths)
    return positions
