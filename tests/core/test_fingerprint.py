"""Fingerprints as a user sees them: invalid input, empty documents, batches, weights."""

from __future__ import annotations

import re

import numpy as np
import pytest
import xxhash

from dedup_store.core import (
    FingerprintParams,
    canonical_tokens,
    fingerprint,
    fingerprint_batch,
    validate_text,
)
from dedup_store.core.fingerprint import fingerprint_tokens
from dedup_store.core.shingles import hash_tokens
from dedup_store.core.validation import validate_texts
from dedup_store.errors import EmptyDocumentError, InvalidDocumentError, ParamsMismatchError

TEXT = (
    "The river rose steadily through the night and by morning the lower fields were under water "
    "while the county engineers opened the spillway to relieve pressure on the old stone dam"
)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc\x00def", "NUL character at offset 3"),
        ("ok \udcff bad", "not valid UTF-8 (offset 3)"),
        (b"bytes", "must be str, got bytes"),
        (None, "must be str, got NoneType"),
        (42, "must be str, got int"),
    ],
)
def test_invalid_text_is_refused_with_a_clear_message(value: object, message: str) -> None:
    with pytest.raises(InvalidDocumentError, match=re.escape(message)):
        fingerprint(value)  # type: ignore[arg-type]


def test_too_large_text_is_refused() -> None:
    with pytest.raises(InvalidDocumentError, match="5 bytes, larger than the limit of 4"):
        validate_text("héll", max_bytes=4)
    assert validate_text("hell", max_bytes=4) == "hell"


@pytest.mark.parametrize("other", ["ascii", "ünïcode"])
def test_the_size_limit_is_per_document_not_per_batch(other: str) -> None:
    # together larger than the limit, each within it: accepted
    validate_texts(["héllo", other, "abcdefgh"], max_bytes=10)
    with pytest.raises(InvalidDocumentError, match=r"document 2: .*11 bytes, larger than the"):
        validate_texts(["héllo", other, "ééééé_"], max_bytes=10)
    with pytest.raises(InvalidDocumentError, match=r"document 1: .*11 bytes, larger than the"):
        validate_texts([other, "abcdefghijk"], max_bytes=10)


@pytest.mark.parametrize("length", [10, 5000], ids=["short", "long"])
def test_batch_names_the_bad_document(length: int) -> None:
    # short documents are checked joined, long ones one at a time
    with pytest.raises(InvalidDocumentError, match=r"document 1: .*NUL"):
        fingerprint_batch(["fine " * length, "bad\x00" * length])
    with pytest.raises(InvalidDocumentError, match=r"document 2: .*not valid UTF-8"):
        validate_texts(["fine " * length, "é" * length, "bad \udcff" * length])


def test_empty_document() -> None:
    with pytest.raises(EmptyDocumentError, match="empty after canonicalization"):
        fingerprint("... --- !!!")
    with pytest.raises(EmptyDocumentError):
        fingerprint("the and of")  # stop words only
    batch = fingerprint_batch(["", "river water", "<p></p>", "the", "dam"])
    assert batch.empty_index == [0, 2, 3]
    assert batch.source_index.tolist() == [1, 4]
    assert len(batch) == 2 and batch.signatures.shape == (2, 84)


def test_batch_rows_equal_single_fingerprints() -> None:
    texts = [TEXT, "中文分词 and русский текст", "short", TEXT.upper()]
    batch = fingerprint_batch(texts)
    for row, text in enumerate(texts):
        single, from_batch = fingerprint(text), batch.row(row)
        assert single.canonical_text == from_batch.canonical_text
        assert np.array_equal(single.signature, from_batch.signature)
        assert np.array_equal(single.shingles, from_batch.shingles)
        assert single.simhash == from_batch.simhash
        assert np.array_equal(single.block_keys, from_batch.block_keys)
    assert batch.row(0).exact_hash == batch.row(3).exact_hash


def test_fingerprint_tokens_matches_fingerprint_batch() -> None:
    params = FingerprintParams()
    tokens = [canonical_tokens(t, params) for t in (TEXT, "河水整夜不断上涨")]
    a, b = fingerprint_tokens(tokens, params), fingerprint_batch([TEXT, "河水整夜不断上涨"], params)
    assert np.array_equal(a.signatures, b.signatures)
    assert np.array_equal(a.simhashes, b.simhashes)


def test_short_document_gets_one_shingle_of_all_words() -> None:
    fp = fingerprint("river dam", FingerprintParams(shingle_size=4))
    assert fp.token_count == 2 and len(fp.shingles) == 1
    other = fingerprint("dam river", FingerprintParams(shingle_size=4))
    assert not np.array_equal(fp.shingles, other.shingles)  # word order counts


def test_shingle_counts_by_script() -> None:
    params = FingerprintParams(shingle_size=3, cjk_shingle_size=2, stopwords=False)
    assert len(fingerprint("one two three four five", params).shingles) == 3
    assert len(fingerprint("河水整夜", params).shingles) == 3  # 河水 水整 整夜


def test_token_hashes_are_xxh3_of_utf8() -> None:
    tokens = ["river", "река", "河水", "river"]
    expected = [xxhash.xxh3_64_intdigest(t.encode("utf-8")) for t in tokens]
    assert hash_tokens(tokens).tolist() == expected


def test_near_duplicates_are_close_and_unrelated_texts_are_not() -> None:
    a = fingerprint(TEXT)
    b = fingerprint(TEXT.replace("stone", "concrete"))
    c = fingerprint("completely different words about cooking pasta with fresh tomato sauce")
    assert a.jaccard(b) > 0.7 and a.estimated_jaccard(b) > 0.5
    assert a.hamming(b) < a.hamming(c)
    assert a.jaccard(c) == 0.0
    assert a.containment(a) == 1.0


def test_caller_weights_change_the_simhash() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    plain = fingerprint(text)
    assert fingerprint(text, weights={}).simhash == plain.simhash
    assert fingerprint(text, weights=lambda feature: 1.0).simhash == plain.simhash
    heavy = fingerprint(text, weights={"alpha": 1000.0})
    alpha = fingerprint("alpha")
    assert heavy.simhash == alpha.simhash
    assert fingerprint(text, weights=lambda f: 1000.0 if f == "alpha" else 1.0).simhash == (
        alpha.simhash
    )


def test_comparing_fingerprints_of_other_params_names_the_differences() -> None:
    a = fingerprint(TEXT, FingerprintParams())
    b = fingerprint(TEXT, FingerprintParams(num_perm=128, shingle_size=5))
    with pytest.raises(ParamsMismatchError, match=r"num_perm: 84 != 128, shingle_size: 4 != 5"):
        a.jaccard(b)
    with pytest.raises(ParamsMismatchError, match="cannot compare fingerprints"):
        a.hamming(b)
