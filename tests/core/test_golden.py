"""The fingerprints of the golden documents must not change unnoticed.

A failure here means hashing, canonicalization or a dependency changed the fingerprints of stored
documents. If that is intended, regenerate with ``python -m tests.core.regen_golden`` and commit
the reviewed diff of ``tests/golden/fingerprints.json`` with the change.
"""

from __future__ import annotations

from typing import Any

import pytest

from dedup_store.core import FingerprintParams
from tests.core.golden import load_cases, record

CASES = load_cases()


def test_golden_covers_every_script() -> None:
    names = {case["name"] for case in CASES}
    assert {"english", "russian", "chinese", "mixed", "html"} <= names


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_golden_fingerprint(case: dict[str, Any]) -> None:
    params = FingerprintParams.from_dict(case["params"])
    actual = record(case["text"], params)
    for field, expected in case["expected"].items():
        assert actual[field] == expected, f"{case['name']}: {field} changed"
