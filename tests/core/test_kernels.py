"""The compiled kernels give exactly what the reference kernels give.

Every other test runs with the compiled kernels (they are built by ``pip install``); here each
kernel operation is run on both backends, the compiled one and the reference one that runs when
the package was built without a C compiler, and whole batches are fingerprinted both ways.
"""

from __future__ import annotations

import dataclasses
import itertools
import unicodedata
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import xxhash

from dedup_store.core import FingerprintParams, fingerprint_batch, kernels, minhash_signatures
from dedup_store.core.canonical import _nfkc, _run_word_bytes, stopwords
from dedup_store.core.hashing import combine_groups
from dedup_store.core.kernels import Backend, DocumentConstants
from dedup_store.core.mixing import mix64
from dedup_store.core.reference import _NON_WORD
from dedup_store.core.scripts import CJK_CHAR, TOKEN, is_cjk, script_tokens, starts_cjk
from dedup_store.core.shingles import Segments, hash_tokens, shingle
from dedup_store.core.simhash import simhash_batch, simhash_integer_weighted
from dedup_store.core.winnow import winnow
from tests.core.conftest import BACKENDS

RNG = np.random.default_rng(20261123)
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
# a few stop words of each kind: short, longer than 8 bytes, and Cyrillic
STOPS = ["the", "of", "a", "themselves", "yourselves", "и", "который", "ourselves"]


def test_compiled_kernels_are_built() -> None:
    assert kernels.COMPILED is not None, (
        "dedup_store.core._kernels was not built: install with a C compiler (pip install -e .)"
    )


def test_the_compiled_kernels_run_unless_the_reference_is_asked_for() -> None:
    assert kernels.choose(None) is kernels.COMPILED
    assert kernels.choose("compiled") is kernels.COMPILED
    assert kernels.choose("reference") is kernels.REFERENCE
    assert [b.name for b in BACKENDS if b is not None] == ["compiled", "reference"]


def _both(call: Callable[[Backend], Any]) -> tuple[Any, Any]:
    """``call`` of the compiled backend, then of the reference one, each in use."""
    results = []
    for chosen in BACKENDS:
        assert chosen is not None, "dedup_store.core._kernels was not built"
        with kernels.use(chosen):
            results.append(call(chosen))
    return results[0], results[1]


def _random_word(max_len: int) -> str:
    if RNG.random() < 0.3:
        return str(RNG.choice(STOPS))
    length = int(RNG.integers(1, max_len + 1))
    return "".join(RNG.choice(LETTERS, size=length))


def _random_documents(count: int, max_words: int, max_len: int) -> list[str]:
    docs = []
    for _ in range(count):
        words = [_random_word(max_len) for _ in range(int(RNG.integers(0, max_words + 1)))]
        separators = RNG.choice([" ", "  ", ", ", ".\n", " — "], size=len(words))
        docs.append("".join(w + s for w, s in zip(words, separators, strict=True)))
    return docs


@pytest.mark.parametrize("drop_stopwords", [True, False])
def test_canonical_words_match_the_reference(drop_stopwords: bool) -> None:
    # words of 1 to 40 bytes cover every xxh3 length class and the long-word fallback; empty
    # documents and documents of stop words only are among them
    docs = [*_random_documents(400, 30, 40), "", "   ", "the of a", "Themselves, и который"]
    params = FingerprintParams(stopwords=drop_stopwords)
    body, sizes, left_out = _run_word_bytes(docs, params)
    assert left_out == []
    stops = stopwords() if drop_stopwords else None
    compiled, reference = _both(lambda b: b.canonical_words(body, sizes, stops))
    assert compiled[0] == reference[0]
    assert compiled[1].tolist() == reference[1].tolist()
    assert compiled[2].tolist() == reference[2].tolist()
    tokens = compiled[0].decode().split()
    assert compiled[2].tolist() == [xxhash.xxh3_64_intdigest(w.encode()) for w in tokens]
    if drop_stopwords:
        assert not set(tokens) & stopwords()


