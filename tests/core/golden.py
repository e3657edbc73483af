"""Golden fingerprint vectors: the documents, the parameters, and how a record is computed.

``tests/golden/fingerprints.json`` holds, for each case, the document, its parameters and the
fingerprint they must produce. :mod:`tests.core.test_golden` compares; after an intended change of
the hashing, regenerate the file with ``python -m tests.core.regen_golden`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dedup_store.core import Fingerprint, FingerprintParams, fingerprint

GOLDEN_PATH = Path(__file__).resolve().parents[1] / "golden" / "fingerprints.json"


def record(text: str, params: FingerprintParams) -> dict[str, Any]:
    """Everything the fingerprint of ``text`` pins (:func:`fingerprint_record`)."""
    return fingerprint_record(fingerprint(text, params))


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


def load_cases() -> list[dict[str, Any]]:
    """The stored cases: ``name``, ``params`` (dict), ``text`` and ``expected``."""
    cases: list[dict[str, Any]] = json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))["cases"]
    return cases
