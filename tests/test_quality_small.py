"""The quality benchmark on a small corpus: its machinery, and the store against brute force."""

from __future__ import annotations

import dataclasses
import random

import pytest

from benchmarks import evaluation, quality
from benchmarks.quality_corpus import (
    CorpusDoc,
    build_corpus,
    excerpt,
    html_wrap,
    paragraphs,
    truncate,
    word_edit,
)
from dedup_store.core import FingerprintParams, canonical_tokens, fingerprint_batch

SIZE = 240
PARAMS = FingerprintParams()


@pytest.fixture(scope="module")
def docs() -> list[CorpusDoc]:
    return build_corpus(SIZE, seed=3)


@pytest.fixture(scope="module")
def truth(docs: list[CorpusDoc]) -> quality.Truth:
    tokens = [canonical_tokens(d.text, PARAMS) for d in docs]
    return quality.ground_truth(tokens, PARAMS.shingle_size, PARAMS.cjk_shingle_size)


def test_shingle_set_words_short_runs_and_cjk() -> None:
    assert quality.shingle_set(["a", "b", "c", "d", "e"], 4, 3) == {
        ("a", "b", "c", "d"),
        ("b", "c", "d", "e"),
    }
    assert quality.shingle_set(["a", "b"], 4, 3) == {("a", "b")}
    cjk = quality.shingle_set(["x", "重复文档"], 4, 3)
    assert cjk == {("x",), ("\x00cjk", "重", "复", "文"), ("\x00cjk", "复", "文", "档")}


def test_ground_truth_scores_by_hand() -> None:
    a = ["one", "two", "three", "four", "five", "six"]
    b = ["one", "two", "three", "four", "five", "seven"]
    c = ["three", "four", "five"]
    truth = quality.ground_truth([a, b, c], 3)
    # a: 123 234 345 456; b: 123 234 345 457; c: 345
    assert truth.score(0, 1) == (3 / 5, 3 / 4)
    assert truth.score(0, 2) == (1 / 4, 1.0)
    assert truth.jaccard_pairs(0.5) == {(0, 1)}
    assert truth.containment_pairs(0.8) == {(0, 2), (1, 2)}


def test_evaluate_counts_recall_precision_and_misses() -> None:
    positives = {(0, 1), (0, 2), (1, 2), (3, 4)}
    found = {(0, 1), (0, 2), (5, 6)}
    row = evaluation.evaluate("x", 0.8, found, positives, lambda p: False, 1.0)
    assert row.recall == 0.5
    assert row.precision == pytest.approx(2 / 3)
    assert row.missed == {(1, 2), (3, 4)}


def test_corpus_is_reproducible_and_has_every_edit(docs: list[CorpusDoc]) -> None:
    again = build_corpus(SIZE, seed=3)
    assert [(d.id, d.text) for d in again] == [(d.id, d.text) for d in docs]
    kinds = {d.kind for d in docs}
    assert {"base", "reorder", "html", "truncate", "excerpt", "word-1%", "word-20%"} <= kinds
    assert len({d.id for d in docs}) == len(docs)
    bases = [d for d in docs if d.kind == "base"]
    assert all(40 <= d.words <= 600 for d in bases)
    assert build_corpus(20, seed=4)[0].text != docs[0].text


def test_edits_do_what_they_say() -> None:
    rng = random.Random(1)
    text = "\n\n".join(" ".join(f"w{p}x{i}" for i in range(60)) for p in range(4))
    assert paragraphs("  a b c\n  d e\n\n\n   f g h\n") == ["a b c d e", "f g h"]
    assert word_edit(text, 0.0, rng, ["zz"]) == text
    edited = word_edit(text, 0.2, rng, ["zz"])
    assert edited != text and abs(len(edited.split()) - 240) < 60
    kept = truncate(text, rng).split()
    assert 120 <= len(kept) <= 216 and kept == text.split()[: len(kept)]
    piece = excerpt(text, rng)
    assert piece is not None and piece in text and len(piece.split()) <= 80
    page = html_wrap(text, "Title", rng)
    assert "<nav>" in page and "<footer>" in page and "w3x59" in page


def test_ground_truth_agrees_with_the_fingerprints(
    docs: list[CorpusDoc], truth: quality.Truth
) -> None:
    batch = fingerprint_batch([d.text for d in docs], PARAMS)
    assert list(batch.source_index) == list(range(len(docs)))
    assert all(len(s) == c for s, c in zip(truth.sets, batch.shingle_counts, strict=True))
    checked = 0
    for i, j in sorted(truth.scores)[:300]:
        expected = truth.score(i, j)
        assert batch.row(i).jaccard(batch.row(j)) == pytest.approx(expected[0])
        assert batch.row(i).containment(batch.row(j)) == pytest.approx(expected[1])
        checked += 1
    assert checked > 20


def test_relation_names_the_edit(docs: list[CorpusDoc]) -> None:
    index = {d.id: i for i, d in enumerate(docs)}
    edited = next(d for d in docs if d.kind == "html")
    assert edited.parent is not None
    assert quality.relation(docs, index[edited.parent], index[edited.id]) == "html"


def test_datasketch_rows_are_measured(truth: quality.Truth) -> None:
    raw, verified = quality.datasketch_rows(truth, [0.8])
    assert raw.truth == verified.truth == len(truth.jaccard_pairs(0.8)) > 0
    assert verified.found <= raw.found
    assert 0.5 < raw.recall <= 1.0


@pytest.mark.db
def test_store_finds_what_brute_force_finds(
    docs: list[CorpusDoc], truth: quality.Truth, database_url: str
) -> None:
    run = quality.run_store(database_url, "test_small", PARAMS, docs)
    jaccard, containment = quality.store_rows([run], truth, docs)
    (row,) = jaccard
    assert row.truth > 20
    assert row.recall >= 0.98, quality.miss_report(row, docs, truth, 0)
    assert row.precision == 1.0
    for (i, j), (method, jac, con, _) in run.pairs.items():
        if method in ("minhash", "exact"):
            assert jac == pytest.approx(truth.score(i, j)[0], abs=1e-6)
            assert con == pytest.approx(truth.score(i, j)[1], abs=1e-6)
    contained, excerpts = containment
    assert contained.recall >= 0.95 and contained.precision == 1.0
    assert excerpts.truth > 5 and excerpts.recall >= 0.9
    assert run.shingle_bytes > 0 and run.total_bytes > run.shingle_bytes


@pytest.mark.db
def test_simhash_block_schemes_find_the_same_pairs(
    docs: list[CorpusDoc], database_url: str
) -> None:
    found = []
    for blocks in (4, 5):
        params = dataclasses.replace(PARAMS, threshold=1.0, containment=0.0, simhash_blocks=blocks)
        run = quality.run_store(database_url, f"test_simhash_{blocks}", params, docs)
        found.append(quality.store_pairs(run, ("simhash", "minhash", "exact")))
        assert all(run.pairs[p][3] <= 3 for p in quality.store_pairs(run, ("simhash",)))
    assert found[0] == found[1] and len(found[0]) > 10
