"""Golden fingerprint vectors: the documents, the parameters, and how a record is computed.

``tests/golden/fingerprints.json`` holds, for each case, the document, its parameters and the
fingerprint they must produce (a case with metadata also its ``meta`` and ``expected_meta``).
:mod:`tests.core.test_golden` compares; after an intended change of the hashing, regenerate the
file with ``python -m tests.core.regen_golden`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dedup_store.core import Fingerprint, FingerprintParams, fingerprint, fingerprint_batch
from dedup_store.core.metadata import meta_members, with_meta
from dedup_store.core.weights import DocumentFrequencies, distinct_features

GOLDEN_PATH = Path(__file__).resolve().parents[1] / "golden" / "fingerprints.json"
#: A weighted case is fingerprinted against a store of this many copies of each of the
#: store texts, so that the store is past the fallback to counts.
GOLDEN_STORE_COPIES = 40


def record(text: str, params: FingerprintParams) -> dict[str, Any]:
    """Everything the fingerprint of ``text`` pins (:func:`fingerprint_record`); with weighted
    parameters, against the store of :func:`golden_store`."""
    frequencies = golden_store(params) if params.weighted else None
    return fingerprint_record(fingerprint(text, params, frequencies=frequencies))


def golden_store(params: FingerprintParams) -> DocumentFrequencies:
    """The document frequencies of a store of the golden store texts, each
    :data:`GOLDEN_STORE_COPIES` times (fixed texts, not the golden file's)."""
    texts = [
        "The valley flooded overnight and the engineers opened the spillway.",
        "Река поднялась за ночь, инженеры открыли водосброс.",
        "河水整夜上涨，工程师打开了泄洪道。",
        "Release notes: the parser handles mixed scripts and full-width letters.",
    ]
    batch = fingerprint_batch(texts * GOLDEN_STORE_COPIES, params)
    features, counts = distinct_features(batch.features, batch.feature_offsets)
    return DocumentFrequencies(features, counts, len(batch))


def fingerprint_record(fp: Fingerprint) -> dict[str, Any]:
    """Everything a fingerprint pins, as JSON-ready values (64-bit values as hex strings)."""
    return {
        "canonical_text": fp.canonical_text,
        "exact_hash": fp.exact_hash.hex(),
        "token_count": fp.token_count,
        "shingle_count": len(fp.shingles),
        "shingles_head": [f"{int(v):016x}" for v in fp.shingles[:8]],
        "signature": [int(v) for v in fp.signature],
        "band_keys": [f"{int(v) & 0xFFFF_FFFF_FFFF_FFFF:016x}" for v in fp.band_keys],
        "simhash": f"{fp.simhash:016x}",
        "block_keys": [f"{int(v) & 0xFFFF_FFFF_FFFF_FFFF:016x}" for v in fp.block_keys],
        "sample_keys": [f"{int(v):016x}" for v in fp.sample_keys],
    }


def meta_record(text: str, params: FingerprintParams, meta: dict[str, Any]) -> dict[str, Any]:
    """What the metadata set ``meta`` of a document pins: its members, its signature and the
    document's exact key (:mod:`dedup_store.core.metadata`)."""
    fp, signature = with_meta(fingerprint(text, params), meta)
    return {
        "members": meta_members(meta, params.meta_fields),
        "signature": None if signature is None else [int(v) for v in signature],
        "exact_key": fp.exact_hash.hex(),
    }


def load_cases() -> list[dict[str, Any]]:
    """The stored cases: ``name``, ``params`` (dict), ``text`` and ``expected``."""
    cases: list[dict[str, Any]] = json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))["cases"]
    return cases
