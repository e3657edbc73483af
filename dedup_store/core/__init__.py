"""The pure fingerprinting core: canonical text, shingles, MinHash, SimHash, block keys, and
the word-level alignment that shows why two documents match.

Nothing here touches a database.

The public names are loaded when first used, so importing one module of the core (the
command line imports :mod:`dedup_store.core.params`) does not load numpy.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from dedup_store.plumbing import lazy_names

if TYPE_CHECKING:
    from dedup_store.core.align import Alignment, Run, align_texts
    from dedup_store.core.canonical import (
        canonical_tokens,
        canonicalize,
        html_to_text,
        looks_like_html,
    )
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

_HOMES = {
    "dedup_store.core.align": (
        "Alignment",
        "Run",
        "align_texts",
    ),
    "dedup_store.core.canonical": (
        "canonical_tokens",
        "canonicalize",
        "html_to_text",
        "looks_like_html",
    ),
    "dedup_store.core.fingerprint": (
        "FeatureWeights",
        "Fingerprint",
        "FingerprintBatch",
        "fingerprint",
        "fingerprint_batch",
    ),
    "dedup_store.core.lsh": ("band_keys",),
    "dedup_store.core.minhash": (
        "estimate_jaccard",
        "minhash_signatures",
    ),
    "dedup_store.core.params": (
        "FingerprintParams",
        "optimal_bands",
    ),
    "dedup_store.core.simhash": (
        "block_keys",
        "block_masks",
        "hamming",
        "simhash_batch",
    ),
    "dedup_store.core.validation": (
        "DEFAULT_MAX_BYTES",
        "validate_text",
    ),
}

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


__getattr__, __dir__ = lazy_names(globals(), _HOMES, __all__)


class _Core(types.ModuleType):
    """The package, whose ``fingerprint`` stays the function once its module is imported."""

    def __setattr__(self, name: str, value: Any) -> None:
        # Importing a submodule binds it to its name in the package; the module
        # ``fingerprint`` would hide the function of that name.
        if name == "fingerprint" and isinstance(value, types.ModuleType):
            value = value.fingerprint
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Core
