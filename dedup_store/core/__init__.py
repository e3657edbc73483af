"""The pure fingerprinting core: canonical text, shingles, MinHash, SimHash, block keys, and
the word-level alignment that shows why two documents match.

Nothing here touches a database.
"""

from dedup_store.core.align import Alignment, Run, align_texts
from dedup_store.core.canonical import canonical_tokens, canonicalize, html_to_text, looks_like_html
from dedup_store.core.fingerprint import (
    FeatureWeights,
    Fingerprint,
    FingerprintBatch,
    fingerprint,
    fingerprint_batch,
)
from dedup_store.core.lsh import band_keys
from dedup_store.core.minhash import estimate_jaccard, minhash_signatures
from dedup_store.core.params import FingerprintParams, optimal_bands
from dedup_store.core.simhash import block_keys, block_masks, hamming, simhash_batch
from dedup_store.core.validation import DEFAULT_MAX_BYTES, validate_text

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Alignment",
    "FeatureWeights",
    "Fingerprint",
    "FingerprintBatch",
    "FingerprintParams",
    "Run",
    "align_texts",
    "band_keys",
    "block_keys",
    "block_masks",
    "canonical_tokens",
    "canonicalize",
    "estimate_jaccard",
    "fingerprint",
    "fingerprint_batch",
    "hamming",
    "html_to_text",
    "looks_like_html",
    "minhash_signatures",
    "optimal_bands",
    "simhash_batch",
    "validate_text",
]
