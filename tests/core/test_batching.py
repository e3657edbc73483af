"""The batch paths give the same values as plain per-document arithmetic."""

from __future__ import annotations

import dataclasses
import importlib
import itertools

import numpy as np
import pytest

from dedup_store.core import (
    Fingerprint,
    FingerprintBatch,
    FingerprintParams,
    canonical_tokens,
    fingerprint_batch,
    minhash_signatures,
)
from dedup_store.core.canonical import canonical_batch, has_cjk
from dedup_store.core.fingerprint import fingerprint_tokens
from dedup_store.core.minhash import permutations
from dedup_store.core.shingles import unique_per_document
from dedup_store.core.simhash import bit_votes, lane_counts
from tests.spark.corpora import real_documents

RNG = np.random.default_rng(20240607)
scripts_module = importlib.import_module("dedup_store.core.scripts")


def _random_offsets(n_docs: int, max_len: int) -> np.ndarray:
    lengths = RNG.integers(1, max_len, size=n_docs)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _naive_bit_counts(features: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    bits = (features[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    return np.add.reduceat(bits.astype(np.int64), offsets[:-1], axis=0)


@pytest.mark.parametrize(("n_docs", "max_len"), [(1, 2), (7, 40), (300, 90), (3, 3000)])
def test_lane_counts_count_every_bit(n_docs: int, max_len: int) -> None:
    offsets = _random_offsets(n_docs, max_len)
    features = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    expected = _naive_bit_counts(features, offsets)
    assert np.array_equal(lane_counts(features, offsets), expected)
    assert np.array_equal(bit_votes(features, offsets), expected.astype(np.float64))


def test_bit_votes_of_a_document_longer_than_a_lane() -> None:
    offsets = np.array([0, 5, 70_005], dtype=np.int64)
    features = np.full(70_005, 2**63 + 1, dtype=np.uint64)
    votes = bit_votes(features, offsets)
    assert votes[1, 0] == votes[1, 63] == 70_000
    assert votes[0, 0] == 5 and votes[1, 1] == 0


@pytest.mark.parametrize(("n_docs", "max_len", "num_perm"), [(1, 3, 7), (40, 30, 84), (5, 900, 9)])
def test_minhash_is_the_minimum_of_each_permutation(
    n_docs: int, max_len: int, num_perm: int
) -> None:
    offsets = _random_offsets(n_docs, max_len)
    shingles = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    a, b = permutations(num_perm, 3)
    expected = [
        [
            min((int(ai) * int(x) + int(bi)) % 2**64 for x in shingles[lo:hi]) >> 32
            for ai, bi in zip(a, b, strict=True)
        ]
        for lo, hi in itertools.pairwise(offsets)
    ]
    signatures = minhash_signatures(shingles, offsets, num_perm, 3)
    assert signatures.dtype == np.uint32 and signatures.flags.c_contiguous
    assert signatures.tolist() == expected


ONE_BY_ONE_PARAMS = [
    FingerprintParams(),
    FingerprintParams(scheme="broder", containment=0.0),
    FingerprintParams(shingle_size=1, simhash_key_max_shingles=0, winnow_window=1),
    FingerprintParams(stopwords=False, html="never", containment=0.5, winnow_window=4),
]


@pytest.mark.parametrize("params", ONE_BY_ONE_PARAMS, ids=["default", "broder", "1-gram", "words"])
def test_a_batch_equals_its_documents_one_by_one(params: FingerprintParams) -> None:
    # one document alone takes a path of its own (a single check or add): every field of its
    # fingerprint is the batch's, for long and short documents, CJK, empty ones and real text
    words = ["river", "rose", "all", "night", "the", "farmers", "watched", "banks", "中文分词", "и"]
    docs = [" ".join(RNG.choice(words, size=int(RNG.integers(0, 2000)))) for _ in range(40)]
    docs += ["", "...", "one", *PLAIN_DOCS]
    docs += [text for _, text in real_documents(docstrings=60)[::8]]
    batch = fingerprint_batch(docs, params)
    alone = [fingerprint_batch([doc], params) for doc in docs]
    assert batch.empty_index == [i for i, single in enumerate(alone) if single.empty_index]
    for row, source in enumerate(batch.source_index.tolist()):
        single = alone[source]
        _assert_same_fingerprint(single.row(0), batch.row(row))
        assert np.array_equal(single.token_counts, batch.token_counts[row : row + 1])


def _assert_same_fingerprint(one: Fingerprint, other: Fingerprint) -> None:
    for field in dataclasses.fields(Fingerprint):
        mine, theirs = getattr(one, field.name), getattr(other, field.name)
        if isinstance(mine, np.ndarray):
            assert mine.dtype == theirs.dtype, field.name
            assert np.array_equal(mine, theirs), field.name
        else:
            assert mine == theirs, field.name


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize(("n_docs", "max_len"), [(1, 5), (9, 30), (200, 40), (4, 3000)])
def test_unique_per_document_sorts_and_dedups_each_document(
    grouped: bool, n_docs: int, max_len: int
) -> None:
    counts = RNG.integers(0, max_len, size=n_docs)
    owner = np.repeat(np.arange(n_docs), counts)
    if not grouped:
        owner = RNG.permutation(owner)
    pool = np.array([0, 1, 5, 2**64 - 1, 2**63], dtype=np.uint64)
    values = np.where(
        RNG.random(len(owner)) < 0.3,
        RNG.choice(pool, size=len(owner)),
        RNG.integers(0, 2**64, size=len(owner), dtype=np.uint64),
    )
    got, offsets = unique_per_document(values, owner, n_docs)
    for doc in range(n_docs):
        expected = np.unique(values[owner == doc])
        assert np.array_equal(got[offsets[doc] : offsets[doc + 1]], expected)
    assert offsets[-1] == len(got)


PLAIN_DOCS = [
    "The river rose ALL night; the farmers watched the banks.",
    "Ourselves, themselves and yourselves: ourselvesx THEMSELVE yourselve!",
    "a I x 7 42 of-the_and " + "verylongwordthatkeepsgoing" * 3 + " " + "q" * 16 + " " + "z" * 17,
    "the a of",
    "",
    "   ...   ",
    "Tabs\tand\nnew lines\r\nand \x0bvertical\x0c feeds \x1c\x1d\x1e\x1f too",
    "Naïve café STRASSE Straße ﬁle № 5 — “quoted” ½ x²",
    "Река поднималась всю ночь, и крестьяне смотрели на берега которые это",
    "<p>Hello <b>world</b></p><script>var x = 1;</script><div>again</div>",
    "Ǆemal ΣΊΣΥΦΟΣ İstanbul ﬀ ﬃ ßẞ",
]


@pytest.mark.parametrize("html", ["auto", "always", "never"])
@pytest.mark.parametrize("stopwords", [True, False])
def test_batch_canonical_path_equals_the_token_path(stopwords: bool, html: str) -> None:
    params = FingerprintParams.from_dict({"stopwords": stopwords, "html": html})
    docs = PLAIN_DOCS + [" ".join(RNG.choice(PLAIN_DOCS, size=30)) for _ in range(20)]
    canonical = canonical_batch(docs, params)
    assert canonical is not None
    tokens = [canonical_tokens(doc, params) for doc in docs]
    assert canonical.texts == [" ".join(t) for t in tokens]
    assert canonical.token_counts.tolist() == [len(t) for t in tokens]
    _assert_same_batch(fingerprint_batch(docs, params), fingerprint_tokens(tokens, params))


def _assert_same_batch(batch: FingerprintBatch, expected: FingerprintBatch) -> None:
    assert batch.empty_index == expected.empty_index
    assert batch.canonical_texts == expected.canonical_texts
    assert batch.exact_hashes == expected.exact_hashes
    for field in dataclasses.fields(FingerprintBatch):
        value = getattr(batch, field.name)
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, getattr(expected, field.name)), field.name


@pytest.mark.parametrize("containment", [0.0, 0.5])
def test_a_batch_with_some_cjk_documents_equals_the_token_path(containment: float) -> None:
    # the documents without CJK text take the batch path, the others the token path; the rows
    # come back in input order, empty documents listed where they were
    params = FingerprintParams(containment=containment)
    cjk = ["中文分词测试文本这是一个例子，还有更多的字", "日本語のテキスト hello world", "㊀ ⼀ 二"]
    docs = [*PLAIN_DOCS, *cjk, "", "the of a"]
    docs = [docs[i] for i in RNG.permutation(len(docs))] * 2
    tokens = [canonical_tokens(doc, params) for doc in docs]
    _assert_same_batch(fingerprint_batch(docs, params), fingerprint_tokens(tokens, params))


def test_batch_canonical_path_declines_cjk_and_stemming() -> None:
    params = FingerprintParams()
    assert canonical_batch(["plain text", "naïve текст"], params) is not None
    assert canonical_batch(["plain text", "中文分词"], params) is None
    assert canonical_batch(["plain text"], FingerprintParams(stem=True)) is None


def test_no_cjk_character_lies_below_the_first_cjk_radical() -> None:
    below = "".join(chr(c) for c in range(0x2E80) if not 0xD800 <= c <= 0xDFFF)
    assert scripts_module._ANY_CJK.search(below) is None
    assert scripts_module._ANY_CJK.match("\u2e80") is not None
    assert scripts_module._AT_OR_ABOVE_FIRST_CJK.match("\u2e80") is not None
    assert scripts_module._AT_OR_ABOVE_FIRST_CJK.search(below) is None
    assert not has_cjk("") and not has_cjk("naïve “text” — ok") and has_cjk("a 中 b")
