"""MinHash signatures for a whole batch of documents, and Jaccard estimates.

The ``i``-th min-hash of a shingle set is ``min((a_i * x + b_i) mod 2**64)`` over its shingle
hashes ``x``, with random odd ``a_i`` drawn from ``seed``; the top 32 bits are kept. Since the
shingle hashes are already uniformly mixed 64-bit values, this multiply-add family is a cheap and
accurate stand-in for random permutations (the estimate is checked against exact Jaccard in the
tests). The minima are taken by the kernels (:mod:`dedup_store.core.kernels`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U32, U64


@lru_cache(maxsize=16)
def permutations(num_perm: int, seed: int) -> tuple[U64, U64]:
    """The ``(a, b)`` coefficients of the ``num_perm`` hash functions for ``seed``."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64) * np.uint64(2)
    return a, b


def minhash_signatures(shingles: U64, offsets: I64, num_perm: int, seed: int) -> U32:
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
    a, b = permutations(num_perm, seed)
    return kernels.backend.minhash_minima(shingles, offsets, a, b)


def estimate_jaccard(sig_a: U32, sig_b: U32) -> float:
    """Share of positions where two signatures agree."""
    if sig_a.shape != sig_b.shape:
        raise ValueError(f"signatures differ in length: {sig_a.shape} != {sig_b.shape}")
    return float(np.count_nonzero(sig_a == sig_b)) / len(sig_a)
