"""MinHash signatures for a whole batch of documents, and Jaccard estimates.

The ``i``-th min-hash of a shingle set is ``min((a_i * x + b_i) mod 2**64)`` over its shingle
hashes ``x``, with random odd ``a_i`` drawn from ``seed``; the top 32 bits are kept. Since the
shingle hashes are already uniformly mixed 64-bit values, this multiply-add family is a cheap and
accurate stand-in for random permutations (the estimate is checked against exact Jaccard in the
tests). Every permutation is applied to all shingles of the batch at once, and the per-document
minimum is a single ``np.minimum.reduceat``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dedup_store.core import kernels
from dedup_store.core.hashing import U64

U32 = npt.NDArray[np.uint32]
_SHIFT = np.uint64(32)
_CHUNK = 1 << 16
_SMALL = 1 << 15
_PERMS_PER_PASS = 4


@lru_cache(maxsize=16)
def permutations(num_perm: int, seed: int) -> tuple[U64, U64]:
    """The ``(a, b)`` coefficients of the ``num_perm`` hash functions for ``seed``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2)
    return a, b


def minhash_signatures(
    shingles: U64, offsets: npt.NDArray[np.int64], num_perm: int, seed: int
) -> U32:
    """MinHash signatures of many shingle sets.

    Args:
        shingles: shingle hashes of all documents, concatenated.
        offsets: document ``d`` owns ``shingles[offsets[d]:offsets[d + 1]]``; every document
            must own at least one shingle.
        num_perm: signature length.
        seed: seed of the hash functions.

    Returns:
        ``uint32`` array of shape ``(n_docs, num_perm)``.
    """
    n_docs = len(offsets) - 1
    a, b = permutations(num_perm, seed)
    if kernels.compiled is not None:  # it refuses empty documents itself
        signatures = np.empty((n_docs, num_perm), dtype=np.uint32)
        kernels.compiled.minhash_minima(
            np.ascontiguousarray(shingles, dtype=np.uint64),
            np.ascontiguousarray(offsets, dtype=np.int64),
            a,
            b,
            signatures,
        )
        return signatures
    if n_docs and np.any(np.diff(offsets) <= 0):
        raise ValueError("every document needs at least one shingle")
    # numpy: one row per permutation: every pass below writes a contiguous row
    mins = np.empty((num_perm, n_docs), dtype=np.uint64)
    first = 0
    with np.errstate(over="ignore"):
        while first < n_docs:
            # a chunk of documents whose shingles fit in cache: every pass below stays there
            last = max(first + 1, int(np.searchsorted(offsets, offsets[first] + _CHUNK)) - 1)
            lo, hi = offsets[first], offsets[last]
            _chunk_minima(shingles[lo:hi], offsets[first:last] - lo, a, b, mins[:, first:last])
            first = last
    mins >>= _SHIFT
    return mins.T.astype(np.uint32, order="C")


def _chunk_minima(chunk: U64, starts: npt.NDArray[np.int64], a: U64, b: U64, out: U64) -> None:
    """``out[i, d]`` = minimum of ``a[i] * x + b[i]`` over the shingles ``x`` of document ``d``.

    A few permutations are applied per pass (rows of one work array), which keeps the work array
    in cache and saves Python calls; with few shingles, all of them at once.
    """
    step = len(a) if len(chunk) * len(a) <= _SMALL else _PERMS_PER_PASS
    work = np.empty((min(step, len(a)), len(chunk)), dtype=np.uint64)
    for i in range(0, len(a), step):
        j = min(i + step, len(a))
        rows = work[: j - i]
        np.multiply(a[i:j, None], chunk, out=rows)
        rows += b[i:j, None]
        np.minimum.reduceat(rows, starts, axis=1, out=out[i:j])


def estimate_jaccard(sig_a: U32, sig_b: U32) -> float:
    """Share of positions where two signatures agree."""
    if sig_a.shape != sig_b.shape:
        raise ValueError(f"signatures differ in length: {sig_a.shape} != {sig_b.shape}")
    return float(np.count_nonzero(sig_a == sig_b)) / len(sig_a)
