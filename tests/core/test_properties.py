"""Property tests of the fingerprinting core (hypothesis)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dedup_store.core import (
    FingerprintParams,
    band_keys,
    block_keys,
    estimate_jaccard,
    fingerprint,
    minhash_signatures,
    optimal_bands,
)
from dedup_store.core.simhash import block_sizes

LATIN = st.text(alphabet="abcdefghijklmnopqrstuvwxyzéü", min_size=1, max_size=8)
CYRILLIC = st.text(alphabet="абвгдеёжзийклмнопрстуфхцчшщъыьэюя", min_size=1, max_size=8)
CJK = st.text(alphabet="中文分词混合文本河水整夜不断上涨農民", min_size=1, max_size=6)
DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=4)
WORDS = st.lists(st.one_of(LATIN, CYRILLIC, CJK, DIGITS), min_size=1, max_size=40)
SEPARATORS = st.sampled_from(
    [" ", "  ", "\n", "\t", ", ", ". ", "! ", " - ", "...", "«", "»", " — ", "_", "/", "；", "。"]
)


def _render(data: st.DataObject, words: list[str]) -> str:
    """The words with random separators and case, sometimes wrapped in HTML."""
    parts = [data.draw(SEPARATORS) if data.draw(st.booleans()) else ""]
    for word in words:
        parts.append(word.upper() if data.draw(st.booleans()) else word)
        parts.append(data.draw(SEPARATORS))
    text = "".join(parts)
    wrapper = data.draw(st.sampled_from(["", "p", "div", "li"]))
    if wrapper:
        text = f"<html><body><{wrapper}>{text}</{wrapper}><!-- comment --></body></html>"
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=WORDS, data=st.data(), stem=st.booleans())
def test_equal_canonical_text_gives_equal_fingerprints(
    words: list[str], data: st.DataObject, stem: bool
) -> None:
    params = FingerprintParams(stem=stem, stopwords=False)
    a, b = fingerprint(_render(data, words), params), fingerprint(_render(data, words), params)
    assert a.canonical_text == b.canonical_text
    assert a.exact_hash == b.exact_hash
    assert np.array_equal(a.shingles, b.shingles)
    assert np.array_equal(a.signature, b.signature)
    assert np.array_equal(a.band_keys, b.band_keys)
    assert a.simhash == b.simhash
    assert np.array_equal(a.block_keys, b.block_keys)
    assert np.array_equal(a.sample_keys, b.sample_keys)


def _keys(value: int, blocks: int, k: int) -> set[int]:
    return set(block_keys(np.array([value], dtype=np.uint64), blocks, k)[0].tolist())


SCHEMES = st.sampled_from([(4, 3), (5, 3)])
U64S = st.integers(min_value=0, max_value=2**64 - 1)


@settings(max_examples=400, deadline=None)
@given(value=U64S, scheme=SCHEMES, data=st.data())
def test_values_within_k_share_a_block_key(
    value: int, scheme: tuple[int, int], data: st.DataObject
) -> None:
    blocks, k = scheme
    flips = data.draw(st.sets(st.integers(0, 63), max_size=k))
    other = value ^ sum(1 << bit for bit in flips)
    assert _keys(value, blocks, k) & _keys(other, blocks, k)


@settings(max_examples=200, deadline=None)
@given(value=U64S, scheme=SCHEMES, data=st.data())
def test_k_plus_one_bits_in_distinct_blocks_share_no_key(
    value: int, scheme: tuple[int, int], data: st.DataObject
) -> None:
    blocks, k = scheme
    starts = list(itertools.accumulate([0, *block_sizes(blocks)]))
    chosen = data.draw(st.permutations(range(blocks)))[: k + 1]
    flips = [data.draw(st.integers(starts[b], starts[b + 1] - 1)) for b in chosen]
    other = value ^ sum(1 << bit for bit in flips)
    assert not _keys(value, blocks, k) & _keys(other, blocks, k)


def test_block_key_counts_and_widths() -> None:
    assert block_keys(np.zeros(3, dtype=np.uint64), 4, 3).shape == (3, 4)
    assert block_keys(np.zeros(3, dtype=np.uint64), 5, 3).shape == (3, 10)
    assert block_sizes(4) == [16, 16, 16, 16]
    assert sorted(block_sizes(5)) == [12, 13, 13, 13, 13]
    # a key names its combination: the same masked bits under another combination differ
    assert len(_keys(0, 4, 3)) == 4 and len(_keys(0, 5, 3)) == 10


def _pair(
    rng: np.random.Generator, size_a: int, size_b: int, shared: int
) -> tuple[np.ndarray, ...]:
    values = np.unique(rng.integers(0, 2**64 - 1, size=size_a + size_b, dtype=np.uint64))
    rng.shuffle(values)
    a = np.sort(values[:size_a])
    b = np.sort(np.concatenate([values[:shared], values[size_a : size_a + size_b - shared]]))
    return a, b


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), num_perm=st.sampled_from([64, 84, 128]))
def test_minhash_estimate_tracks_exact_jaccard(seed: int, num_perm: int) -> None:
    rng = np.random.default_rng(seed)
    pairs, outside, errors = 300, 0, []
    for _ in range(pairs):
        size_a, size_b = (int(x) for x in rng.integers(20, 400, size=2))
        shared = int(rng.integers(0, min(size_a, size_b) + 1))
        a, b = _pair(rng, size_a, size_b, shared)
        exact = shared / (size_a + size_b - shared)
        sigs = minhash_signatures(
            np.concatenate([a, b]), np.array([0, size_a, size_a + size_b]), num_perm, seed
        )
        estimate = estimate_jaccard(sigs[0], sigs[1])
        sigma = math.sqrt(exact * (1 - exact) / num_perm)
        errors.append(estimate - exact)
        if abs(estimate - exact) > 3 * sigma + 1e-9:
            outside += 1
    assert outside <= pairs * 0.02, f"{outside} of {pairs} estimates beyond 3 standard errors"
    assert abs(float(np.mean(errors))) < 0.01, "the estimate is biased"


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), equal=st.sets(st.integers(0, 5)))
def test_broder_mega_keys_match_two_of_six(seed: int, equal: set[int]) -> None:
    params = FingerprintParams(scheme="broder")
    assert params.bands[0] == 6
    rows = params.bands[1]
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, size=params.num_perm, dtype=np.uint32)
    b = rng.integers(0, 2**32, size=params.num_perm, dtype=np.uint32)
    for band in equal:
        b[band * rows : (band + 1) * rows] = a[band * rows : (band + 1) * rows]
    keys = band_keys(np.stack([a, b]), params)
    assert keys.shape == (2, 15)
    shares_key = bool(set(keys[0].tolist()) & set(keys[1].tolist()))
    assert shares_key == (len(equal) >= 2)


@settings(max_examples=25, deadline=None)
@given(threshold=st.floats(0.6, 0.95), num_perm=st.integers(32, 200))
def test_optimal_bands_put_the_s_curve_at_the_threshold(threshold: float, num_perm: int) -> None:
    b, r = optimal_bands(threshold, num_perm, 0.9)
    assert b >= 1 and r >= 1 and b * r <= num_perm
    candidate = 1 - (1 - threshold**r) ** b
    assert candidate >= 0.7, f"b={b} r={r} finds a pair at the threshold with p={candidate:.2f}"
    far = 1 - (1 - (threshold / 2) ** r) ** b
    assert far <= 0.35, f"b={b} r={r} finds a pair at half the threshold with p={far:.2f}"


def test_optimal_bands_grow_rows_with_the_threshold() -> None:
    rows = [optimal_bands(t, 128, 0.9)[1] for t in (0.3, 0.5, 0.7, 0.8, 0.9, 0.95)]
    assert rows == sorted(rows)
    defaults = FingerprintParams()
    assert optimal_bands(0.8, 84, defaults.false_negative_weight) == defaults.bands