def test_stop_sets_are_exact_for_words_of_any_length(backend: Backend) -> None:
    stops = ["a", "abc", "abcd", "abcdefgh", "abcdefghi", "a" * 16, "b" * 17, "é" * 20]
    near = ["ab", "abcde", "abcdefg", "abcdefghij", "a" * 15, "b" * 18, "é" * 19 + "e"]
    body = " ".join(stops + near).encode()
    sizes = np.array([len(body)], dtype=np.int64)
    text, counts, _ = backend.canonical_words(body, sizes, frozenset(stops))
    assert text.decode().split() == near
    assert counts.tolist() == [len(near)]


@pytest.mark.parametrize(
    "tokens",
    [
        ["plain", "words", "ж", "中文", "x" * 40],
        ["a b", "c"],
        ["", "d"],
        ["a b", ""],
        [""],
        ["only"],
    ],
    ids=["words", "space-inside", "empty-token", "both-cancel-out", "one-empty", "one"],
)
def test_token_hashes_match_xxhash(tokens: list[str], backend: Backend) -> None:
    expected = [xxhash.xxh3_64_intdigest(t.encode()) for t in tokens]
    assert backend.token_hashes(tokens).tolist() == expected
    assert hash_tokens(tokens).tolist() == expected


def test_word_bytes_match_the_non_word_pattern(backend: Backend) -> None:
    # every character of the Basic Multilingual Plane but surrogates, and some above it
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    chars += [chr(c) for c in range(0x10000, 0x110000, 97)]
    text = "".join(chars)
    expected = " ".join(_NON_WORD.split(text)).encode("utf-8")
    assert backend.word_bytes(text).split() == expected.split()
    assert backend.word_bytes("") == b""


def test_the_word_kernel_refuses_bytes() -> None:
    assert kernels.COMPILED is not None
    with pytest.raises(TypeError, match="expected str"):
        kernels.COMPILED.module.word_bytes(b"bytes")


def _script_texts() -> list[str]:
    # CJK radicals (Han, below U+3040), kana, ideographs of the BMP and beyond, Hangul, Latin,
    # digits, a combining mark, Hebrew, CJK and ASCII punctuation, spaces, an emoji
    points = [*range(0x2E80, 0x3100), *range(0x4E00, 0x4E40), *range(0x30, 0x7B)]
    points += [0x20000, 0x2A700, 0x1F600, 0x301, 0x5D0, 0xAC00, 0x3000, 0xFF0C, 0x20, 0x2C]
    points += [0x20, 0x20, 0xA, 0x3002, 0x2009]
    pool = [chr(p) for p in points]
    texts = ["".join(RNG.choice(pool, size=int(RNG.integers(0, 60)))) for _ in range(2000)]
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    return [*texts, every, "中 文，分词", " 。中\n文 ", "中 a 文", "中。1。文"]


