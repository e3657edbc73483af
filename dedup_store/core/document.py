"""One document's fingerprint arrays in one kernel call.

A single ``check`` or ``add`` fingerprints one text: through the batch steps, one numpy call
after another on arrays of a few dozen values, it spent more in the calls than in the hashing.
:func:`one_document` hands the whole of it to the backend's
:meth:`~dedup_store.core.kernels.Backend.one_document`, with the constants of the parameters
made once per parameters.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from dedup_store.core import kernels
from dedup_store.core.arrays import U64
from dedup_store.core.kernels import DocumentConstants, OneDocument
from dedup_store.core.minhash import permutations
from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import block_key_constants


@lru_cache(maxsize=16)
def _constants(params: FingerprintParams) -> DocumentConstants:
    """The MinHash permutations, the winnowing window (0: no excerpt index), the bands of the
    ``threshold`` scheme (none for ``broder``, whose keys pair them) with their salts as
    :func:`~dedup_store.core.lsh.super_shingles` gives them, and the SimHash block masks."""
    a, b = permutations(params.num_perm, params.seed)
    bands, rows = params.bands if params.scheme == "threshold" else (0, 0)
    masks, mask_salts = block_key_constants(params.simhash_blocks, params.simhash_k)
    window = params.winnow_window if params.containment > 0 else 0
    band_salts = np.arange(1, bands + 1, dtype=np.uint64)
    return DocumentConstants(a, b, window, rows, band_salts, masks, mask_salts)


#: The most tokens a document hands to the one-document kernel: a longer one goes through the
#: batch kernels one after the other, which are faster for it (measured on random token hashes:
#: 40 tokens 9 against 31 microseconds, 1,000 tokens 55 against 69, 2,000 tokens 169 against
#: 110, 20,000 tokens 3.0 against 1.3 ms).
KERNEL_TOKENS = 1024


def one_document(tokens: U64, params: FingerprintParams) -> OneDocument:
    """The fingerprint arrays of one document of token hashes (at least one) under unweighted
    ``params``: band keys with the ``threshold`` scheme only (none with ``broder``), block keys
    of the masked SimHash whatever the document's length."""
    if len(tokens) > KERNEL_TOKENS:
        return kernels.one_document_in_steps(
            kernels.backend, tokens, params.shingle_size, _constants(params)
        )
    return kernels.backend.one_document(tokens, params.shingle_size, _constants(params))
