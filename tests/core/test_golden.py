"""The fingerprints of the golden documents must not change unnoticed.

A failure here means hashing, canonicalization or a dependency changed the fingerprints of stored
documents. If that is intended, regenerate with ``python -m tests.core.regen_golden`` and commit
the reviewed diff of ``tests/golden/fingerprints.json`` with the change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dedup_store.core import FingerprintParams, fingerprint_batch
from dedup_store.core.fingerprint import reweighted
from dedup_store.core.kernels import Backend
from tests.core.golden import fingerprint_record, golden_store, load_cases, meta_record, record

CASES = load_cases()
META_CASES = [case for case in CASES if "meta" in case]


def test_golden_covers_every_script() -> None:
    names = {case["name"] for case in CASES}
    assert {"english", "russian", "chinese", "mixed", "html"} <= names


def _check(case: dict[str, Any], actual: dict[str, Any]) -> None:
    for field, expected in case["expected"].items():
        assert actual[field] == expected, f"{case['name']}: {field} changed"


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_golden_fingerprint(case: dict[str, Any], backend: Backend) -> None:
    _check(case, record(case["text"], FingerprintParams.from_dict(case["params"])))


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_golden_fingerprint_in_a_large_batch(case: dict[str, Any], backend: Backend) -> None:
    # many copies: the batch is canonicalized in runs of cached size
    copies = 1 + (1 << 17) // len(case["text"])
    params = FingerprintParams.from_dict(case["params"])
    batch = fingerprint_batch([case["text"]] * copies, params)
    if params.weighted:  # weighed against the golden store, counting the first copy alone
        batch = reweighted(batch, golden_store(params), rows=np.zeros(1, dtype=np.int64))
    _check(case, fingerprint_record(batch.row(0)))
    assert len({row.tobytes() for row in batch.signatures}) == 1


def test_golden_covers_metadata_sets() -> None:
    signatures = [case["expected_meta"]["signature"] for case in META_CASES]
    assert sum(s is None for s in signatures) == 1 and len(signatures) >= 3


@pytest.mark.parametrize("case", META_CASES, ids=[case["name"] for case in META_CASES])
def test_golden_metadata_set(case: dict[str, Any], backend: Backend) -> None:
    params = FingerprintParams.from_dict(case["params"])
    actual = meta_record(case["text"], params, case["meta"])
    for field, expected in case["expected_meta"].items():
        assert actual[field] == expected, f"{case['name']}: {field} changed"
