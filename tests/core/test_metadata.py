"""Metadata sets: their members, their signatures and the exact key of a document with one."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_store.core import FingerprintParams, fingerprint
from dedup_store.core.kernels import Backend
from dedup_store.core.metadata import exact_key, meta_members, meta_signatures, with_meta
from dedup_store.core.minhash import estimate_jaccard
from dedup_store.errors import InvalidDocumentError

FIELDS = ("tags", "keywords")
PARAMS = FingerprintParams(meta_fields=FIELDS, num_perm=256)


def test_members_are_normalized_and_qualified_by_their_field() -> None:
    meta = {"tags": ["Ｆｌｏｏｄ", " DAM ", "", "dam"], "keywords": "dam", "author": "x"}
    assert meta_members(meta, FIELDS) == ["keywords:dam", "tags:dam", "tags:flood"]
    assert meta_members({"tags": "ß"}, FIELDS) == ["tags:ss"]


@pytest.mark.parametrize(
    "meta", [None, {}, {"author": ["x"]}, {"tags": []}, {"tags": [" "], "keywords": None}]
)
def test_no_members_is_no_metadata_set(meta: dict[str, object] | None) -> None:
    assert meta_members(meta, FIELDS) == []
    text = "the valley flooded overnight and the engineers opened the spillway"
    fp = fingerprint(text, PARAMS)
    assert with_meta(fp, meta) == (fp, None)


@pytest.mark.parametrize("value", [3, {"a": "b"}, ["ok", 1], [["nested"]], True])
def test_other_values_are_refused_naming_the_field(value: object) -> None:
    with pytest.raises(InvalidDocumentError, match="meta field 'keywords' must be a string"):
        meta_members({"tags": ["fine"], "keywords": value}, FIELDS)


def test_signatures_estimate_the_jaccard_of_the_sets(backend: Backend) -> None:
    first = [f"tags:t{i}" for i in range(40)]
    second = first[:30] + [f"tags:u{i}" for i in range(10)]  # Jaccard 30 / 50
    found = meta_signatures([first, [], second, first], PARAMS)
    assert found.present.tolist() == [True, False, True, True]
    assert found.row(1) is None and not found.signatures[1].any()
    assert np.array_equal(found.signatures[0], found.signatures[3])
    row0, row2 = found.row(0), found.row(2)
    assert row0 is not None and row2 is not None
    assert estimate_jaccard(row0, row2) == pytest.approx(0.6, abs=0.1)


def test_signatures_do_not_depend_on_the_batch(backend: Backend) -> None:
    sets = [[f"tags:{i}", f"keywords:{i * 7}"] for i in range(50)]
    together = meta_signatures(sets, PARAMS).signatures
    alone = np.vstack([meta_signatures([s], PARAMS).signatures for s in sets])
    assert np.array_equal(together, alone)


def test_exact_key_holds_the_set() -> None:
    digest = bytes(16)
    assert exact_key(digest, []) == digest
    tagged = exact_key(digest, ["tags:a"])
    assert len(tagged) == 16 and tagged != digest
    assert tagged != exact_key(digest, ["keywords:a"])


def test_metadata_must_be_a_mapping() -> None:
    with pytest.raises(InvalidDocumentError, match="meta must be a mapping, got list"):
        meta_members(["tags"], FIELDS)  # type: ignore[arg-type]