def _joined_runs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Token pairs with the CJK runs that follow one another (no word between) joined."""
    joined: list[tuple[str, str]] = []
    for cjk, word in pairs:
        if cjk and joined and joined[-1][0]:
            joined[-1] = (joined[-1][0] + cjk, "")
        else:
            joined.append((cjk, word))
    return joined


def test_script_tokens_match_the_token_pattern(backend: Backend) -> None:
    for text in _script_texts():
        assert script_tokens(text) == TOKEN.findall(text)


def test_joined_script_tokens_match_the_runs_joined(backend: Backend) -> None:
    texts = _script_texts()
    expected = [_joined_runs(TOKEN.findall(text)) for text in texts]
    assert [script_tokens(text, join=True) for text in texts] == expected


def test_is_cjk_is_the_regex_class_from_u3040() -> None:
    for point in range(0x10000):
        char = chr(point)
        if not 0xD800 <= point <= 0xDFFF:
            expected = point >= 0x3040 and CJK_CHAR.match(char) is not None
            assert is_cjk(char + "x") == expected, hex(point)
            assert starts_cjk(char + "x") == (CJK_CHAR.match(char) is not None), hex(point)


def test_nfkc_with_fullwidth_folding_is_nfkc(backend: Backend) -> None:
    # fullwidth forms next to combining marks (which NFKC composes with the folded letter),
    # the ideographic space, other compatibility characters and text already normalized
    points = [*range(0xFF00, 0xFF70), 0x3000, 0x301, 0x308, 0x3099, 0x304B, 0xFB01, 0x2460]
    points += [*range(0x41, 0x5B), 0xE9, 0x4E2D, 0x5B57, 0x20, 0x1F600]
    pool = [chr(p) for p in points]
    texts = ["".join(RNG.choice(pool, size=int(RNG.integers(0, 40)))) for _ in range(3000)]
    texts += ["\uff21\u0301", "\u304b\u3099", "plain ascii", "déjà", ""]
    texts += [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    # long texts, normalized in pieces cut before line breaks: marks and compatibility
    # characters on either side of the cuts
    lines = ["".join(RNG.choice(pool, size=int(RNG.integers(0, 300)))) for _ in range(600)]
    texts += ["\n".join(lines), "x" * 5000 + "\n\u0301\uff21\n" * 2000, "a\u0308" * 9000]
    for text in texts:
        assert _nfkc(text) == unicodedata.normalize("NFKC", text), ascii(text[:80])


def test_canonical_words_reject_sizes_beyond_the_body(backend: Backend) -> None:
    with pytest.raises(ValueError, match="sizes exceed"):
        backend.canonical_words(b"a b", np.array([5], dtype=np.int64), None)


@pytest.mark.parametrize("n", [1, 3, 4, 10])
def test_shingle_hashes_match_the_reference(n: int) -> None:
    # segments shorter than, as long as and longer than n, several per document
    lengths = np.concatenate([np.arange(1, 2 * n + 2), RNG.integers(1, 200, size=40)])
    owner = np.sort(RNG.integers(0, 20, size=len(lengths)))
    hashes = RNG.integers(0, 2**64, size=int(lengths.sum()), dtype=np.uint64)
    segments = Segments(hashes, lengths.astype(np.int64), owner.astype(np.int64), [])
    compiled, reference = _both(lambda _: shingle(segments, n))
    np.testing.assert_array_equal(compiled[0], reference[0])
    np.testing.assert_array_equal(compiled[1], reference[1])


@pytest.mark.parametrize(("dtype", "shape"), [(np.uint32, (50, 12, 7)), (np.uint64, (9, 15, 2))])
def test_combine_groups_matches_the_reference(dtype: type, shape: tuple[int, int, int]) -> None:
    # band keys from uint32 signatures, mega-shingles from pairs of uint64 super-shingles
    groups = RNG.integers(0, np.iinfo(dtype).max, size=shape, dtype=dtype, endpoint=True)
    salts = RNG.integers(0, 2**64, size=shape[1], dtype=np.uint64)
    compiled, reference = _both(lambda _: combine_groups(groups, salts))
    np.testing.assert_array_equal(compiled, reference)


@pytest.mark.parametrize("num_perm", [2, 7, 84, 130])
def test_minhash_minima_match_the_reference(num_perm: int) -> None:
    # 1 to 9 shingles per document: the kernel's blocks of four and its remainder
    counts = np.concatenate([np.arange(1, 10), RNG.integers(1, 700, size=50)])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    shingles = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    compiled, reference = _both(lambda _: minhash_signatures(shingles, offsets, num_perm, seed=5))
    assert compiled.dtype == reference.dtype == np.uint32
    np.testing.assert_array_equal(compiled, reference)


def test_minhash_minima_refuse_a_document_without_shingles(backend: Backend) -> None:
    offsets = np.array([0, 2, 2, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="at least one shingle"):
        minhash_signatures(np.arange(3, dtype=np.uint64), offsets, 8, seed=1)


def test_simhash_majority_matches_the_reference() -> None:
    # around 255 features the kernel empties its byte lanes
    counts = np.array([1, 2, 3, 254, 255, 256, 257, 511, 600, 1000, 70000])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    features = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    # a biased bit, and a bit set in exactly half of the features of the two-feature document
    features |= np.uint64(1 << 7) * (RNG.random(len(features)) < 0.6).astype(np.uint64)
    features[1:3] = [np.uint64(1 << 5), np.uint64(0)]
    compiled, reference = _both(lambda _: simhash_batch(features, offsets))
    np.testing.assert_array_equal(compiled, reference)


def test_simhash_weighted_matches_the_reference() -> None:
    counts = np.array([1, 2, 3, 40, 255, 600, 5000])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    features = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    weights = RNG.integers(1, 20_000, size=len(features), dtype=np.int64)
    # a tie: bit 5 carries exactly half of the two-feature document's weight
    features[1:3], weights[1:3] = [np.uint64(1 << 5), np.uint64(0)], [7, 7]
    compiled, reference = _both(lambda _: simhash_integer_weighted(features, offsets, weights))
    np.testing.assert_array_equal(compiled, reference)
    assert not int(compiled[1]) & (1 << 5)
    # integer weights give what the float path gives when its sums are exact
    floated = simhash_batch(features, offsets, weights.astype(np.float32))
    np.testing.assert_array_equal(compiled, floated)


@pytest.mark.parametrize("w", [1, 2, 5, 16])
def test_winnow_matches_the_reference(w: int) -> None:
    # random documents, increasing and decreasing runs (the window queue full, then emptied at
    # every step), repeated values, and documents shorter than the window
    counts = np.concatenate([RNG.integers(1, 300, size=60), [1, w, w + 1, 40, 40, 40]])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    sequence = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    runs = offsets[-4:-1]
    sequence[runs[0] : runs[0] + 40] = np.arange(40, dtype=np.uint64)
    sequence[runs[1] : runs[1] + 40] = np.arange(40, 0, -1, dtype=np.uint64)
    sequence[runs[2] : runs[2] + 40] = RNG.integers(0, 3, size=40, dtype=np.uint64)
    (keys, key_offsets), (expected_keys, expected_offsets) = _both(
        lambda _: winnow(sequence, offsets, w)
    )
    np.testing.assert_array_equal(keys, expected_keys)
    np.testing.assert_array_equal(key_offsets, expected_offsets)


def test_high_halves_match_the_reference() -> None:
    # sorted groups: all below 2**63, all above, both (the run above moves to the front), one
    # value, none, equal high halves; and the groups of a slice of the values
    counts = np.concatenate([RNG.integers(1, 200, size=50), [1, 0, 1, 7, 30]])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    values = RNG.integers(0, 2**64, size=int(offsets[-1]), dtype=np.uint64)
    values[offsets[0] : offsets[1]] >>= np.uint64(1)  # every top bit clear
    values[offsets[1] : offsets[2]] |= np.uint64(1 << 63)  # every top bit set
    values[offsets[-2] : offsets[-1]] = np.uint64(0xDEADBEEF) << np.uint64(32)
    for lo, hi in itertools.pairwise(offsets.tolist()):
        values[lo:hi].sort()
    for within in (offsets, offsets[1:]):
        compiled, reference = _both(lambda backend, w=within: backend.high_halves(values, w))
        np.testing.assert_array_equal(compiled, reference)
        halves = (values >> np.uint64(32)).astype(np.uint32).view(np.int32)
        expected = [np.sort(halves[lo:hi]) for lo, hi in itertools.pairwise(within.tolist())]
        np.testing.assert_array_equal(compiled, np.concatenate(expected))


def test_masked_keys_match_the_reference_and_the_formula() -> None:
    ends = np.array([0, 2**64 - 1], dtype=np.uint64)
    values = np.concatenate([RNG.integers(0, 2**64, size=40, dtype=np.uint64), ends])
    masks = RNG.integers(0, 2**64, size=10, dtype=np.uint64)
    salts = RNG.integers(0, 2**64, size=10, dtype=np.uint64)
    compiled, reference = _both(lambda backend: backend.masked_keys(values, masks, salts))
    np.testing.assert_array_equal(compiled, reference)
    assert compiled.shape == (42, 10)
    assert int(compiled[3, 7]) == int(mix64((values[3:4] & masks[7]) ^ salts[7])[0])
    empty = _both(lambda backend: backend.masked_keys(values[:0], masks, salts))
    assert [e.shape for e in empty] == [(0, 10), (0, 10)]


@pytest.mark.parametrize("count", [1, 3, 4, 15, 40, 700, 5000])
@pytest.mark.parametrize("window", [0, 1, 16])
def test_one_document_matches_the_reference_and_the_kernels_in_steps(
    count: int, window: int
) -> None:
    tokens = RNG.integers(0, 2**64, size=count, dtype=np.uint64)
    tokens[count // 2 :: 3] = tokens[0]  # repeated tokens, repeated shingles
    a, b = RNG.integers(0, 2**64, size=(2, 84), dtype=np.uint64)
    band_salts = np.arange(1, 13, dtype=np.uint64)
    masks, mask_salts = RNG.integers(0, 2**64, size=(2, 10), dtype=np.uint64)
    for rows in (7, 0):
        compiled, reference = _both(
            lambda backend, r=rows: backend.one_document(
                tokens, 4, DocumentConstants(a, b, window, r, band_salts, masks, mask_salts)
            )
        )
        assert compiled.simhash == reference.simhash
        for mine, theirs in zip(compiled, reference, strict=True):
            np.testing.assert_array_equal(mine, theirs)
        assert len(compiled.band_keys) == (12 if rows else 0)
        assert (len(compiled.sample_keys) > 0) == (window > 0)
        assert kernels.COMPILED is not None
        constants = DocumentConstants(a, b, window, rows, band_salts, masks, mask_salts)
        steps = kernels.one_document_in_steps(kernels.COMPILED, tokens, 4, constants)
        for mine, theirs in zip(compiled, steps, strict=True):
            np.testing.assert_array_equal(mine, theirs)


def test_salted_mix_matches_the_reference_and_refuses_missing_salts() -> None:
    values, salts = RNG.integers(0, 2**64, size=(2, 50), dtype=np.uint64)
    compiled, reference = _both(lambda backend: backend.salted_mix(values, salts))
    np.testing.assert_array_equal(compiled, reference)
    np.testing.assert_array_equal(compiled, mix64(values ^ salts))
    for chosen in BACKENDS:
        assert chosen is not None
        with pytest.raises(ValueError, match="a salt and a writable place per value"):
            chosen.salted_mix(values, salts[:-1])


def test_one_document_refuses_no_tokens(backend: Backend) -> None:
    a = np.ones(4, dtype=np.uint64)
    none = np.empty(0, dtype=np.uint64)
    with pytest.raises(ValueError, match="arguments do not agree"):
        backend.one_document(none, 4, DocumentConstants(a, a, 0, 0, none, none, none))


def test_masked_keys_refuse_masks_without_their_salts(backend: Backend) -> None:
    with pytest.raises(ValueError, match="as many salts as masks"):
        backend.masked_keys(
            np.arange(3, dtype=np.uint64),
            np.arange(2, dtype=np.uint64),
            np.arange(3, dtype=np.uint64),
        )


@pytest.mark.parametrize("offsets", [[0, 4], [], [-1, 1], [0, 2, 1]])
def test_high_halves_refuse_offsets_outside_the_values(
    offsets: list[int], backend: Backend
) -> None:
    with pytest.raises(ValueError, match="groups of values"):
        backend.high_halves(np.arange(3, dtype=np.uint64), np.array(offsets, dtype=np.int64))


@pytest.mark.parametrize(
    "offsets", [[0, 2, 2, 3], [0, 4], [], [-1, 1]], ids=["empty", "past-end", "none", "negative"]
)
def test_kernels_refuse_bad_groups(offsets: list[int], backend: Backend) -> None:
    values = np.arange(3, dtype=np.uint64)
    bad = np.array(offsets, dtype=np.int64)
    with pytest.raises(ValueError, match="at least one feature"):
        backend.simhash_majority(values, bad)
    with pytest.raises(ValueError, match="at least one value"):
        backend.winnow(values, bad, 4)


def _fields(batch: object) -> dict[str, object]:
    return {
        field.name: getattr(batch, field.name)
        for field in dataclasses.fields(batch)  # type: ignore[arg-type]
    }


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    # many documents of many words, with Cyrillic text
    return _random_documents(300, 120, 14) + ["Съешь же ещё этих мягких булок, да выпей чаю"] * 3


def _fingerprints(docs: list[str]) -> dict[str, object]:
    return _fields(fingerprint_batch(docs, FingerprintParams()))


def test_batches_fingerprint_the_same_with_either_kernels(corpus: list[str]) -> None:
    compiled, reference = _both(lambda _: _fingerprints(corpus))
    assert compiled.keys() == reference.keys()
    for name, value in compiled.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, reference[name], err_msg=name)
        else:
            assert value == reference[name], name
